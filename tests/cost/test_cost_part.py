"""The cost part in-process: the real CostPart, real files under a temp RGT_HOME, the clock
injected (the seam). Idle reminders and their backoff, budget and deadline alerts, paid hours
across daemon restarts and box restarts, each run's cost."""
from __future__ import annotations

import json

import pytest

from boxagent.base.units import iso_utc
from boxagent.cost.cli import record
from tests.cost.conftest import T0, event, gpus, run

from tests.cost.conftest import IDLE_STATUS as IDLE


def _types(specs):
    return [s["type"] for s in specs]


def test_idle_reminders_back_off_30m_1h_2h_then_every_4h(harness, clock):
    h = harness({"price_per_hour": 2.49})
    h.sample(0, IDLE)
    sent = []
    for _ in range(int(17 * 3600 / 60)):
        for spec in h.sample(60):
            assert spec["type"] == "box_idle"
            sent.append(round(clock.now - T0))
    hours = [s / 3600.0 for s in sent]
    assert hours == [0.5, 1.0, 2.0, 4.0, 8.0, 12.0, 16.0]


def test_idle_message_facts_price_spend_and_the_profiles_stop_verbs(harness):
    h = harness({"price_per_hour": 2.49})
    h.sample(0, IDLE)
    spec = h.sample(1800)[0]
    assert spec["severity"] == "warning" and spec["reminder"] == 1
    assert spec["idle_s"] == 1800.0 and abs(spec["idle_spent"] - 1.245) < 1e-9 and spec["price_per_hour"] == 2.49
    assert "30m00s" in spec["summary"] and "1.25 USD" in spec["summary"] and "2.49 USD/h" in spec["summary"]
    text = "\n".join(spec["next"])
    assert "No run has ended on this box" in text
    assert "Stop the meter on RunPod" in text
    assert "terminate deletes / (container disk), /workspace (volume disk), IRREVERSIBLE" in text
    assert "stop deletes / (container disk); still bills: the /workspace volume" in text
    assert any("GPU 0 0 %, GPU 1 1 %" in e for e in spec["evidence"])


def test_without_a_price_idle_speaks_in_hours(harness):
    h = harness({})
    h.sample(0, IDLE)
    spec = h.sample(3600)[0]
    assert spec["price_per_hour"] is None and spec["spent"] is None and spec["idle_spent"] is None
    assert "1.00 paid hours" in spec["summary"] and "no price set" in spec["summary"]
    assert h.block()["cost"]["spent"] is None and h.block()["cost"]["hours"] == 1.0


def test_one_busy_gpu_keeps_the_box_busy(harness):
    h = harness({"price_per_hour": 1.0, "idle_alert_after_s": 60})
    for _ in range(10):
        assert h.sample(60, dict(gpus(0, 90, 0), runs=[])) == []
    assert h.block()["cost"]["idle"] is None
    h.sample(60, dict(gpus(0, 4.9, 0), runs=[]))      # under 5 % is idle
    assert _types(h.sample(60)) == ["box_idle"]


def test_a_queued_run_is_not_idle(harness):
    h = harness({"idle_alert_after_s": 60})
    for _ in range(5):
        assert h.sample(60, dict(gpus(0), runs=[run("q", "queued")])) == []


def test_a_run_start_clears_the_idle_clock_and_says_so_once(harness, clock):
    h = harness({"price_per_hour": 2.0})
    h.sample(0, IDLE)
    assert _types(h.sample(1800)) == ["box_idle"]
    h.part.on_event(event("run_started", "r2", clock.now))
    busy = h.sample(1, dict(gpus(0), runs=[run("r2", "running", clock.now)]))
    assert _types(busy) == ["box_busy"] and busy[0]["severity"] == "info"
    assert "run r2 started" in busy[0]["summary"] and "1.00 USD" in busy[0]["summary"]
    assert h.block()["cost"]["idle"] is None
    # idle again after the run: a new clock, the first reminder after the full delay again
    h.part.on_event(event("run_succeeded", "r2", clock.advance(600)))
    h.sample(0, dict(gpus(0), runs=[run("r2", "succeeded", clock.now - 600, clock.now)]))
    assert h.sample(1799) == []
    assert _types(h.sample(1)) == ["box_idle"]


def test_busy_gpu_without_a_reminder_sent_clears_silently(harness):
    h = harness({"idle_alert_after_s": 600})
    h.sample(0, IDLE)
    assert h.sample(300) == []
    assert h.sample(60, dict(gpus(95), runs=[])) == []
    assert h.block()["cost"]["idle"] is None


def test_idle_alert_after_zero_is_off(harness):
    h = harness({"idle_alert_after_s": 0})
    h.sample(0, IDLE)
    assert h.sample(86400) == [] and h.block()["cost"]["idle_alert_after_s"] is None


def test_idle_alerts_default_off_where_nothing_bills_by_the_hour(harness):
    local = harness({}, profile={"name": "local", "platform": "this machine", "kind": "local"})
    local.sample(0, IDLE)
    assert local.sample(86400) == []
    assert local.block()["cost"]["idle"]["idle_s"] == 86400.0     # the clock still shows


