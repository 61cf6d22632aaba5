"""diagnose(facts) -> cause. CONTRACT stub (issue 5 replaces it with the full precedence).

facts keys (all optional): exit_code, signal, timed_out, cancelled, preempted, boot_changed,
vanished, expect_missing[], success_pattern, success_seen, fail_line, oom_kill_delta,
gpu_faults[], disks[], hits[], last_lines[], duration_s, expected_duration_s, hangup.
"""
from __future__ import annotations

from typing import Any, Dict, List

TRANSIENT = {"nccl", "network_transient", "preempted", "machine_restart"}


def _cause(cls: str, summary: str, remediation: str, evidence: List[str]) -> Dict[str, Any]:
    return {"class": cls, "summary": summary, "remediation": remediation,
            "retryable": cls in TRANSIENT, "evidence": evidence}


def diagnose(facts: Dict[str, Any]) -> Dict[str, Any]:
    ec, sig = facts.get("exit_code"), facts.get("signal")
    if facts.get("cancelled"):
        return _cause("cancelled", "cancelled by the user", "resume it when ready", [])
    if facts.get("preempted"):
        return _cause("preempted", "stopped by SIGTERM to the agent", "resume from the last marker", [])
    if facts.get("boot_changed"):
        return _cause("machine_restart", "the machine restarted", "resume from the last marker", ["boot_id changed"])
    if facts.get("timed_out"):
        return _cause("timeout", "the stage ran past its timeout", "raise `timeout` or find the hang", [])
    if (facts.get("oom_kill_delta") or 0) > 0:
        return _cause("cgroup_oom", "cgroup OOM kill", "lower memory use", ["oom_kill +%d" % facts["oom_kill_delta"]])
    if sig:
        return _cause("killed", "killed by signal %d" % sig, "find who sent it", ["signal %d" % sig])
    if ec not in (0, None):
        return _cause("nonzero_exit", "exited with code %d" % ec, "read the log", ["exit code %d" % ec])
    if facts.get("fail_line"):
        return _cause("code_error", "fail_pattern matched", "read the log", [facts["fail_line"]])
    if facts.get("expect_missing"):
        return _cause("expect_missing", "expected outputs missing", "check the paths",
                      ["missing: " + p for p in facts["expect_missing"]])
    if facts.get("success_pattern") and not facts.get("success_seen"):
        return _cause("success_pattern_missing", "success_pattern never appeared", "check the log", [])
    return _cause("nonzero_exit", "failed", "read the log", [])


def success_warnings(facts: Dict[str, Any]) -> List[str]:
    """Warnings for a stage that succeeded (exit 0 with an NCCL/CUDA error at the end, fast...)."""
    return []
