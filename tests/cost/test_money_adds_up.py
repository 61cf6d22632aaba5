"""Money that adds up: a run's cost is its share of the box, so over any interval the box's spend
is the sum of its runs' costs plus its idle cost; full precision in status.json (a 2 s run is not
0.0); the ledger folds old runs into a total instead of dropping them; and the meters run on a
monotonic clock, so a wall clock stepped back (NTP, a restored snapshot) or forward changes
nothing."""
from __future__ import annotations

import json
import random

import pytest

from boxagent.cost import ledger as ledger_mod
from boxagent.cost import share
from tests.cost.conftest import T0, event, gpus

BOX8 = gpus(*([95.0] * 8))


def _spec(rgt_home, name, want, **top):
    d = rgt_home / "runs" / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "spec.json").write_text(json.dumps(dict({"name": name} if want is None else {"name": name, "gpus": want},
                                                 **top)))


def _start(h, rgt_home, name, want, **top):
    _spec(rgt_home, name, want, **top)
    h.part.on_event(event("run_queued", name, h.clock.now))
    h.part.on_event(event("run_started", name, h.clock.now))


def _end(h, name):
    h.part.on_event(event("run_succeeded", name, h.clock.now))


def _adds_up(block):
    cost, runs = block["cost"], block["run_fields"]
    total_runs = sum(r["cost"]["spent"] for r in runs.values())
    assert cost["runs_spent"] == pytest.approx(total_runs, rel=1e-9, abs=1e-9)
    assert cost["spent"] == pytest.approx(cost["runs_spent"] + cost["idle_spent"], rel=1e-9, abs=1e-9)
    return cost, runs


def test_a_sweeps_run_costs_add_up_to_the_box_spend_not_eight_times_it(harness, clock, rgt_home):
    """The field repro: 8 parallel 1-GPU runs on an 8-GPU box at 21.60/h for an hour."""
    h = harness({"price_per_hour": 21.60, "idle_alert_after_s": 0})
    h.sample(0, dict(BOX8, runs=[]))
    for i in range(8):
        _start(h, rgt_home, "sw-%d" % i, 1)
    h.sample(3600)
    for i in range(8):
        _end(h, "sw-%d" % i)
    cost, runs = _adds_up(h.block())
    assert cost["spent"] == pytest.approx(21.60)
    assert sum(r["cost"]["spent"] for r in runs.values()) == pytest.approx(21.60)
    assert all(r["cost"]["spent"] == pytest.approx(2.70) and r["cost"]["gpus"] == 1 for r in runs.values())


def test_the_spend_adds_up_over_a_random_sweep_with_gpus_0_all_and_idle_spells(harness, clock, rgt_home):
    rnd = random.Random(7)
    h = harness({"price_per_hour": 3.0, "idle_alert_after_s": 0})
    h.sample(0, dict(BOX8, runs=[]))
    live, free, n = {}, 8, 0
    for _ in range(300):
        h.sample(rnd.uniform(0, 900))
        if live and rnd.random() < 0.45:
            name = rnd.choice(sorted(live))
            free += live.pop(name) if isinstance(live[name], int) else 0
            _end(h, name)
        elif "all" not in live.values():
            want = rnd.choice([1, 1, 2, 0, "all"] if not live else [1, 2, 0])
            if isinstance(want, int) and want > free:
                continue
            n += 1
            live["r%d" % n] = want
            free -= want if isinstance(want, int) else 0
            _start(h, rgt_home, "r%d" % n, want)
        _adds_up(h.block())
    cost, runs = _adds_up(h.block())
    assert cost["idle_spent"] > 0 and len(runs) == n


def test_shares_of_gpus_0_and_all_runs_are_stated():
    assert share.of({"a": 1, "b": 2}, 8) == {"a": 0.125, "b": 0.25}
    assert share.of({"a": "all"}, 8) == {"a": 1.0}
    assert share.of({"a": 6, "z1": 0, "z2": 0}, 8) == {"a": 0.75, "z1": 0.125, "z2": 0.125}
    assert share.of({"z": 0}, 8) == {"z": 1.0}                # a data-prep run on an idle box pays for it
    assert share.of({"a": 2, "z": 0}, None) == {"a": 0.5, "z": 0.5}   # GPUs unknown: all split evenly


