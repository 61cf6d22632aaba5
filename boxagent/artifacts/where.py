"""Where a run's files live: on this box (or a filesystem every Ray node shares), or only on the
disk of the Ray node that ran the stage writing them (`[ray] files = "node"`). `rgt-client pull`
asks first (`pull-where`), then takes the manifest and the files from the node's own agent when
they live there: the manifest is built and hashed where the files are, never from what this box
sees at the same path (another disk, or nothing)."""
from __future__ import annotations

from typing import Any, Dict

from boxagent.base import names
from boxagent.base.fsutil import read_json
from boxagent.base.home import Home


def files_on_node(spec: Dict[str, Any]) -> bool:
    return spec.get("backend") == "ray" and (spec.get("ray") or {}).get("files") == "node"


def where(home: Home, run: str, spec: Dict[str, Any], writer: Any = None) -> Dict[str, Any]:
    """{files: box|shared|node} and, for node, the placement of the attempt that wrote them: the
    writer stage's when it was placed, else the newest placed one (node address, Ray node id,
    host name, the ssh host `rgt-client ray up` named it, and rgt's folder on that node)."""
    if spec.get("backend") != "ray":
        return {"files": "box"}
    if not files_on_node(spec):
        return {"files": "shared"}
    state = read_json(home.run_state(run), {}) or {}
    stages = [st for st in (state.get("stages") if isinstance(state, dict) else None) or []
              if isinstance(st, dict) and isinstance(st.get("placement"), dict)]
    mine = [st for st in stages if st.get("name") == writer] or stages
    placed = mine[-1]["placement"] if mine else {}
    out: Dict[str, Any] = {"files": "node", "home": home.root, "node_home": None}
    for key in ("node", "node_id", "host", "ssh_host"):
        value = placed.get(key)
        out[key] = value if isinstance(value, str) else None
    if mine and isinstance(placed.get("attempt"), int) and names.valid("stage", mine[-1].get("name")):
        # rgt's folder on the node (engine/raycell.py), where that attempt's files and the run's
        # spec are: the node's agent serves the pull from there.
        pid = read_json(home.stage_pid(run, mine[-1]["name"], placed["attempt"]), {}) or {}
        folder = pid.get("node_home") if isinstance(pid, dict) else None
        out["node_home"] = folder if isinstance(folder, str) else None
    return out
