"""A resumed run's report, from a real daemon: readings keep the times of the attempt that
printed them, and the run's span covers every attempt."""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List

import pytest

from boxagent.runlog.points import parse_iso
from rgt_client.report.page import render
from tests.realbox import Box, job

LOSSES = "for i in 1 2 3 4 5 6; do echo loss=0.$i; sleep 0.3; done"


def _data(box: Box, run: str) -> Dict[str, Any]:
    out = box.agent("report-data", run)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _resumed_run(box: Box) -> Dict[str, Any]:
    box.daemon()
    train = {"name": "train", "run": LOSSES, "metrics_pattern": "loss=(?P<loss>[0-9.]+)"}
    check = {"name": "eval", "run": "sleep 0.6; test -f ok || exit 3"}
    assert box.submit(job("r1", box.workdir, train, check)).returncode == 0
    box.wait_run("r1", "failed")
    (box.workdir / "ok").write_text("ok")
    assert box.agent("resume", "r1").returncode == 0
    box.wait_run("r1", "succeeded")
    box.wait_event("run_succeeded", run="r1")
    return _data(box, "r1")


def _first_attempt(events: List[Dict[str, Any]], stage: str) -> tuple:
    start = next(e for e in events if e["type"] == "stage_started" and e.get("stage") == stage)
    end = next(e for e in events if e["type"] == "stage_succeeded" and e.get("stage") == stage)
    return parse_iso(start["at"]), parse_iso(end["at"])


@pytest.mark.slow
def test_a_resumed_runs_skipped_stage_keeps_the_first_attempts_readings(box):
    doc = _resumed_run(box)
    readings = [m for m in doc["history"]["metrics"] if m["st"] == "train"]
    assert [m["x"]["loss"] for m in readings] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], readings
    t0, t1 = _first_attempt(doc["history"]["events"], "train")
    times = [m["t"] for m in readings]
    assert all(t0 - 0.01 <= t <= t1 + 0.01 for t in times), (t0, t1, times)
    assert times[-1] - times[0] > 0.5, "six readings 0.3 s apart drawn at one time: a vertical line"


def test_a_plain_runs_chart_has_the_stages_last_logged_value(box):
    box.daemon()
    train = {"name": "train", "run": "echo loss=0.9; sleep 0.7; echo loss=0.25",
             "metrics_pattern": "loss=(?P<loss>[0-9.]+)"}
    assert box.submit(job("p1", box.workdir, train)).returncode == 0
    box.wait_run("p1", "succeeded")
    box.wait_event("run_succeeded", run="p1")
    doc = _data(box, "p1")
    assert [m["x"]["loss"] for m in doc["history"]["metrics"]] == [0.9, 0.25]
    t0, t1 = _first_attempt(doc["history"]["events"], "train")
    assert all(t0 - 0.01 <= m["t"] <= t1 + 0.01 for m in doc["history"]["metrics"])


def test_a_resumed_runs_report_spans_every_attempt_with_no_vertical_lines(box):
    """The page `rgt-client report` draws from the real agent's report-data: the header's "after"
    covers both attempts, no event of the first attempt reads a negative "since start", and the
    loss curve is no vertical line."""
    doc = _resumed_run(box)
    html = render(doc)
    events = doc["history"]["events"]
    first = parse_iso(next(e for e in events if e["type"] == "run_started")["at"])
    end = parse_iso(doc["run"]["ended_at"])
    header = re.search(r"<p>Started ([^<]*)</p>", html).group(1)
    assert "started again once" in header, header
    after = re.search(r"after (\d+)s\.", header)
    assert after is not None and int(after.group(1)) >= int(end - first) - 1, (header, end - first)
    since = re.findall(r'<td class="t">[^<]*</td><td class="t">([^<]*)</td>', html)
    assert since and not any(s.startswith("-") for s in since), since
    path = re.search(r'aria-label="loss \(stage train\)[^"]*".*?<path class="ln c0" d="([^"]+)"', html).group(1)
    xs = {float(x) for x in re.findall(r"[ML]([0-9.]+) ", path)}
    assert len(xs) == 6, path


def test_a_retried_stages_readings_keep_both_attempts_and_a_reread_keeps_the_first_time(tmp_path):
    """Readings are one per (stage, attempt, line): a retry's line 1 is not the first attempt's,
    and the same line read again later (a resume, a restarted daemon) keeps the time it had."""
    from boxagent.runlog import store
    hist = store.HistoryFile(str(tmp_path), "r", 1.0)
    hist.add_metrics([{"t": 100.0, "st": "train", "a": 1, "l": 1, "x": {"loss": 0.9}},
                      {"t": 200.0, "st": "train", "a": 2, "l": 1, "x": {"loss": 0.8}}])
    hist.add_metrics([{"t": 900.0, "st": "train", "a": 1, "l": 1, "x": {"loss": 0.9}}])
    got = store.read(store.path_for(str(tmp_path)))["metrics"]
    assert [(m["a"], m["t"]) for m in got] == [(1, 100.0), (2, 200.0)]
