"""What an ended attempt means for its stage: succeeded, retry later, failed, cancelled or
interrupted — decided from its facts alone (a pure function: tested without any process).
"""
from __future__ import annotations

import traceback
from typing import Any, Callable, Dict, List, NamedTuple, Optional

from boxagent.engine import facts as facts_mod
from boxagent.engine import states as S
from boxagent.triage import diagnose, fast_spec, success_warnings


class Verdict(NamedTuple):
    state: str                            # succeeded | pending (retry) | failed | cancelled | interrupted
    cause: Optional[Dict[str, Any]]
    warnings: List[str]
    backoff: float                        # seconds before the retry (state pending)
    fast: Optional[Dict[str, Any]]        # a `suspiciously_fast` event spec, for a success


def decide(facts: Dict[str, Any], retries: int, tries: int, retry_backoff: float,
           stop_reason: Optional[str], log: Callable[[str], None]) -> Verdict:
    if facts_mod.succeeded(facts):
        return Verdict(S.SUCCEEDED, None, [str(w) for w in success_warnings(facts)], 0.0, fast_spec(facts))
    cause = _diagnose(facts, log)
    if stop_reason in ("cancel", "preempt") or facts.get("boot_changed"):
        return Verdict(S.CANCELLED if stop_reason == "cancel" else S.INTERRUPTED, cause, [], 0.0, None)
    if cause.get("retryable") and tries <= retries:
        return Verdict(S.PENDING, cause, [], retry_backoff * (2 ** (tries - 1)), None)
    return Verdict(S.FAILED, cause, [], 0.0, None)


def _diagnose(facts: Dict[str, Any], log: Callable[[str], None]) -> Dict[str, Any]:
    try:
        return diagnose(facts)
    except Exception as exc:  # noqa: BLE001 - a bug in the diagnosis must not leave the stage running
        log("diagnose() failed (the stage fails with a plain cause): %s: %s\n%s"
            % (type(exc).__name__, exc, traceback.format_exc()))
        return facts_mod.fallback_cause(facts)


def preflight_cause(failures: List[Dict[str, Any]]) -> Dict[str, Any]:
    evidence: List[str] = []
    for f in failures:
        evidence.extend(str(e) for e in (f.get("evidence") or [f.get("summary", "")]))
    return {"class": "preflight_failed",
            "summary": "; ".join(str(f.get("summary", "preflight check failed")) for f in failures),
            "remediation": "; ".join(str(f["remediation"]) for f in failures if f.get("remediation"))
            or "fix the box (or relax `preflight`) and resume the run",
            "retryable": False, "evidence": evidence}
