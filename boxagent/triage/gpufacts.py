"""What the GPU knew when a stage failed, added to the cause diagnose() decided.

Three field failures on a real H100 (driver 580, torch 2.11):
- a job's out-of-bounds kernel write made the driver log Xid 31 for its pid 0.2 s before it
  exited, and the stage's cause did not say so: an application Xid of the stage's own process
  now stands in its evidence, in plain words;
- a process rgt did not start held 20.6 GiB, and the next run's CUDA OOM got the generic "check
  for other jobs on the GPU": a cuda_oom cause now names the GPU's other tenants and their memory;
- a device-side assert's deciding line was torch's boilerplate: the kernel's own assertion line
  (`IndexKernel.cu:111 … Assertion … "index out of bounds" failed`) now joins the deciding line.
facts keys read: gpu_faults (application Xids carry xid_class/pid/owner), gpu_tenants
([{gpu, pid, command, used_memory_bytes, visible}]), hits.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from boxagent.health import attribution, tenants

Cause = Dict[str, Any]
_ASSERTION = re.compile(r"([\w.-]+\.cuh?:\d+): .*?(Assertion `.*` failed\.?)")
_CUDA_ERROR = re.compile(r"CUDA error|CUDA_ERROR_|cudaError|AcceleratorError")


def annotate(cause: Cause, facts: Dict[str, Any]) -> Cause:
    """The cause with the GPU's facts in its evidence (and the kernel assertion in decided_by)."""
    _kernel_assertion(cause, facts)
    _own_xids(cause, facts)
    if cause.get("class") == "cuda_oom":
        _tenants(cause, facts)
    cause["evidence"] = list(cause.get("evidence") or [])[:12]
    return cause


def kernel_assertion(facts: Dict[str, Any]) -> Optional[str]:
    """'log line 2: IndexKernel.cu:111: Assertion `… "index out of bounds"` failed.' or None."""
    for h in facts.get("hits") or []:
        m = _ASSERTION.search(str(h.get("line") or ""))
        if m:
            return "log line %s: %s: %s" % (h.get("line_no"), m.group(1), m.group(2))
    return None


def _kernel_assertion(cause: Cause, facts: Dict[str, Any]) -> None:
    decided = str(cause.get("decided_by") or "")
    if not _CUDA_ERROR.search(decided) or "Assertion `" in decided:
        return
    quote = kernel_assertion(facts)
    if quote:
        cause["decided_by"] = "%s; the kernel's assertion: %s" % (decided, quote)


def _own_xids(cause: Cause, facts: Dict[str, Any]) -> None:
    own = [f for f in facts.get("gpu_faults") or [] if isinstance(f, dict) and attribution.is_application(f)]
    words: List[str] = []
    for f in own:
        line = attribution.stage_words(f)
        if line not in words:
            words.append(line)
    if words:
        ev = list(cause.get("evidence") or [])
        cause["evidence"] = ev[:1] + words[:2] + ev[1:]


def _tenants(cause: Cause, facts: Dict[str, Any]) -> None:
    others = [p for p in facts.get("gpu_tenants") or [] if isinstance(p, dict)]
    if not others:
        return
    lines = ["GPU %s is shared with a process rgt did not start: %s" % (p.get("gpu"), tenants.describe(p))
             for p in others[:3]]
    ev = list(cause.get("evidence") or [])
    cause["evidence"] = ev[:1] + lines + ev[1:]
    cause["remediation"] = ("another tenant holds memory on this GPU (%s): stop it or run elsewhere; then: %s"
                            % ("; ".join(tenants.describe(p) for p in others[:2]), cause.get("remediation") or ""))