def test_budget_warns_at_80_and_is_critical_at_100_once_each(harness):
    h = harness({"price_per_hour": 10.0, "budget": 50.0, "idle_alert_after_s": 0})
    got = []
    for _ in range(8 * 60):
        got += [(s["severity"], s["threshold_pct"], round(h.clock.now - T0)) for s in h.sample(60, IDLE)
                if s["type"] == "budget"]
    assert got == [("warning", 80.0, 4 * 3600), ("critical", 100.0, 5 * 3600)]
    assert h.block()["cost"]["budget_used_pct"] == 160.0


def test_budget_raised_arms_the_warnings_again(harness):
    h = harness({"price_per_hour": 10.0, "budget": 50.0, "idle_alert_after_s": 0})
    specs = h.sample(4.5 * 3600, IDLE)
    assert [s["threshold_pct"] for s in specs] == [80.0]
    h.config["cost"]["budget"] = 100.0
    h.part.reload(h.config, h.profile)
    assert h.sample(60) == []
    assert [s["threshold_pct"] for s in h.sample(3.5 * 3600)] == [80.0]


def test_a_stage_eta_past_the_budget_warns_once(harness):
    h = harness({"price_per_hour": 10.0, "budget": 50.0, "idle_alert_after_s": 0})
    stage = {"name": "train", "state": "running", "attempt": 1, "progress": {"eta_s": 5 * 3600}}
    status = dict(gpus(95), runs=[run("r", "running", T0, stages=[stage])])
    specs = h.sample(3600, status)
    assert len(specs) == 1
    spec = specs[0]
    assert spec["type"] == "budget" and spec["run"] == "r" and spec["stage"] == "train"
    assert spec["projected"] == 60.0 and "60.00 USD" in spec["summary"] and "50.00 USD" in spec["summary"]
    assert h.sample(60, status) == []
    # a short ETA never warns
    stage2 = dict(stage, name="eval", progress={"eta_s": 600})
    assert h.sample(60, dict(gpus(95), runs=[run("r", "running", T0, stages=[stage2])])) == []


def test_stop_deadline_warns_24h_and_2h_before_naming_what_the_platform_destroys(harness):
    autodl = {"name": "autodl", "platform": "AutoDL", "kind": "ssh-rental",
              "teardown": [{"name": "关机 power-off", "stops_billing": True, "irreversible": False,
                            "destroys": [], "note": "starts the 15-day release clock"}],
              "danger_clock": [{"what": "a powered-off box is auto-released: its data disk is gone",
                                "after": "15d"}]}
    h = harness({"stop_deadline_at": iso_utc(T0 + 30 * 3600), "idle_alert_after_s": 0}, profile=autodl)
    got = []
    for _ in range(32 * 6):
        got += [(s, round(h.clock.now - T0)) for s in h.sample(600, IDLE)]
    assert [(s["type"], t) for s, t in got] == [("danger_clock", 6 * 3600), ("danger_clock", 28 * 3600)]
    first = got[0][0]
    assert "AutoDL stops this box in 1d00h" in first["summary"]
    text = "\n".join(first["next"])
    assert "关机 power-off deletes nothing (starts the 15-day release clock)" in text
    assert "DANGER after 15d: a powered-off box is auto-released" in text


def test_a_deadline_declared_late_warns_once(harness):
    h = harness({"stop_deadline_at": iso_utc(T0 + 3600), "idle_alert_after_s": 0})
    assert [s["type"] for s in h.sample(1, IDLE)] == ["danger_clock"]
    assert h.sample(600) == []


def test_restart_keeps_since_and_counts_the_gap_while_the_box_stayed_up(harness, clock):
    h = harness({"price_per_hour": 3600.0})
    h.sample(0, IDLE)
    h.sample(1800)
    h.part.stop(1.0)
    since = h.block()["cost"]["since"]
    clock.advance(600)                                 # the daemon was down 10 min, the box up
    h2 = harness({"price_per_hour": 3600.0}, up_since=T0 - 86400)
    block = h2.block()["cost"]
    assert block["since"] == since == iso_utc(T0)
    assert abs(block["hours"] - 2400 / 3600.0) < 1e-3
    assert block["spent"] == 2400.0
    assert block["idle"]["since"] == iso_utc(T0)      # the box stayed idle all along


def test_a_box_that_was_off_is_not_billed_for_the_time_off(harness, clock, rgt_home):
    h = harness({"price_per_hour": 1.0})
    h.sample(0, IDLE)
    h.sample(3600)
    h.part.stop(1.0)
    clock.advance(3 * 86400)                           # powered off three days, up again 5 min ago
    h2 = harness({"price_per_hour": 1.0}, up_since=clock.now - 300)
    block = h2.block()["cost"]
    assert block["since"] == iso_utc(T0) and abs(block["hours"] - (3600 + 300) / 3600.0) < 1e-3
    assert block["idle"] is None                       # its idle clock starts over
    saved = json.loads((rgt_home / "cost.json").read_text())
    assert saved["schema"] == "rgt.cost/2" and saved["since"] == T0


