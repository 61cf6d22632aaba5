"""Rule table (issue 5 replaces this stub). CONTRACT: build_rules(profile_rules, job_rules)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional


def build_rules(profile_rules: Optional[List[Dict[str, Any]]] = None,
                job_rules: Optional[List[Dict[str, Any]]] = None) -> Any:
    return list(profile_rules or []) + list(job_rules or [])
