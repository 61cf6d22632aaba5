"""probe carries the platform markers the client's profile detection reads."""
from __future__ import annotations

import json


def test_probe_platform_facts_drive_detection(agent):
    out = agent("probe", "--json", env={"RUNPOD_POD_ID": "abc123-secretish"})
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    facts = report["platform_facts"]
    assert "RUNPOD_POD_ID" in facts["env"]
    assert b"abc123-secretish" not in out.stdout  # names only, never values
    from rgt_client.profiles.catalog import detect
    name, reason = detect(report)
    assert name == "runpod", reason
