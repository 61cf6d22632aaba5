"""The cause record diagnose() returns, and the small pieces of evidence every step shares.

cause = {class, summary, remediation, retryable, evidence[], decided_by, overruled[],
         confidence, runner_up?, tell_apart?, decided_by_fact?}
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from boxagent.triage import evidence as E
from boxagent.triage.builtin_rules import REMEDIATION, TRANSIENT

Cause = Dict[str, Any]
NATIVE_CRASH = ("run it again with PYTHONFAULTHANDLER=1 to see where; check the torch/CUDA "
                "extension versions")


def make_cause(cls: str, summary: str, evidence: List[str], remediation: Optional[str] = None,
               retryable: Optional[bool] = None, decision: Optional[E.Decision] = None,
               fact: Optional[str] = None, confidence: Optional[str] = None,
               runner_up: Optional[str] = None) -> Cause:
    """A cause; `fact` is the box's fact that decided it (decided_by_fact), `confidence` and
    `runner_up` a step's own judgement (confidence.py judges the others)."""
    c = {"class": cls, "summary": summary,
         "remediation": remediation or REMEDIATION.get(cls, REMEDIATION["nonzero_exit"]),
         "retryable": (cls in TRANSIENT) if retryable is None else bool(retryable),
         "evidence": [str(e) for e in evidence if e][:12]}
    if decision is not None:
        c["decided_by"] = decision.decided_by
        c["overruled"] = list(decision.overruled)
    if fact:
        c["decided_by_fact"] = fact
    if confidence:
        c["confidence"] = confidence
    if runner_up:
        c["runner_up"] = runner_up
    return c


def tail_ev(f: Dict[str, Any]) -> List[str]:
    last = f.get("last_lines") or []
    return ["the log ends: %s" % last[-1]] if last else []


def exit_ev(f: Dict[str, Any]) -> List[str]:
    sig, how = E.signal_of(f)
    if how:
        return [how]
    ec = f.get("exit_code")
    return ["exit code %s" % ec] if ec is not None else []
