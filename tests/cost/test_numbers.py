"""One validator for every number from a file or a flag (boxagent.base.numbers), shared by the
client's install flags and the agent's config: `--price 1e300` is refused on both sides with
Error + Hint and exit 2 (it was accepted, then every screen called the box "malformed"), and a
denormal price (2.49e-320) is refused, never shown as "0. USD/h"."""
from __future__ import annotations

import json

import pytest

from boxagent.base import config as config_mod
from boxagent.base import numbers
from boxagent.base.errors import EXIT_USAGE
from boxagent.cost import texts
from rgt_client import exitcodes
from rgt_client.cost import flags as costopts
from rgt_client.cost import render as render_cost
from rgt_client.cost.flags import cost_patch
from rgt_client.errors import ClientError

NOW = 1_900_000_000.0


def test_the_client_and_the_agent_share_one_validator():
    assert costopts.numbers is numbers and config_mod.numbers is numbers


@pytest.mark.parametrize("kind, value, ok", [
    ("price_per_hour", 2.49, True), ("price_per_hour", 1e300, False), ("price_per_hour", 2.49e-320, False),
    ("price_per_hour", float("inf"), False), ("price_per_hour", float("nan"), False), ("price_per_hour", True, False),
    ("price_per_hour", 10 ** 400, False), ("budget", 5e11, True), ("budget", 1e13, False),
    ("epoch_s", 1.9e9, True), ("epoch_s", 1e308, False), ("epoch_s", -1.0, False),
    ("metric", -3.5, True), ("metric", 1e308, False), ("duration_s", 3600.0, True), ("duration_s", 1e12, False),
])
def test_bounds_are_stated_and_checked(kind, value, ok):
    assert (numbers.number(kind, value) is not None) is ok


@pytest.mark.parametrize("flag, text", [("price", "1e300"), ("price", "2.49e-320"), ("price", "1e19"),
                                        ("budget", "1e300"), ("price", "Infinity")])
def test_price_1e300_refused_by_install_on_the_client(flag, text):
    with pytest.raises(ClientError) as exc:
        cost_patch(now=NOW, **{flag: text})
    assert exc.value.code == exitcodes.USAGE and exc.value.hint
    assert "expected an amount" in exc.value.message and text in exc.value.message


@pytest.mark.parametrize("price", [1e300, 2.49e-320, 1e7])
def test_price_1e300_refused_by_install_on_the_agent(agent, rgt_home, price):
    out = agent("configure", stdin=json.dumps({"host": "b", "cost": {"price_per_hour": price}}).encode(), bare=True)
    assert out.returncode == EXIT_USAGE
    err = out.stderr.decode()
    assert err.startswith("Error: config.cost.price_per_hour: expected an amount per hour") and "\nHint: " in err
    assert not (rgt_home / "config.json").exists()


def test_a_hand_edited_price_of_1e300_is_ignored_by_the_cost_part():
    assert config_mod.cost_settings({"cost": {"price_per_hour": 1e300, "budget": 10}})["price_per_hour"] is None


def test_a_tiny_price_is_never_shown_as_zero():
    assert texts.rate(2.5e-05, "USD") == "2.5e-05 USD/h"
    assert render_cost.settings_line({"price_per_hour": 0.0035, "currency": "USD"}).startswith("  cost     0.0035 USD/h")
    assert texts.money(0.0004, "USD") == "<0.01 USD" and render_cost.money(0.0004, {}) == "<0.01 USD"
