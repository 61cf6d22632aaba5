"""The history file: append-only, bounded, thinned oldest-first, never losing an event."""
from __future__ import annotations

import os
import time

import pytest

from boxagent.runlog import points, store
from boxagent.runlog.store import HistoryFile
from tests.report.conftest import GIB, Driver, gpu, run_block, status

T0 = 1_714_550_400.0
WEEK = 7 * 24 * 3600


def _point(t: float, util: int = 90, mem: int = 10 * GIB, mask: int = 0) -> dict:
    return {"t": t, "s": 60, "m": [mem, 64 * GIB], "d": [50.0, 5.0],
            "g": {str(i): [util, 61440, 70, 550, 1980, mask] for i in range(8)}}


def test_appending_a_point_does_not_rewrite_the_file(tmp_path):
    hist = HistoryFile(str(tmp_path), "r1", 60)
    for k in range(50):
        hist.add_point(_point(T0 + 60 * k))
    path = tmp_path / "history.jsonl"
    before, ino = path.read_bytes(), os.stat(path).st_ino
    hist.add_point(_point(T0 + 60 * 50))
    after = path.read_bytes()
    assert os.stat(path).st_ino == ino                    # the same file, not a replacement
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    assert hist.compactions == 0


@pytest.mark.slow
def test_a_week_on_8_gpus_stays_under_3_mb_and_keeps_every_event(tmp_path):
    """A simulated 7-day run: one status every minute, 8 GPUs, metrics and progress, a few
    hundred events. The file never passes the budget; older points are thinned, recent ones
    keep their minute, every event is still there, and the rewrites are few (amortised)."""
    driver = Driver(_home(tmp_path))
    driver.make_run("week")
    driver.event(T0, "run_started", "week")
    gpus = [gpu(i, util=90 + i) for i in range(8)]
    peak, n_events = 0, 1
    for k in range(WEEK // 60 + 1):
        t = T0 + 60 * k
        run = run_block("week", metrics={"loss": 2.0 / (1 + k / 500), "acc": min(0.99, k / 10000)},
                        progress={"done": k, "total": WEEK // 60, "fraction": k / (WEEK // 60)})
        driver.sample(t, status([run], gpus=gpus, mem=(10 + k % 40) * GIB))
        if k % 30 == 0:                                  # an alert raised and cleared every half hour
            driver.event(t, "gpu_throttle", "week", "warning" if k % 60 == 0 else "info", key="gpu_throttle:3",
                         resolved=k % 60 != 0, stage="train", evidence=["clock-event reasons: hw_slowdown"])
            n_events += 1
        if k % 500 == 0:
            peak = max(peak, driver.history_path("week").stat().st_size)
    compactions = driver.part.live["week"].hist.compactions
    driver.event(T0 + WEEK, "run_succeeded", "week")
    size = driver.history_path("week").stat().st_size
    assert max(peak, size) < store.BUDGET
    hist = store.read(str(driver.history_path("week")))
    assert len(hist["events"]) == n_events + 1
    pts = hist["points"]
    assert pts[0]["t"] == T0 and pts[-1]["t"] >= T0 + WEEK - 60        # the whole life is there
    assert pts[-1]["s"] == 60 and pts[0]["s"] > 60                       # recent minutes kept, old ones merged
    assert all(b["t"] > a["t"] for a, b in zip(pts, pts[1:]))
    assert 1 <= compactions <= 12          # ~700 KB of appends between two rewrites


def _home(tmp_path):
    from boxagent.base.home import Home
    return Home(str(tmp_path / "home"))


def test_thinning_merges_the_oldest_finest_points_first_and_keeps_what_matters():
    pts = [_point(T0 + 60 * k, util=100 if k % 2 else 0, mem=(k + 1) * GIB, mask=0x40 if k == 2 else 0)
           for k in range(1000)]
    out = store.thin(pts, budget=len(b"".join(store._line(p) for p in pts)) // 2, keep_recent=100, min_points=10)
    assert len(out) < 600
    assert out[-1] == pts[-1] and out[-100]["s"] == 60               # the newest stay as they were
    first = out[0]
    assert first["s"] >= 120 and first["t"] == T0
    assert first["g"]["0"][0] == 50                                    # utilisation averaged
    assert first["m"][0] == int(first["s"] // 60) * GIB                # memory keeps its maximum
    assert any(p["g"]["0"][5] & 0x40 for p in out[:5])                 # a throttle bit survives the merge


def test_thinning_does_not_bridge_a_gap_while_it_can_avoid_it():
    pts = [_point(T0 + 60 * k) for k in range(10)] + [_point(T0 + 3600 + 60 * k) for k in range(10)]
    out = store._merge_finest(pts)
    assert all(not (p["t"] < T0 + 3600 < p["t"] + p["s"]) for p in out)


def test_a_torn_last_line_and_duplicates_are_tolerated(tmp_path):
    hist = HistoryFile(str(tmp_path), "r1", 60)
    ev = {"id": "e1", "at": "2024-05-01T08:00:00Z", "type": "run_started", "severity": "info", "run": "r1"}
    hist.add_event(ev)
    hist.add_event(ev)                                   # a daemon restart replayed it
    hist.add_point(_point(T0))
    hist.add_point(_point(T0, util=7))                   # the same minute written twice: the last wins
    with open(hist.path, "ab") as fh:
        fh.write(b'{"k":"p","t":17145')                   # killed mid-write
    got = store.read(hist.path)
    assert [e["id"] for e in got["events"]] == ["e1"]
    assert len(got["points"]) == 1 and got["points"][0]["g"]["0"][0] == 7
    assert got["run"] == "r1" and got["step_s"] == 60


def test_a_flood_of_routine_events_is_counted_not_kept(tmp_path):
    hist = HistoryFile(str(tmp_path), "r1", 60, event_bytes=20_000)
    for i in range(1000):
        hist.add_event({"id": "n%d" % i, "at": "2024-05-01T08:00:00Z", "type": "log_silent", "severity": "info"})
    hist.add_event({"id": "crit", "at": "2024-05-01T09:00:00Z", "type": "oom_kill", "severity": "critical"})
    hist.add_event({"id": "end", "at": "2024-05-01T09:00:01Z", "type": "run_succeeded", "severity": "info"})
    hist.note_dropped(T0)
    got = store.read(hist.path)
    ids = [e["id"] for e in got["events"]]
    assert "crit" in ids and "end" in ids
    assert got["dropped_events"] == 1000 - (len(ids) - 2)
    assert os.path.getsize(hist.path) < 40_000


def test_a_huge_event_is_clipped():
    ev = {"id": "x", "at": "2024-05-01T08:00:00Z", "type": "stage_failed", "severity": "critical",
          "last_lines": ["x" * 2000] * 20, "cause": {"class": "code_error", "summary": "s" * 5000}}
    out = store.clip_event(ev)
    assert len(store._line({"k": "e", "e": out})) <= store.MAX_EVENT_BYTES + 100
    assert out["id"] == "x" and out["type"] == "stage_failed" and out["ts"] == T0


def test_merge_semantics():
    a = {"t": 0, "s": 30, "m": [5, 10], "g": {"0": [100, 10, 60, 400, 1900, 0]}, "x": {"loss": 1.0}, "st": "a"}
    b = {"t": 30, "s": 10, "m": [3, 12], "g": {"0": [0, 20, 50, 200, 1500, 8]}}
    m = points.merge(a, b)
    assert m["t"] == 0 and m["s"] == 40
    assert m["m"] == [5, 12]                             # peak memory, the latest limit
    assert m["g"]["0"] == [75, 20, 60, 350, 1800, 8]
    assert m["x"] == {"loss": 1.0} and m["st"] == "a"    # b has no metric: a's last value stays


def test_parse_iso():
    assert points.parse_iso("2024-05-01T08:00:00Z") == T0
    assert points.parse_iso("2024-05-01T08:00:00.250Z") == T0 + 0.25
    assert points.parse_iso("yesterday") is None
    assert time.gmtime(points.parse_iso("2024-05-01T08:00:00Z")).tm_hour == 8
