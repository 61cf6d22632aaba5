"""Paid hours through the real daemon (a subprocess from the source tree, fast intervals, short
thresholds): a run ends, the box goes idle, `box_idle` reaches a loopback ntfy receiver and the
file:// sink with the price, the spend and the profile's stop verbs; a new run clears it; the
run-end message carries the run's cost; a daemon restart keeps `cost.since` and the spend; the
GPUs are the fake libnvidia-ml.so.1 under the real nvidia-ml-py (one GPU at 90 % keeps the box
busy); the budget warns at 80 % and is critical at 100 %."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from rgt_client.profiles.catalog import load_profile
from tests.realbox import job, wait_for
from tests.health.conftest import FakeNvml, healthy

pytest.importorskip("boxagent.daemon.loop", reason="the core daemon is not in the tree")


def _nvml(box, lib, *utils):
    """Point the box's daemon at the fake NVML with GPUs at these utilisations."""
    fake = FakeNvml(lib, box.tmp / "nvml.json")
    set_utils(fake, *utils)
    box.env.pop("RGT_NVML_LIB", None)
    box.env.update(LD_LIBRARY_PATH=str(fake.lib_dir), FAKE_NVML_STATE=str(fake.state))
    return fake


def set_utils(fake, *utils):
    scenario = healthy(len(utils))
    for g, u in zip(scenario["gpus"], utils):
        g["util_gpu"] = u
    fake.write(scenario)


def _configure(box, cost, notify=None, profile="runpod"):
    cfg = {"host": "box1", "profile": load_profile(profile), "cost": cost,
           "notify": {"retry_base_s": 0.05, "retry_cap_s": 0.3}}
    out = box.agent("configure", stdin=json.dumps(cfg))
    assert out.returncode == 0, out.stderr
    if notify:
        out = box.agent("notify-set", stdin=json.dumps({"notify": notify}))
        assert out.returncode == 0, out.stderr


def title(req):
    """The ntfy Title header as a phone shows it (non-ASCII travels RFC 2047 encoded)."""
    from email.header import decode_header, make_header
    return str(make_header(decode_header(req.headers.get("Title", ""))))


def _sink(path):
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return []


@pytest.mark.slow
def test_idle_box_warns_with_price_spend_and_stop_verb_and_a_new_run_clears_it(box, receiver, fake_nvml_lib):
    _nvml(box, fake_nvml_lib, 0, 1)
    sink = box.tmp / "sink.jsonl"
    _configure(box, {"price_per_hour": 2.49, "idle_alert_after_s": 1.0},
               [{"url": "ntfy://127.0.0.1:%d/cost" % receiver.port}, {"url": "file://%s" % sink}])
    box.daemon()
    (box.workdir / "out").mkdir()
    box.submit(job("r1", box.workdir, {"name": "train", "run": "sleep 0.5; echo 1 > out/model.pt"},
                   artifacts={"include": ["out/*"]}))
    box.wait_run("r1", "succeeded")
    ev = box.wait_event("box_idle", timeout=15)
    assert ev["severity"] == "warning" and ev["price_per_hour"] == 2.49 and ev["currency"] == "USD"
    assert ev["last_run"] == "r1" and ev["pull_verified"] is False
    # the run-end event (and so its message) carries the run's cost
    done = box.wait_event("run_succeeded", run="r1")
    assert done["cost"]["price_per_hour"] == 2.49 and 0 < done["cost"]["hours"] < 0.01

    msgs = receiver.wait_for(1, timeout=15, pred=lambda r: "idle for" in title(r))
    text = msgs[0].text()
    assert title(msgs[0]).startswith("box1 \u00b7 idle for ") and "USD burned at 2.49 USD/h" in title(msgs[0])
    assert msgs[0].headers["Tags"] == "money_with_wings"
    assert "First: rgt-client pull box1 r1" in text
    assert "terminate deletes / (container disk), /workspace (volume disk), IRREVERSIBLE" in text
    assert "GPU 0 0 %, GPU 1 1 %" in text
    ended = receiver.wait_for(1, timeout=15, pred=lambda r: "r1 done" in title(r))
    assert "Cost: " in ended[0].text() and "USD at 2.49 USD/h" in ended[0].text()
    lines = wait_for(lambda: [r for r in _sink(sink) if r["type"] == "box_idle"], 10, "box_idle in the file sink")
    assert lines[0]["event"]["price_per_hour"] == 2.49 and "Stop the meter on RunPod" in lines[0]["text"]

    status = box.status_file()
    assert status["cost"]["idle"]["reminders_sent"] == 1 and status["cost"]["since"]
    assert status["runs"][0]["cost"]["hours"] < 0.01 and status["runs"][0]["cost"]["spent"] is not None

    box.submit(job("r2", box.workdir, {"name": "train", "run": "sleep 3"}))
    busy = box.wait_event("box_busy", timeout=10)
    assert "run r2 started" in busy["summary"] and busy["severity"] == "info"
    wait_for(lambda: box.status_file().get("cost", {}).get("idle", "x") is None, 5, "idle cleared in status")
    assert len(box.events("box_idle")) == 1


@pytest.mark.slow
def test_one_gpu_at_90_keeps_the_box_busy_then_idle_when_it_drops(box, fake_nvml_lib):
    fake = _nvml(box, fake_nvml_lib, 90, 0)
    _configure(box, {"price_per_hour": 1.0, "idle_alert_after_s": 0.5})
    box.daemon()
    wait_for(lambda: (box.status_file().get("health") or {}).get("gpus"), 10, "GPUs in status")
    time.sleep(2.5)
    assert box.events("box_idle") == [] and box.status_file()["cost"]["idle"] is None
    set_utils(fake, 0, 0)
    ev = box.wait_event("box_idle", timeout=10)
    assert "GPU 0 0 %, GPU 1 0 %" in " ".join(ev["evidence"])


@pytest.mark.slow
def test_daemon_restart_keeps_since_and_the_spend(box, fake_nvml_lib):
    _nvml(box, fake_nvml_lib, 50)
    _configure(box, {"price_per_hour": 3600.0, "idle_alert_after_s": 0})     # 1 USD a second
    first = box.daemon()
    wait_for(lambda: (box.status_file().get("cost") or {}).get("spent", 0) >= 1.0, 10, "a spend")
    before = box.status_file()["cost"]
    os.kill(first.pid, signal.SIGKILL)                 # no goodbye: cost.json is up to a minute old
    first.wait(5)
    time.sleep(1.0)                                    # the box bills on while the daemon is down
    dead = json.loads(box.agent("status", "--json").stdout)
    assert dead["agent"]["running"] is False and dead["cost"]["spent"] >= before["spent"] + 1.0
    box.daemon()
    after = box.status_file()["cost"]
    assert after["since"] == before["since"]
    assert after["spent"] >= before["spent"] + 1.0
    saved = json.loads((box.home / "cost.json").read_text())
    assert saved["schema"] == "rgt.cost/2"


def test_budget_warns_at_80_and_is_critical_at_100(box, fake_nvml_lib):
    _nvml(box, fake_nvml_lib, 50)
    _configure(box, {"price_per_hour": 3600.0, "budget": 3.0, "idle_alert_after_s": 0})
    box.daemon()
    crit = box.wait_event("budget", timeout=15, severity="critical")
    got = [(e["severity"], e["threshold_pct"]) for e in box.events("budget")]
    assert got == [("warning", 80.0), ("critical", 100.0)]
    assert "of the 3.00 USD budget" in crit["summary"]
    time.sleep(1.0)
    assert len(box.events("budget")) == 2              # each once
