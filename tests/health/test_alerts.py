"""Alert hysteresis: enter at the threshold, leave a margin below; counted flags; latches."""
from __future__ import annotations

from boxagent.health.alerts import AlertBook, merge_thresholds

GiB = 1 << 30


def _mem(pct, oom=0):
    return {"memory": {"cgroup": "v2", "used_pct": pct, "max_bytes": 64 * GiB, "current_bytes": int(pct * 64 * GiB / 100),
                       "oom_kill": oom}}


def _walk(book, values, key="memory"):
    out = []
    for i, v in enumerate(values):
        specs = [s for s in book.evaluate(_mem(v), [], [], 1000.0 + 10 * i) if s["key"] == key]
        out.append(specs[0]["severity"] if specs else None)
    return out


def test_memory_hysteresis_no_flapping():
    book = AlertBook()
    #              enter   stay  stay  leave crit      stay  ease  leave
    values = [85, 90.0, 89.5, 87.5, 86.9, 97.0, 95, 94.5, 93.9, 80]
    assert _walk(book, values) == [None, "warning", None, None, "info", "critical", None, None, "warning", "info"]


def test_memory_rise_while_a_stage_runs_waits_for_the_hold():
    """A process racing to the limit dies of the OOM killer within a second: its stage's
    failure is the one message, so a level seen once while a stage runs is not yet an alert."""
    book = AlertBook({"memory_hold_s": 5})
    run = [("r1", "train")]

    def at(pct, t):
        return [s["severity"] for s in book.evaluate(_mem(pct), [], run, t) if s["key"] == "memory"]
    assert at(98, 1000.0) == []          # the spike just before the kill
    assert at(40, 1001.0) == []          # the stage died; memory is back: never an alert
    assert at(92, 1010.0) == []          # a slow climb: held...
    assert at(93, 1016.0) == ["warning"]  # ...still there after the hold: warned
    assert at(98, 1017.0) == []          # the step to critical is held too
    assert at(98, 1023.0) == ["critical"]
    # with no stage running there is no stage failure to speak for it: at once
    idle = AlertBook({"memory_hold_s": 5})
    assert [s["severity"] for s in idle.evaluate(_mem(98), [], [], 1000.0)] == ["critical"]


def test_memory_alert_is_listed_while_active():
    book = AlertBook()
    book.evaluate(_mem(92), [], [], 1000.0)
    [a] = book.alerts()
    assert (a["key"], a["type"], a["severity"], a["since"]) == ("memory", "memory_high", "warning", "1970-01-01T00:16:40.000Z")
    assert "92%" in a["summary"]
    book.evaluate(_mem(50), [], [], 1010.0)
    assert book.alerts() == []


def test_oom_kill_increase_is_critical_and_attributed():
    book = AlertBook()
    assert book.evaluate(_mem(50, oom=2), [], [("r1", "train")], 1000.0) == []   # baseline, no blame
    # While a stage runs, a kill is held for oom_defer_s: the stage may be dying of it.
    assert book.evaluate(_mem(50, oom=3), [], [("r1", "train"), ("r2", "eval")], 1010.0) == []
    [s] = book.evaluate(_mem(50, oom=3), [], [("r1", "train"), ("r2", "eval")], 1016.0)
    assert (s["type"], s["severity"], s["run"], s["stage"], s["oom_kill_delta"]) == ("oom_kill", "critical", "r1", "train", 1)
    assert s["running"] == [["r1", "train"], ["r2", "eval"]]
    assert book.evaluate(_mem(50, oom=3), [], [], 1020.0) == []                 # no repeat
    assert [s["type"] for s in book.evaluate(_mem(50, oom=4), [], [], 1030.0)] == ["oom_kill"]  # every kill is news
    assert book.evaluate(_mem(50, oom=4), [], [], 1030.0 + 901) == [] and book.alerts() == []  # latched, then lapses


def test_an_oom_kill_a_stage_reports_as_its_cause_raises_no_alert_of_its_own():
    book = AlertBook()
    book.evaluate(_mem(50, oom=0), [], [("r1", "train")], 1000.0)
    assert book.evaluate(_mem(50, oom=1), [], [("r1", "train")], 1010.0) == []   # held
    book.claim_oom(1)                                                            # the stage died of it
    assert book.evaluate(_mem(50, oom=1), [], [], 1020.0) == [] and book.alerts() == []
    # a later kill nobody claims is news again, at once when no stage runs
    assert [s["oom_kill_delta"] for s in book.evaluate(_mem(50, oom=2), [], [], 1030.0)] == [1]


def test_disk_and_inode_alerts_per_filesystem():
    d = [{"path": "/a", "role": "state", "dev": 1, "bytes_used_pct": 91.0, "inodes_used_pct": 98.0, "bytes_free": 1, "inodes_free": 3},
         {"path": "/a/w", "role": "workdir", "dev": 1, "bytes_used_pct": 91.0, "inodes_used_pct": 98.0},
         {"path": "/b", "role": "data", "dev": 2, "bytes_used_pct": 10.0, "inodes_used_pct": 10.0}]
    specs = AlertBook().evaluate({"disks": d}, [], [], 1000.0)
    assert [(s["type"], s["severity"], s["key"]) for s in specs] == [
        ("disk_low", "warning", "disk_low:/a"), ("inodes_low", "critical", "inodes_low:/a")]


def test_gpu_lost_stays_until_the_gpu_answers():
    book = AlertBook()
    g = {"index": 2, "lost": True, "name": "H100"}
    assert [s["type"] for s in book.evaluate({"gpus": [g]}, [], [], 1.0)] == ["gpu_lost"]
    assert book.evaluate({"gpus": [g]}, [], [], 2.0) == []
    assert [(a["type"], a["class"]) for a in book.alerts()] == [("gpu_lost", "gpu_hardware")]


def test_hardware_xid_latches_for_good_other_xids_lapse():
    book = AlertBook({"latch_s": 60})
    hw = {"type": "gpu_xid", "code": 79, "gpu": 0, "hardware": True, "summary": "Xid 79", "source": "nvml"}
    soft = {"type": "gpu_xid", "code": 13, "gpu": 0, "hardware": False, "summary": "Xid 13", "source": "kmsg"}
    specs = book.evaluate({}, [hw, soft], [], 1000.0)
    assert [(s["severity"], s["code"]) for s in specs] == [("critical", 79), ("warning", 13)]
    assert book.evaluate({}, [soft], [], 1010.0) == []            # a repeat is counted, not re-sent
    assert [a["count"] for a in book.alerts()] == [1, 2]
    book.evaluate({}, [], [], 1000.0 + 3600)
    assert [a["key"] for a in book.alerts()] == ["gpu_xid:0:79"]


def test_thresholds_merge_ignores_junk():
    t = merge_thresholds({"memory_warn_pct": 80, "nonsense": 1}, {"memory_warn_pct": "85", "disk_crit_pct": 99, "latch_s": True})
    assert (t["memory_warn_pct"], t["disk_crit_pct"], t["latch_s"]) == (80, 99, 900)
    assert "nonsense" not in t
