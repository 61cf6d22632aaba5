"""manifest.json (`rgt.manifest/1`). CONTRACT stub; issue 7 fills it in."""
from __future__ import annotations

from typing import Any, Dict

from boxagent.home import Home


def build_manifest(home: Home, run: str, spec: Dict[str, Any], force: bool = False) -> Dict[str, Any]:
    """Build/refresh runs/<run>/manifest.json from spec["artifacts"]; return the manifest."""
    return {"schema": "rgt.manifest/1", "run": run, "files": [], "totals": {"files": 0, "bytes": 0}}


def summary(home: Home, run: str) -> Dict[str, Any]:
    """status.json runs[].artifacts: {files, bytes, manifest (path or null), sha256}."""
    return {"files": 0, "bytes": 0, "manifest": None}
