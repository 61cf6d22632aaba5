"""Submitting a validated job to the box: one agent call, the job as JSON on its stdin."""
from __future__ import annotations

import json
from typing import Any

from boxagent.api import box_json
from rgt_client.box import agentcall
from rgt_client.box.transport import Target


def submit(target: Target, job: dict[str, Any], replace: bool = False) -> tuple[dict[str, Any], list[str]]:
    """Queue a validated job on the box (JSON on stdin) -> ({"run", "state", "duplicate"}, the
    agent's notes: "the daemon is not running" must reach the user, not stay in stderr).
    replace: reuse the name of a finished run (the agent archives the old one)."""
    args = ["submit", "-", "--json"] + (["--replace"] if replace else [])
    ans = agentcall.ok(target, args, "submit", stdin=json.dumps(job).encode("utf-8"))
    try:
        out = box_json(ans.stdout)
    except ValueError:
        out = {}
    return (out if isinstance(out, dict) else {}), ans.notes
