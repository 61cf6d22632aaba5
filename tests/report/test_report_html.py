"""The report page from report-data documents: offline, escaped, and right about the run's story.
(The browser tests render real runs; these check the page's rules on documents made here.)"""
from __future__ import annotations

import json
import time

import pytest

from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.base.units import iso_utc
from boxagent.runlog import report_data
from rgt_client.report.page import render
from tests.report.conftest import GIB, Driver, gpu, run_block, status
from tests.report.htmlcheck import csp, offline_problems, tag_counts

T0 = 1_714_550_400.0
HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)><a href="https://evil.example/x">'


def _doc(tmp_path, minutes: int = 30, state: str = "succeeded", alive: bool = False, extra=None) -> dict:
    """A run recorded by RunLog (driven directly), then report-data's document of it."""
    home = Home(str(tmp_path / "home"))
    d = Driver(home)
    d.make_run("r1")
    (tmp_path / "home" / "runs" / "r1" / "spec.json").write_text(json.dumps(
        {"name": "r1", "workdir": "/", "stage": [{"name": "train", "run": "secret-cmd"}]}))
    d.event(T0, "run_started", "r1")
    d.event(T0, "stage_started", "r1", stage="train", attempt=1)
    for k in range(minutes * 6):
        t = T0 + 10 * k
        reasons = ["hw_thermal_slowdown"] if 10 <= k // 6 < 15 else []
        d.sample(t, status([run_block("r1", metrics={"loss": 2.0 / (1 + k / 30)},
                                      progress={"done": k, "total": minutes * 6, "fraction": k / (minutes * 6)})],
                           gpus=[gpu(0), gpu(1, reasons=reasons, sm=1200 if reasons else 1980)],
                           mem=int((10 + k / 10) * GIB)))
    d.event(T0 + 600, "gpu_throttle", "r1", "warning", key="gpu_throttle:1", stage="train", summary="GPU 1 is throttled")
    d.event(T0 + 900, "gpu_throttle", "r1", "info", key="gpu_throttle:1", resolved=True, summary="GPU 1 no longer throttled")
    for ev in extra or []:
        d.event(T0 + ev.pop("dt"), ev.pop("type"), "r1", ev.pop("severity", "warning"), **ev)
    end = T0 + 60 * minutes
    if state != "running":
        d.event(end, "stage_succeeded" if state == "succeeded" else "stage_failed", "r1", stage="train", attempt=1)
        d.event(end, "run_" + state, "r1")
    doc = report_data.build(home, Roots(), "r1", now=end + 5)
    doc["run"] = {"name": "r1", "state": state, "workdir": "/", "started_at": iso_utc(T0),
                  "ended_at": iso_utc(end) if state != "running" else None,
                  "stages": [{"name": "train", "state": "running" if state == "running" else state, "attempt": 1,
                              "metrics": {"loss": 0.1}}]}
    doc["agent"]["running"] = alive
    return doc


def test_the_page_is_self_contained(tmp_path):
    html = render(_doc(tmp_path))
    assert offline_problems(html) == []
    tags = tag_counts(html)
    assert tags.get("svg", 0) >= 8 and "script" not in tags
    assert "default-src 'none'" in csp(html)          # and the browser is told to fetch nothing
    assert "secret-cmd" not in html


def test_text_from_the_box_is_escaped_everywhere(tmp_path):
    doc = _doc(tmp_path, extra=[{"dt": 120, "type": "stalled", "summary": HOSTILE, "stage": HOSTILE,
                                 "evidence": [HOSTILE]}])
    doc["host"], doc["profile"] = HOSTILE, HOSTILE
    doc["run"]["stages"][0]["cause"] = {"class": HOSTILE, "summary": HOSTILE, "remediation": HOSTILE,
                                        "evidence": [HOSTILE]}
    doc["run"]["stages"][0]["state"] = doc["run"]["state"] = "failed"
    doc["run"]["stages"][0]["name"] = HOSTILE
    doc["run"]["stages"][0]["metrics"] = {HOSTILE: HOSTILE}
    doc["history"]["info"][0]["gpus"]["0"]["name"] = HOSTILE
    html = render(doc)
    assert offline_problems(html) == []
    assert "<script" not in html and "<img" not in html and "<a " not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_failed_run_shows_its_cause_and_the_throttling(tmp_path):
    doc = _doc(tmp_path, state="failed")
    doc["run"]["stages"][0]["cause"] = {"class": "cuda_oom", "summary": "CUDA out of memory",
                                        "remediation": "lower the batch size", "evidence": ["torch.OutOfMemoryError"]}
    html = render(doc)
    assert 'class="badge st-failed"' in html and "<b>cuda_oom</b>" in html and "lower the batch size" in html
    assert 'class="band"' in html and "hw_thermal_slowdown" in html       # the throttled minutes are shaded
    assert "GPU 1 is throttled" in html and "loss (stage train)" in html


def test_a_running_run_reaches_now_and_a_dead_agent_is_said(tmp_path):
    live = render(_doc(tmp_path / "a", state="running", alive=True))
    assert "so far" in live and "not running" not in live
    dead = render(_doc(tmp_path / "b", state="running", alive=False))
    assert "The agent on this box is not running" in dead