def test_short_runs_show_their_cost_at_full_precision_not_0(harness, clock, rgt_home):
    h = harness({"price_per_hour": 3.00})
    _start(h, rgt_home, "short", None)
    clock.advance(2)
    _end(h, "short")
    spent = h.block()["run_fields"]["short"]["cost"]["spent"]
    assert spent == pytest.approx(2 / 3600.0 * 3.0) and spent > 0


def test_the_ledger_folds_old_runs_into_a_total_and_drops_none(harness, clock, rgt_home):
    h = harness({"price_per_hour": 1.0, "idle_alert_after_s": 0})
    h.sample(0, dict(BOX8, runs=[]))
    for i in range(ledger_mod.MAX_RUNS + 300):
        _start(h, rgt_home, "f%d" % i, 1)
        clock.advance(36)
        _end(h, "f%d" % i)
    h.part.stop(1.0)
    saved = json.loads((rgt_home / "cost.json").read_text())
    assert len(saved["runs"]) <= ledger_mod.MAX_RUNS and saved["folded"]["runs"] == 300
    cost = h.block()["cost"]
    assert cost["runs_folded"] == 300
    # every run held 1/8 of the box for 36 s: all of them are still in the runs' total
    assert cost["runs_hours"] == pytest.approx((ledger_mod.MAX_RUNS + 300) * 36 / 8 / 3600.0)
    assert cost["spent"] == pytest.approx(cost["runs_spent"] + cost["idle_spent"])


@pytest.mark.parametrize("step", [-3600.0, -2 * 86400.0, 3600.0])
def test_a_clock_stepped_back_or_forward_neither_freezes_nor_jumps_the_paid_hours_or_the_idle_clock(
        harness, clock, step):
    h = harness({"price_per_hour": 1.0, "idle_alert_after_s": 1800})
    h.sample(0, dict(gpus(0), runs=[]))
    h.sample(600)
    clock.step(step)
    h.sample(600)
    block = h.block()["cost"]
    assert block["hours"] == pytest.approx(1200 / 3600.0)
    assert block["idle"]["idle_s"] == pytest.approx(1200.0)
    sent = h.sample(600)                                   # 30 minutes idle on the monotonic clock
    assert [s["type"] for s in sent] == ["box_idle"] and sent[0]["idle_s"] == pytest.approx(1800.0)


@pytest.mark.parametrize("ahead", [3600.0, 2 * 86400.0])
def test_cost_json_last_at_ahead_of_now_does_not_freeze_the_paid_hours_or_the_idle_clock(
        harness, clock, rgt_home, ahead):
    h = harness({"price_per_hour": 1.0, "idle_alert_after_s": 1800})
    h.sample(0, dict(gpus(0), runs=[]))
    h.sample(600)
    h.part.stop(1.0)
    saved = json.loads((rgt_home / "cost.json").read_text())
    saved["last_at"] = clock.now + ahead                  # a snapshot restored, or an NTP step back
    (rgt_home / "cost.json").write_text(json.dumps(saved))
    h2 = harness({"price_per_hour": 1.0, "idle_alert_after_s": 1800}, up_since=T0 - 86400)
    h2.status = dict(gpus(0), runs=[])
    before = h2.block()["cost"]["hours"]
    assert before == pytest.approx(600 / 3600.0)           # the gap "since last_at" counts nothing
    h2.sample(600)
    assert h2.block()["cost"]["hours"] == pytest.approx(1200 / 3600.0)
    assert h2.block()["cost"]["idle"]["idle_s"] == pytest.approx(1200.0)
    assert [s["type"] for s in h2.sample(600)] == ["box_idle"]


def test_a_cost_json_of_the_old_schema_keeps_its_hours_and_runs(harness, clock, rgt_home):
    (rgt_home / "cost.json").write_text(json.dumps({
        "schema": "rgt.cost/1", "since": T0 - 7200, "up_s": 7200.0, "last_at": T0, "idle": {},
        "runs": {"old": {"start": T0 - 7200, "end": T0 - 3600, "prior_s": 0.0}}}))
    h = harness({"price_per_hour": 2.0}, up_since=T0 - 86400)
    block = h.block()
    assert block["cost"]["hours"] == pytest.approx(2.0)
    assert block["run_fields"]["old"]["cost"]["spent"] == pytest.approx(2.0)


