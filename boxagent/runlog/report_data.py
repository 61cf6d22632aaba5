"""`report-data RUN`: everything `rgt-client report` draws, as ONE bounded JSON document.

  {"schema": "rgt.report/1", "generated_at", "generated_ts", "host", "profile",
   "agent": {version, running, state, heartbeat_at}, "run": <status.json's runs[] entry>,
   "spec": {name, workdir, stages: [{name, kind, timeout_s, retries, expected_duration_s,
            metrics_pattern}]},
   "history": {step_s, info[], points[], events[], dropped_events, source},
   "cost": <status cost, when the box has a price>, "pull_verified": <when the box records one>}

It reads files only, so it answers for a finished run, a running one and a run whose agent
died. A run recorded before the run log existed gets its events from the end of events.jsonl
(`history.source` = "events.jsonl") and no points. The spec summary leaves out commands and
env: a report is mailed around, and people paste tokens into both.
Bounded: the history file is under 3 MB (store.BUDGET); the fallback reads at most 4 MB.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional

from boxagent.base import names, safefile
from boxagent.base.fsutil import read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.base.units import iso_utc
from boxagent.runlog import points, store
from boxagent.base.errors import UsageError

SCHEMA = "rgt.report/1"
FALLBACK_BYTES = 4 << 20
_SPEC_STAGE_KEYS = (("timeout", "timeout_s"), ("retries", "retries"), ("expected_duration", "expected_duration_s"),
                    ("metrics_pattern", "metrics_pattern"), ("progress_pattern", "progress_pattern"))


def build(home: Home, roots: Roots, run: str, now: Optional[float] = None) -> Dict[str, Any]:
    now = time.time() if now is None else now
    if not names.valid("run", run):
        raise UsageError("%r is not a run name" % run, "list runs with `rgt-agent status`")
    from boxagent.wire import status as status_mod
    status = status_mod.read(home, roots, now, n_events=0)
    block = next((r for r in status.get("runs") or [] if r.get("name") == run), None)
    spec = read_json(home.run_spec(run), None)
    if block is None and not isinstance(spec, dict):
        known = [str(r.get("name")) for r in status.get("runs") or []]
        raise UsageError("no run %r in %s" % (run, home.runs),
                         ("runs here: %s" % ", ".join(known)) if known else "there are no runs here yet")
    agent = status.get("agent") or {}
    return {"schema": SCHEMA, "generated_at": iso_utc(now), "generated_ts": round(now, 3),
            "host": status.get("host"), "profile": status.get("profile"),
            "agent": {k: agent.get(k) for k in ("version", "running", "state", "heartbeat_at", "machine_restarted")},
            "run": block or {"name": run, "state": "unknown", "stages": []},
            "spec": spec_summary(spec if isinstance(spec, dict) else {"name": run}),
            "history": history(home, run, block or {}),
            "cost": status.get("cost"),
            "pull_verified": _verified(home, run)}


def spec_summary(spec: Dict[str, Any]) -> Dict[str, Any]:
    stages = []
    for st in spec.get("stage") or []:
        if not isinstance(st, dict):
            continue
        out = {"name": st.get("name"), "kind": "wait" if "wait" in st else "run"}
        for key, name in _SPEC_STAGE_KEYS:
            if st.get(key) is not None:
                out[name] = st[key]
        stages.append(out)
    return {"name": spec.get("name"), "workdir": spec.get("workdir"), "stages": stages}


def history(home: Home, run: str, block: Dict[str, Any]) -> Dict[str, Any]:
    hist = store.read(store.path_for(home.run_dir(run)))
    if hist is not None:
        head = hist.pop("header", None) or {}
        hist["gpu_cols"], hist["throttle_bits"] = head.get("gpu_cols"), head.get("throttle_bits")
        hist["source"] = "runlog"
        return hist
    return {"run": run, "step_s": None, "info": [], "points": [], "dropped_events": 0,
            "events": events_from_log(home.events, run, block), "source": "events.jsonl"}


def events_from_log(path: str, run: str, block: Dict[str, Any], limit: int = FALLBACK_BYTES) -> List[Dict[str, Any]]:
    """The run's events (and alerts while it ran) from the end of events.jsonl (and its rotated
    predecessor when the current file is short)."""
    data = b""
    for p in (path, path + ".1"):
        if len(data) >= limit:
            break
        data = _tail_bytes(p, limit - len(data)) + data
    t0 = points.parse_iso(block.get("started_at") or block.get("created_at"))
    t1 = points.parse_iso(block.get("ended_at"))
    needle = ('"%s"' % run).encode("utf-8")
    out = []
    for raw in data.split(b"\n"):
        mine = needle in raw
        if not mine and b'"key"' not in raw and b'"warning"' not in raw and b'"critical"' not in raw:
            continue
        ev = store.parse_line(raw)
        if ev is None:
            continue
        ts = points.parse_iso(ev.get("at"))
        if ev.get("run") == run or (ev.get("run") is None and t0 is not None and ts is not None and ts >= t0
                                    and (t1 is None or ts <= t1) and (ev.get("key") or ev.get("severity") != "info")):
            out.append(store.clip_event(ev))
    return out


def _tail_bytes(path: str, n: int) -> bytes:
    try:
        with os.fdopen(safefile.open_regular(path), "rb") as fh:     # not a FIFO or a device
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - n))
            data = fh.read(n)
    except OSError:
        return b""
    if size > n:
        data = data[data.find(b"\n") + 1:]    # the first line of the window is torn
    return data


def _verified(home: Home, run: str) -> Optional[Dict[str, Any]]:
    """The box's own record of a verified pull (`rgt-agent pull-verified`, written by
    `rgt-client pull`/`verify`). Reading a name nobody writes made every report say "none
    recorded" after a pull the box did record."""
    data = read_json(home.pull_verified(run), None)
    return data if isinstance(data, dict) else None
