"""install's cost flags as the patch the box merges: only the flags given, `0`/`off` removes,
bad values are refused before the box is touched (Error + Hint, exit 2)."""
from __future__ import annotations

import pytest

from rgt_client import exitcodes
from rgt_client.cost.flags import cost_patch
from rgt_client.errors import ClientError

NOW = 1_900_000_000.0     # 2030-03-17T17:46:40Z


def test_only_the_flags_given_travel():
    assert cost_patch(now=NOW) is None
    assert cost_patch(price="2.49", now=NOW) == {"price_per_hour": 2.49}
    assert cost_patch(price="$1.5", currency="eur", idle_alert_after="1h", budget="50", now=NOW) == {
        "price_per_hour": 1.5, "currency": "EUR", "idle_alert_after_s": 3600.0, "budget": 50.0}
    assert cost_patch(gpu_price="3.60", now=NOW) == {"price_per_gpu_hour": 3.6}
    assert cost_patch(gpu_price="off", now=NOW) == {"price_per_gpu_hour": None}


def test_zero_or_off_removes_and_idle_zero_turns_the_warning_off():
    assert cost_patch(price="0", budget="off", stop_deadline="none", now=NOW) == {
        "price_per_hour": None, "budget": None, "stop_deadline_at": None}
    assert cost_patch(idle_alert_after="0", now=NOW) == {"idle_alert_after_s": 0.0}


def test_stop_deadline_is_utc_or_a_duration_from_now():
    assert cost_patch(stop_deadline="2030-12-01T08:00Z", now=NOW) == {"stop_deadline_at": "2030-12-01T08:00:00Z"}
    assert cost_patch(stop_deadline="12h", now=NOW) == {"stop_deadline_at": "2030-03-18T05:46:40Z"}


@pytest.mark.parametrize("kw, word", [
    ({"price": "cheap"}, "--price: expected an amount"),
    ({"price": "-2"}, "--price: expected an amount"),
    ({"price": "inf"}, "--price: expected an amount"),
    ({"budget": "nan"}, "--budget: expected an amount"),
    ({"gpu_price": "1e300"}, "--gpu-price: expected an amount"),
    ({"currency": "dollar"}, "--currency: expected a 3-letter code"),
    ({"idle_alert_after": "soon"}, "--idle-alert-after"),
    ({"stop_deadline": "2030-12-01 08:00"}, "--stop-deadline: expected a UTC time"),   # no zone
    ({"stop_deadline": "2020-01-01T00:00Z"}, "is in the past"),
    ({"price": "0", "budget": "50"}, "--budget needs a price"),
])
def test_bad_values_are_usage_errors_with_a_hint(kw, word):
    with pytest.raises(ClientError) as exc:
        cost_patch(now=NOW, **kw)
    assert word in exc.value.message and exc.value.hint and exc.value.code == exitcodes.USAGE