def test_a_run_costs_its_attempts_and_the_run_end_event_carries_it(harness, clock):
    h = harness({"price_per_hour": 2.0})
    h.part.on_event(event("run_queued", "r", clock.now))
    h.part.on_event(event("run_started", "r", clock.now))
    clock.advance(3600)
    assert h.part.annotate({"type": "run_failed", "run": "r"}, clock.now) == {
        "cost": {"hours": 1.0, "box_hours": 1.0, "gpus": "all", "spent": 2.0, "price_per_hour": 2.0,
                 "currency": "USD"}}
    h.part.on_event(event("run_failed", "r", clock.now))
    clock.advance(7200)                                # failed, left alone two hours: not the run's
    h.part.on_event(event("run_queued", "r", clock.now, resumed=True))
    h.part.on_event(event("run_started", "r", clock.now))
    clock.advance(1800)
    h.part.on_event(event("run_succeeded", "r", clock.now))
    assert h.block()["run_fields"]["r"] == {"cost": {"hours": 1.5, "box_hours": 1.5, "gpus": "all", "spent": 3.0}}
    assert h.part.annotate({"type": "stage_failed", "run": "r"}, clock.now) == {}


def test_submit_replace_starts_a_new_runs_cost_even_when_status_still_shows_the_old(harness, clock):
    h = harness({"price_per_hour": 1.0})
    h.part.on_event(event("run_started", "r", clock.now))
    h.part.on_event(event("run_succeeded", "r", clock.advance(3600)))
    old = dict(gpus(0), runs=[run("r", "succeeded", T0, clock.now)])
    h.sample(60, old)
    h.part.on_event(event("run_queued", "r", clock.now))          # a new job under the same name
    h.sample(1, old)                                               # status not yet rewritten
    h.part.on_event(event("run_started", "r", clock.now))
    clock.advance(600)
    assert h.block()["run_fields"]["r"]["cost"]["hours"] == 600 / 3600.0


def test_runs_the_daemon_restarted_under_come_from_status(harness, clock, rgt_home):
    status = {"runs": [run("done", "succeeded", T0 - 7200, T0 - 3600), run("live", "running", T0 - 1800)]}
    (rgt_home / "status.json").write_text(json.dumps(status))
    h = harness({"price_per_hour": 1.0})
    fields = h.block()["run_fields"]
    assert fields["done"]["cost"] == {"hours": 1.0, "box_hours": 1.0, "gpus": "all", "spent": 1.0}
    assert fields["live"]["cost"] == {"hours": 0.5, "box_hours": 0.5, "gpus": "all", "spent": 0.5}


def test_the_idle_message_knows_a_verified_pull(harness, clock, rgt_home):
    from boxagent.base.home import Home
    home = Home(str(rgt_home))
    (rgt_home / "runs" / "r").mkdir(parents=True)
    (rgt_home / "runs" / "r" / "manifest.json").write_text('{"totals": {"files": 1, "bytes": 3}}')
    import hashlib
    sha = hashlib.sha256((rgt_home / "runs" / "r" / "manifest.json").read_bytes()).hexdigest()
    art = {"files": 1, "bytes": 3, "manifest": str(rgt_home / "runs" / "r" / "manifest.json"), "sha256": sha}
    status = dict(gpus(0), runs=[run("r", "succeeded", T0 - 60, T0 - 1, artifacts=art)])
    h = harness({"price_per_hour": 1.0, "idle_alert_after_s": 60})
    h.sample(0, status)
    first = h.sample(60)[0]
    assert "Run r: results NOT pulled and verified yet. First: rgt-client pull box1 r" in first["next"][0]
    assert first["pull_verified"] is False
    rec = record(home, "r", sha, clock.now)
    assert rec["matches_box_manifest"] is True
    second = h.sample(1800)[0]
    assert second["next"][0].startswith("Run r: pulled and verified at ") and second["pull_verified"] is True
    record(home, "r", "0" * 64, clock.now)             # a pull of another manifest does not count
    assert h.sample(3600)[0]["pull_verified"] is False


@pytest.mark.root
def test_a_full_state_dir_costs_the_save_not_the_alerts(tmp_path, clock):
    from tests.cost.conftest import Harness, RUNPOD
    from tests.mounts import tmpfs
    with tmpfs(tmp_path / "full", "size=64k") as home:
        config = {"host": "box1", "profile": RUNPOD, "cost": {"idle_alert_after_s": 60}}
        h = Harness(home, clock, config, RUNPOD, lambda: None)
        h.sample(0, IDLE)
        filler = home / "filler"
        with open(filler, "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"x" * 4096)
                    fh.flush()
            except OSError:
                pass
        assert _types(h.sample(60)) == ["box_idle"]
        assert json.loads((home / "cost.json").read_text())["idle"].get("sent") in (None, 0)
        filler.unlink()
        h.sample(1)
        assert json.loads((home / "cost.json").read_text())["idle"]["sent"] == 1
