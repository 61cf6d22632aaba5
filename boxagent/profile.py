"""The platform profile as the agent sees it (issue 8): shipped by `install` inside config.json.

CONTRACT stub. config.json = {"profile": {<the profile TOML as a dict>}, ...}.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

from boxagent.fsutil import read_json
from boxagent.home import Home


def load(home: Home) -> Dict[str, Any]:
    cfg = read_json(home.config, {}) or {}
    prof = cfg.get("profile")
    return prof if isinstance(prof, dict) else {"name": "generic-ssh"}


def name(profile: Dict[str, Any]) -> str:
    return str(profile.get("name") or profile.get("platform") or "generic-ssh")


def watched_dirs(profile: Dict[str, Any]) -> List[Tuple[str, str]]:
    """[(path, role)] for the profile's data/durable/extra dirs that exist on this box."""
    out = []
    for key, role in (("data_dir", "data"), ("durable_dir", "durable")):
        p = profile.get(key)
        if isinstance(p, str) and os.path.isdir(p):
            out.append((p, role))
    return out


def stage_env_hints(profile: Dict[str, Any]) -> Dict[str, str]:
    """Env the profile suggests for stages (HF_HOME, HF_ENDPOINT...) when the job sets none."""
    return {}