def test_cost_and_verified_pull_when_the_data_has_them(tmp_path):
    doc = _doc(tmp_path)
    doc["cost"] = {"price_per_hour": 2.5, "currency": "USD", "since": "2024-05-01T07:00:00Z", "hours": 3, "spent": 7.5}
    doc["run"]["cost"] = {"hours": 0.5, "spent": 1.25}
    html = render(doc, {"run": "r1", "files": 3, "bytes": 2048, "verified_at": "2024-05-01T09:00:00Z",
                        "manifest_sha256": "ab" * 32})
    assert "this run 1.25 USD over 0.5 h" in html and "box price 2.50 USD/h" in html
    assert "3 files, 2.0 KB, verified 2024-05-01T09:00:00Z" in html
    other = render(doc, {"run": "someone-else", "files": 1, "bytes": 1})
    assert "this verification is of run someone-else" in other
    assert "none recorded" in render(_doc(tmp_path / "c"))


def test_a_run_without_a_history_file_still_has_its_timeline(tmp_path):
    doc = _doc(tmp_path)
    doc["history"] = {"source": "events.jsonl", "points": [], "info": [], "events": doc["history"]["events"]}
    html = render(doc)
    assert offline_problems(html) == []
    assert "no history file for this run" in html and "stage timeline" in html


@pytest.mark.slow
def test_a_week_on_8_gpus_renders_fast_and_small(tmp_path):
    home = Home(str(tmp_path / "home"))
    d = Driver(home)
    d.make_run("w")
    (tmp_path / "home" / "runs" / "w" / "spec.json").write_text(json.dumps({"name": "w", "stage": []}))
    d.event(T0, "run_started", "w")
    gpus = [gpu(i) for i in range(8)]
    for k in range(7 * 24 * 60):
        d.sample(T0 + 60 * k, status([run_block("w", metrics={"loss": 1.0 / (1 + k)})], gpus=gpus))
    d.event(T0 + 7 * 86400, "run_succeeded", "w")
    doc = report_data.build(home, Roots(), "w", now=T0 + 7 * 86400)
    t = time.monotonic()
    html = render(doc)
    assert time.monotonic() - t < 10
    assert len(html) < 2_500_000 and offline_problems(html) == []
    assert "05-08" in html                     # a week's axis labels its days


def test_a_queued_run_with_nothing_recorded_renders(tmp_path):
    home = Home(str(tmp_path / "home"))
    (tmp_path / "home" / "runs" / "q1").mkdir(parents=True)
    (tmp_path / "home" / "runs" / "q1" / "spec.json").write_text(json.dumps({"name": "q1", "stage": [{"name": "a", "run": "x"}]}))
    html = render(report_data.build(home, Roots(), "q1", now=T0))
    assert offline_problems(html) == [] and "Run q1" in html and "No events recorded" in html


@pytest.mark.parametrize("junk", [None, "x", 7, [], {"a": 1}, [None, "x", {"t": "late"}]])
def test_malformed_data_from_the_box_never_breaks_the_page(tmp_path, junk):
    doc = _doc(tmp_path, minutes=3)
    doc["history"]["points"] += [{"t": T0 + 999, "s": junk, "g": junk, "m": junk, "d": junk, "p": junk, "x": junk}]
    doc["history"]["events"] += [{"id": "j", "at": junk, "type": junk, "severity": junk, "stage": junk, "key": junk}]
    doc["history"]["info"] += [junk, {"gpus": {"9": junk}}]
    doc["run"]["stages"] += [junk, {"name": junk, "state": junk, "metrics": junk, "cause": junk}]
    doc["cost"] = {"price_per_hour": junk, "currency": junk, "spent": junk}
    doc["run"]["cost"] = {"hours": junk, "spent": junk}
    doc["run"]["artifacts"] = {"files": junk, "bytes": junk}
    html = render(doc, {"run": junk, "files": junk, "bytes": junk, "verified_at": junk})
    assert offline_problems(html) == [] and "Run r1" in html


def test_a_loss_gone_to_nan_is_the_last_value_and_the_chart_skips_it(tmp_path):
    home = Home(str(tmp_path / "home"))
    d = Driver(home)
    d.make_run("r1")
    (tmp_path / "home" / "runs" / "r1" / "spec.json").write_text(json.dumps(
        {"name": "r1", "workdir": "/", "stage": [{"name": "train", "run": "x"}]}))
    d.event(T0, "run_started", "r1")
    for k, loss in enumerate([2.0, 1.5, 1.2, "nan", "nan"]):
        d.sample(T0 + 60 * k, status([run_block("r1", metrics={"loss": loss})]))
    doc = report_data.build(home, Roots(), "r1", now=T0 + 300)
    assert [p.get("x") for p in doc["history"]["points"]][:4] == [{"loss": 2.0}, {"loss": 1.5}, {"loss": 1.2}, None]
    doc["run"] = {"name": "r1", "state": "running", "workdir": "/", "started_at": iso_utc(T0),
                  "stages": [{"name": "train", "state": "running", "attempt": 1, "metrics": {"loss": "nan"}}]}
    html = render(doc)
    assert '<td>loss</td><td class="num">nan</td>' in html
    assert offline_problems(html) == []
