"""The profile shipped in config.json reaches the chain: its triage rules classify a stage's
failure (defaults filled, a malformed hand-edited entry ignored)."""
from __future__ import annotations

import json

from tests.realbox import job


def _configure(box, profile):
    out = box.agent("configure", stdin=json.dumps({"profile": profile}))
    assert out.returncode == 0, out.stderr


def test_profile_rule_classifies_a_failure_despite_a_malformed_entry(box):
    # severity/retryable/remediation omitted on purpose: profile.rules() fills the defaults
    # a malformed entry (hand-edited config.json) must not cost the good rules
    _configure(box, {"name": "myplat", "rule": ["not-a-table",
                                                {"class": "quota_exceeded", "pattern": r"QUOTA-EXCEEDED-\d+",
                                                 "remediation": "ask the platform for more quota"}]})
    box.daemon()
    box.submit(job("prof-rule", box.workdir, {"name": "train", "run": "echo 'fatal QUOTA-EXCEEDED-42'; exit 3"}))
    box.wait_run("prof-rule")
    cause = box.stage("prof-rule", "train")["cause"]
    assert cause["class"] == "quota_exceeded", cause
    assert cause["retryable"] is False
    assert "ask the platform" in cause["remediation"]
