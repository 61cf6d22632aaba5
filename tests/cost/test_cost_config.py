"""config.json `cost`: what `configure` accepts (bad values: Error + Hint, exit 2), how a new cost
block lays over the box's current one (install --price alone changes only the price), and the
part's lenient view of a hand-edited file."""
from __future__ import annotations

import json

import pytest

from boxagent.base import config as config_mod
from boxagent.base.errors import EXIT_USAGE, UsageError
from boxagent.base.units import parse_utc_time


@pytest.mark.parametrize("block, word", [
    ({"price_per_hour": 0}, "price_per_hour"),
    ({"price_per_hour": -1}, "price_per_hour"),
    ({"price_per_hour": "2.49"}, "price_per_hour"),
    ({"price_per_hour": True}, "price_per_hour"),
    ({"price_per_hour": float("nan")}, "price_per_hour"),
    ({"price_per_gpu_hour": "3"}, "price_per_gpu_hour"),
    ({"price_per_hour": 1, "budget": 0}, "budget"),
    ({"budget": 50}, "needs a price"),
    ({"idle_alert_after_s": -5}, "idle_alert_after_s"),
    ({"currency": "dollars"}, "currency"),
    ({"currency": "usd"}, "currency"),
    ({"stop_deadline_at": "tomorrow"}, "stop_deadline_at"),
    ({"stop_deadline_at": "2026-02-30T08:00Z"}, "stop_deadline_at"),
    ({"stop_deadline_at": "2026-12-01T08:00"}, "stop_deadline_at"),     # no zone: refused, not guessed
    ({"pricee": 1}, "unknown key"),
    ([], "expected an object"),
])
def test_bad_cost_values_are_refused_with_a_hint(block, word):
    with pytest.raises(UsageError) as exc:
        config_mod.validate({"cost": block})
    assert word in exc.value.message and exc.value.hint


def test_good_cost_block_passes():
    cfg = {"cost": {"price_per_hour": 2.49, "currency": "CNY", "idle_alert_after_s": 0, "budget": 50,
                    "stop_deadline_at": "2026-12-01T08:00:00Z", "price_per_gpu_hour": 0.45}}
    assert config_mod.validate(cfg) is cfg


def test_utc_times_people_type():
    want = parse_utc_time("2026-12-01T08:00:00Z")
    for text in ("2026-12-01T08:00Z", "2026-12-01 08:00Z", "2026-12-01T08:00:00+00:00", "2026-12-01T08:00 UTC"):
        assert parse_utc_time(text) == want
    assert parse_utc_time("2026-12-01T08:00:00.5Z") == want + 0.5


def test_merge_lays_the_new_cost_over_the_old():
    old = {"host": "a", "sample_every": 5, "cost": {"price_per_hour": 2.49, "currency": "EUR", "budget": 50}}
    # install --price 3 alone: only the price changes; the rest of config is install's as before
    got = config_mod.merge_cost(old, {"host": "a", "profile": {}, "cost": {"price_per_hour": 3}})
    assert got == {"host": "a", "profile": {}, "cost": {"price_per_hour": 3, "currency": "EUR", "budget": 50}}
    # install with no cost flag keeps the cost block whole
    assert config_mod.merge_cost(old, {"host": "a"})["cost"] == old["cost"]
    # null removes a key (--budget 0), null for the block removes all
    assert config_mod.merge_cost(old, {"cost": {"budget": None}})["cost"] == {"price_per_hour": 2.49,
                                                                              "currency": "EUR"}
    assert "cost" not in config_mod.merge_cost(old, {"cost": None})
    assert config_mod.merge_cost({}, {"host": "b"}) == {"host": "b"}


def test_the_part_reads_a_hand_edited_block_leniently():
    s = config_mod.cost_settings({"cost": {"price_per_hour": "cheap", "currency": 7, "budget": 5,
                                           "idle_alert_after_s": "x", "stop_deadline_at": "soon"}},
                                 {"kind": "cloud-api"})
    assert s == {"price_per_hour": None, "price_per_gpu_hour": None, "currency": "USD", "idle_alert_after_s": 1800.0,
                 "budget": None, "stop_deadline_at": None}
    assert config_mod.cost_settings({}, {"kind": "slurm"})["idle_alert_after_s"] is None
    assert config_mod.cost_settings({"cost": {"idle_alert_after_s": 60}}, {"kind": "local"})["idle_alert_after_s"] == 60


def _configure(agent, cfg):
    return agent("configure", stdin=json.dumps(cfg).encode(), bare=True)


def test_configure_merges_cost_and_refuses_bad_values(agent, rgt_home):
    out = _configure(agent, {"host": "b", "cost": {"price_per_hour": 2.49, "budget": 50, "currency": "EUR"}})
    assert out.returncode == 0, out.stderr
    out = _configure(agent, {"host": "b", "sample_every": 3, "cost": {"price_per_hour": 1.99}})
    assert out.returncode == 0, out.stderr
    cfg = json.loads((rgt_home / "config.json").read_text())
    assert cfg == {"host": "b", "sample_every": 3, "cost": {"price_per_hour": 1.99, "budget": 50, "currency": "EUR"}}
    bad = _configure(agent, {"host": "b", "cost": {"price_per_hour": None}})     # a budget with no price left
    assert bad.returncode == EXIT_USAGE
    err = bad.stderr.decode()
    assert err.startswith("Error: config.cost.budget needs a price") and "\nHint: " in err and "Traceback" not in err
    assert json.loads((rgt_home / "config.json").read_text()) == cfg            # nothing written


def test_pull_verified_command(agent, rgt_home):
    (rgt_home / "runs" / "r1").mkdir(parents=True)
    out = agent("pull-verified", "r1", "--manifest-sha256", "ab" * 32, "--json", bare=True)
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body["manifest_sha256"] == "ab" * 32 and body["matches_box_manifest"] is False
    assert json.loads((rgt_home / "runs" / "r1" / "pull_verified.json").read_text())["run"] == "r1"
    for args, word in ((["r1", "--manifest-sha256", "xyz"], "64 hex digits"),
                       (["nope", "--manifest-sha256", "ab" * 32], "no run 'nope'"),
                       (["../x", "--manifest-sha256", "ab" * 32], "not a run name")):
        bad = agent("pull-verified", *args, bare=True)
        err = bad.stderr.decode()
        assert bad.returncode == EXIT_USAGE and word in err and "Hint: " in err, err
