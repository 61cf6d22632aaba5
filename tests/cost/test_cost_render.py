"""The cost lines of install, status and patrol, from what the box sent (which may be hostile)."""
from __future__ import annotations

import pytest

from rgt_client.errors import ClientError
from rgt_client.cost.render import patrol_brief, run_cost, settings_line, status_lines
from rgt_client.status.statusdata import validate

BLOCK = {"price_per_hour": 2.49, "currency": "USD", "since": "2026-11-20T14:02:11.000Z", "hours": 12.4,
         "spent": 30.876, "budget": 50.0, "budget_used_pct": 61.8, "idle_alert_after_s": 1800.0,
         "idle": {"since": "2026-11-21T02:00:00.000Z", "idle_s": 2700.0, "spent": 1.87, "reminders_sent": 1,
                  "next_reminder_at": "2026-11-21T03:00:00.000Z"},
         "stop_deadline_at": "2026-12-01T08:00:00.000Z", "stop_deadline_in_s": 7200.0}


def test_status_lines():
    assert status_lines(BLOCK) == [
        "  cost    12h24m paid since 2026-11-20 14:02 UTC · 30.88 USD at 2.49 USD/h · budget 50.00 USD (62 %)",
        "  idle    45m00s · 1.87 USD burned · nothing running or queued, GPUs idle",
        "  deadline 2026-12-01 08:00 UTC (in 2h00m): the platform stops the box then"]
    bare = {"price_per_hour": None, "currency": "USD", "since": "2026-11-20T14:02:11.000Z", "hours": 1.5,
            "spent": None, "idle": None}
    assert status_lines(bare) == ["  cost    1h30m paid since 2026-11-20 14:02 UTC (no price set)"]
    assert status_lines(None) == [] and status_lines({"hours": "many"}) == []


def test_install_line_run_cost_and_patrol_tail():
    assert settings_line(BLOCK) == ("  cost     2.49 USD/h; idle warning after 30m; budget 50.00 USD; "
                                    "stop deadline 2026-12-01 08:00 UTC")
    assert settings_line({"idle_alert_after_s": None}) == "  cost     no price set (hours only: --price P); idle warning off"
    assert run_cost({"cost": {"hours": 3.2, "spent": 7.968}}, BLOCK) == "3h12m paid, 7.97 USD"
    assert run_cost({"cost": {"hours": 1.0, "spent": None}}, BLOCK) == "1h00m paid"
    assert run_cost({}, BLOCK) == ""
    assert patrol_brief({"cost": BLOCK}) == " · 30.88 USD spent · idle 45m00s"
    assert patrol_brief({"cost": dict(BLOCK, spent=None, idle=None)}) == " · 12.4 h paid"


def test_hostile_cost_fields_are_named_or_sanitised():
    for bad, path in (({"hours": float("inf")}, "cost.hours"), ({"spent": "lots"}, "cost.spent"),
                      ({"idle": {"idle_s": 10 ** 400}}, "cost.idle.idle_s")):
        with pytest.raises(ClientError) as exc:
            validate({"cost": bad}, "box1")
        assert path in exc.value.message
    with pytest.raises(ClientError):
        validate({"runs": [{"name": "r", "cost": {"hours": float("nan")}}]}, "box1")
    evil = dict(BLOCK, currency="\x1b[2J\x1b]0;pwned\x07USD", since="\x1b[31mred")
    text = "\n".join(status_lines(evil) + [settings_line(evil), patrol_brief({"cost": evil})])
    assert "\x1b" not in text and "\x07" not in text
