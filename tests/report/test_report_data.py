"""`rgt-agent report-data RUN`: one bounded JSON document from the files, daemon alive or dead."""
from __future__ import annotations

import json
import os
import signal

import pytest

from boxagent.runlog.store import HistoryFile
from rgt_client.report.data import normalise
from rgt_client.report.page import render
from tests.realbox import Box, job

SECRET = "hunter2-not-for-reports"


def _data(box: Box, run: str) -> dict:
    out = box.agent("report-data", run)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_report_data_of_a_real_run_alive_then_dead(box):
    daemon = box.daemon()
    stage = {"name": "train", "run": "echo loss=0.5; echo token=$TOKEN >/dev/null", "env": {"TOKEN": SECRET},
             "metrics_pattern": "loss=(?P<loss>[0-9.]+)", "timeout": "1m"}
    assert box.submit(job("r1", box.workdir, stage, {"name": "eval", "run": "true"})).returncode == 0
    box.wait_run("r1")
    box.wait_event("run_succeeded", run="r1")
    doc = _data(box, "r1")
    assert doc["schema"] == "rgt.report/1" and doc["agent"]["running"] is True
    assert doc["run"]["name"] == "r1" and doc["run"]["state"] == "succeeded"
    assert [s["name"] for s in doc["spec"]["stages"]] == ["train", "eval"]
    assert doc["spec"]["stages"][0]["metrics_pattern"] == "loss=(?P<loss>[0-9.]+)"
    types = [e["type"] for e in doc["history"]["events"]]
    assert types[0] in ("run_queued", "run_started") and "stage_succeeded" in types and types[-1] == "run_succeeded"
    raw = box.agent("report-data", "r1").stdout
    assert SECRET not in raw and "echo loss" not in raw      # no env, no commands: reports get mailed around
    os.kill(daemon.pid, signal.SIGKILL)
    daemon.wait(10)
    dead = _data(box, "r1")
    assert dead["agent"]["running"] is False and dead["run"]["state"] == "succeeded"
    assert [e["id"] for e in dead["history"]["events"]] == [e["id"] for e in doc["history"]["events"]]


def test_the_history_file_is_what_it_sends_when_there_is_one(box):
    run_dir = box.home / "runs" / "h1"
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text(json.dumps({"name": "h1", "workdir": str(box.workdir),
                                                   "stage": [{"name": "s", "run": "true"}]}))
    hist = HistoryFile(str(run_dir), "h1", 60)
    hist.add_event({"id": "e1", "at": "2024-05-01T08:00:00Z", "type": "run_started", "severity": "info", "run": "h1"})
    for k in range(3):
        hist.add_point({"t": 1714550400 + 60 * k, "s": 60, "g": {"0": [90, 1000, 60, 300, 1900, 0]}})
    doc = _data(box, "h1")
    h = doc["history"]
    assert h["source"] == "runlog" and len(h["points"]) == 3 and h["events"][0]["id"] == "e1"
    assert h["gpu_cols"][0] == "util_pct" and h["throttle_bits"]["hw_thermal_slowdown"] == 0x40
    assert doc["run"]["name"] == "h1"


def test_an_unknown_run_is_a_usage_error_naming_the_runs(box):
    (box.home / "runs" / "real").mkdir(parents=True)
    (box.home / "runs" / "real" / "spec.json").write_text(json.dumps({"name": "real", "stage": []}))
    out = box.agent("report-data", "nope")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("Error: no run 'nope'") and "Hint:" in out.stderr
    bad = box.agent("report-data", "../etc")
    assert bad.returncode == 2 and "is not a run name" in bad.stderr and "Traceback" not in bad.stderr


def test_report_data_runs_on_a_bare_interpreter(box):
    (box.home / "runs" / "b1").mkdir(parents=True)
    (box.home / "runs" / "b1" / "spec.json").write_text(json.dumps({"name": "b1", "stage": [{"name": "s", "run": "x"}]}))
    out = box.agent("report-data", "b1", bare=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["history"]["source"] == "events.jsonl"


def test_the_report_reads_the_verified_pull_the_box_recorded(box):
    """`rgt-client pull` records a verified pull on the box (`rgt-agent pull-verified`); the
    report read another file name and said "none recorded" after every such pull."""
    run_dir = box.home / "runs" / "v1"
    run_dir.mkdir(parents=True)
    (run_dir / "spec.json").write_text(json.dumps({"name": "v1", "stage": [{"name": "s", "run": "true"}]}))
    assert _data(box, "v1")["pull_verified"] is None
    sha = "ab" * 32
    rec = box.agent("pull-verified", "v1", "--manifest-sha256", sha, "--json")
    assert rec.returncode == 0, rec.stderr
    got = _data(box, "v1")["pull_verified"]
    assert got["run"] == "v1" and got["manifest_sha256"] == sha and got["verified_at"]
    from rgt_client.report.page import render
    from rgt_client.report import data
    html = render(data.normalise(_data(box, "v1")))
    assert "none recorded" not in html and "verified %s" % got["verified_at"] in html


@pytest.mark.slow
def test_a_six_second_run_at_default_settings_keeps_every_metric_value(box):
    """The field repro: at the default sampling interval (10 s), a 6-second stage that printed
    30 `loss=` values left none of them in report-data: the run ended between two samples and
    its metrics were read only at a sample. The last readings are read at the stage's end."""
    for name in ("RGT_SAMPLE_EVERY", "RGT_HISTORY_EVERY"):
        box.env.pop(name, None)
    box.daemon()
    losses = ["%.3f" % (1.0 / (i + 1)) for i in range(30)]
    script = "for v in %s; do echo loss=$v; sleep 0.2; done" % " ".join(losses)
    stage = {"name": "train", "run": script, "metrics_pattern": "loss=(?P<loss>[0-9.]+)", "timeout": "1m"}
    assert box.submit(job("short", box.workdir, stage)).returncode == 0
    assert box.wait_run("short", timeout=30)["state"] == "succeeded"
    doc = _data(box, "short")
    got = [m["x"]["loss"] for m in doc["history"]["metrics"] if m.get("st") == "train"]
    assert ["%.3f" % float(v) for v in got] == losses, doc["history"]["metrics"][:3]
    norm = normalise(doc)
    assert len([m for m in norm["history"]["metrics"] if m]) == 30
    page = render(norm)
    assert "loss (stage train)" in page and "every logged value (30)" in page
