"""wait_for_change: one bounded remote command that blocks on the box's events.jsonl and returns
on the first new event after the cursor, or at its bound, with the run's status beside it (the
box side, shared with `watch`, is rgt_client/eventwait.py).

Why one remote command and not a poll: an MCP client gives a tool call about 60 s, and a model
that polls status every few seconds spends its context on identical answers. One ssh call covers
the whole wait, and a stage's end reaches the model within a second. The cursor is the caller's,
so the same call after a restart of this server or of the model returns each event once.
"""
from __future__ import annotations

from typing import Any

from rgt_client.mcp import calls
from rgt_client.mcp.safety import Policy, line, lines

MAX_WAIT_S = 50.0
MAX_EVENTS = calls.WAIT_MAX_EVENTS
BOX_SCRIPT, MARK = calls.WAIT_SCRIPT, calls.WAIT_MARK    # the box side: rgt_client/eventwait.py


def box_wait(policy: Policy, host: str, run: str | None, cursor: str | None, timeout_s: float) -> dict[str, Any]:
    """Block on the box (one ssh call) until an event after `cursor` or timeout_s."""
    return calls.event_wait(calls.target(host, policy.ssh_config), run, cursor, timeout_s)


EVENT_KEYS = ("exit_code", "attempt", "duration_s", "failed_stage")


def event(e: Any, policy: Policy) -> dict[str, Any]:
    """One event for a model: what happened, to what, and its cause if it has one."""
    e = e if isinstance(e, dict) else {}
    out: dict[str, Any] = {"id": line(e.get("id"), policy, 64), "at": line(e.get("at"), policy, 40),
                           "type": line(e.get("type"), policy, 60), "severity": line(e.get("severity"), policy, 20),
                           "run": line(e.get("run"), policy, 80), "stage": line(e.get("stage"), policy, 80),
                           "summary": line(e.get("summary"), policy, 300),
                           "evidence": lines(e.get("evidence"), policy, 3, 300)}
    for k in EVENT_KEYS:
        if isinstance(e.get(k), (int, float, str)) and not isinstance(e.get(k), bool):
            out[k] = e[k] if not isinstance(e[k], str) else line(e[k], policy, 80)
    if isinstance(e.get("cause"), dict):
        out["cause_class"] = line(e["cause"].get("class"), policy, 80)
    return {k: v for k, v in out.items() if v not in (None, [])}
