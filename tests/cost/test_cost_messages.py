"""The cost events as phone messages: what the idle box costs and what to do next survive every
service's limit; the run-end messages carry the run's cost."""
from __future__ import annotations

import pytest

from boxagent.notify.messages import render_event
from tests.cost.conftest import IDLE_STATUS, T0, event, run


@pytest.fixture
def idle_event(harness):
    h = harness({"price_per_hour": 2.49})
    h.sample(0, IDLE_STATUS)
    spec = h.sample(2 * 3600 + 1800)[0]
    return dict(spec, id="e1", host="box1", at="2030-03-17T20:46:40Z", run=None, stage=None)


def test_box_idle_message_reads_well(idle_event):
    msg = render_event(idle_event, "box1")
    assert msg.first_line() == "\U0001F4B8 box1 \u00b7 idle for 2h30m: 6.23 USD burned at 2.49 USD/h, " \
                               "nothing running or queued"
    assert msg.tags == ["money_with_wings"] and msg.severity == "warning"
    body = msg.body()
    assert body.index("What to do:") < body.index("Evidence:") < body.index("\u2192 rgt-client status box1")
    assert "Stop the meter on RunPod (rgt never does it for you):" in body


@pytest.mark.parametrize("limit, unit", [(2000, "chars"), (4096, "bytes"), (700, "chars")])
def test_box_idle_keeps_what_to_do_under_service_limits(idle_event, limit, unit):
    from boxagent.notify.messages import measure
    msg = render_event(idle_event, "box1").fit(limit, unit)
    text = msg.plain()
    assert measure(text, unit) <= limit
    assert "idle for 2h30m" in text and "No run has ended on this box" in text
    assert "terminate deletes" in text


def test_run_end_messages_carry_the_run_cost():
    cost = {"hours": 3.2, "spent": 7.97, "price_per_hour": 2.49, "currency": "USD"}
    for etype, extra in (("run_succeeded", {"stages": 2, "duration_s": 11520}),
                         ("run_failed", {"failed_stage": "train", "cause": {"class": "cuda_oom",
                                                                             "summary": "CUDA out of memory",
                                                                             "remediation": "smaller batch"}}),
                         ("run_cancelled", {}), ("run_interrupted", {})):
        ev = dict(event(etype, "r", T0, id="e", host="box1", severity="warning", cost=cost), **extra)
        text = render_event(ev, "box1").plain()
        assert "Cost: 3h12m, 7.97 USD at 2.49 USD/h" in text, etype
    nocost = dict(event("run_succeeded", "r", T0, id="e", host="box1", cost={"hours": 1.0, "spent": None}))
    assert "Cost: 1h00m paid (no price set)" in render_event(nocost, "box1").plain()
    assert "Cost:" not in render_event(event("stage_failed", "r", T0, cost=cost), "box1").plain()


def test_a_ray_runs_end_message_says_its_gpu_hours_and_the_price_per_gpu():
    cost = {"hours": 0.5, "gpu_hours": 1.0, "spent": 2.5, "price_per_gpu_hour": 2.5, "currency": "USD"}
    text = render_event(event("run_succeeded", "r", T0, cost=cost), "box1").plain()
    assert "Cost: 30m00s, 2.50 USD for 1.00 GPU hours at 2.5 USD/GPU-h" in text, text


def test_budget_and_danger_clock_messages(harness, clock):
    from boxagent.base.units import iso_utc
    h = harness({"price_per_hour": 10.0, "budget": 20.0, "idle_alert_after_s": 0,
                 "stop_deadline_at": iso_utc(T0 + 3 * 3600)})
    specs = h.sample(1.7 * 3600, dict(IDLE_STATUS, runs=[run("r", "succeeded", T0, T0 + 60)]))
    by = {s["type"]: dict(s, id="x", host="box1", at="t") for s in specs}
    budget = render_event(by["budget"], "box1")
    assert budget.first_line() == "\U0001F4B0 box1 \u00b7 spent 17.00 USD of the 20.00 USD budget (85 %)"
    assert "Stop the meter on RunPod" in budget.body()
    clock_msg = render_event(by["danger_clock"], "box1")
    assert clock_msg.first_line().startswith("\u23F0 box1 \u00b7 RunPod stops this box in 1h18m")
    assert "At the deadline RunPod stops this box: stop deletes / (container disk)" in clock_msg.body()


def test_heartbeat_says_the_spend_and_box_busy_never_buzzes():
    from boxagent.notify.messages import status_line
    from boxagent.notify.routing import routes
    status = {"runs": [], "health": {"gpus": [{"util_pct": 0}]},
              "cost": {"spent": 30.875, "currency": "USD", "hours": 12.4}}
    assert status_line(status) == "no run running \u00b7 GPU 0% \u00b7 30.88 USD spent"

    class Notifier:
        events, min_severity = None, "info"
    assert not routes(Notifier(), {"type": "box_busy", "severity": "info"}, None)
    assert routes(Notifier(), {"type": "box_idle", "severity": "warning"}, None)