def test_a_hostile_cost_json_is_read_without_an_error(harness, clock, rgt_home):
    (rgt_home / "cost.json").write_text('{"schema": "rgt.cost/2", "since": 1e308, "up_s": Infinity}')
    h = harness({"price_per_hour": 2.0})
    assert h.block()["cost"]["hours"] == 0.0
    (rgt_home / "cost.json").write_text(json.dumps({
        "schema": "rgt.cost/2", "since": T0, "up_s": -5, "last_at": "x", "meter_at": 1e300, "idle": {"since": "y"},
        "runs": {"a": {"start": T0, "end": None, "want": [1], "run_s": 1e300, "box_s": float("nan")}},
        "folded": {"runs": True}}).replace("NaN", "NaN"))
    h = harness({"price_per_hour": 2.0})
    assert h.block()["cost"]["hours"] == 0.0 and h.block()["run_fields"]["a"]["cost"]["spent"] == 0.0


BOX4 = gpus(*([95.0] * 4))


def test_ray_runs_are_priced_per_gpu_they_hold_not_as_shares_of_this_box(harness, clock, rgt_home):
    """8 one-GPU cells on a Ray cluster of two 4-GPU boxes at 8.00/h each, for an hour: each cell
    held a GPU of SOME box for the hour (2.00), together the two boxes' 16.00. Shared out of this
    box's price they added up to 8.00: one box's bill for two."""
    h = harness({"price_per_hour": 8.00, "idle_alert_after_s": 0})
    h.sample(0, dict(BOX4, runs=[]))
    for i in range(8):
        _start(h, rgt_home, "ray-%d" % i, 1, backend="ray")
    _start(h, rgt_home, "local", 1)                   # beside them, a run on this box: a share of it
    h.sample(3600)
    for i in range(8):
        _end(h, "ray-%d" % i)
    _end(h, "local")
    runs = h.block()["run_fields"]
    for i in range(8):
        c = runs["ray-%d" % i]["cost"]
        assert c["gpu_hours"] == pytest.approx(1.0) and c["spent"] == pytest.approx(2.00), c
        assert c["priced_by"] == "this box's price per GPU" and c["box_hours"] == 0.0
    assert sum(runs["ray-%d" % i]["cost"]["spent"] for i in range(8)) == pytest.approx(16.00)
    assert runs["local"]["cost"]["spent"] == pytest.approx(2.00)      # 1 of this box's 4 GPUs
    cost, _runs = h.block()["cost"], None
    # This box's own bill still adds up: its runs' shares (the local run) and its idle time.
    assert cost["spent"] == pytest.approx(cost["runs_spent"] + cost["idle_spent"]) == pytest.approx(8.00)
    assert cost["runs_spent"] == pytest.approx(2.00)


def test_a_ray_runs_price_per_gpu_hour_is_the_configured_one_and_unpriced_where_none_is_known(
        harness, clock, rgt_home):
    h = harness({"price_per_hour": 8.00, "price_per_gpu_hour": 2.50, "idle_alert_after_s": 0})
    h.sample(0, dict(gpus(), runs=[]))                # a head without GPUs: no price per GPU of its own
    _start(h, rgt_home, "two", 2, backend="ray")
    h.sample(1800)
    _end(h, "two")
    c = h.block()["run_fields"]["two"]["cost"]
    assert c["gpu_hours"] == pytest.approx(1.0) and c["spent"] == pytest.approx(2.50)
    assert c["priced_by"] == "price_per_gpu_hour"
    bare = harness({"price_per_hour": 8.00, "idle_alert_after_s": 0})
    bare.sample(0, dict(gpus(), runs=[]))
    _start(bare, rgt_home, "unpriced", 1, backend="ray")
    bare.sample(600)
    c = bare.block()["run_fields"]["unpriced"]["cost"]
    assert c["spent"] is None and c["gpu_hours"] == pytest.approx(600 / 3600.0), c
