"""Preflight gate (issue 4). CONTRACT: check() returns the failures; [] means go."""
from __future__ import annotations

from typing import Any, Dict, List


def check(preflight: Dict[str, Any], sample: Dict[str, Any], monitor: Any) -> List[Dict[str, Any]]:
    """Each failure: {summary, evidence: [str], remediation}. Stub: everything passes."""
    return []
