"""status.json (`rgt.status/1`, docs/status.schema.json): built by the daemon, read by `status`.

`read()` works with the daemon dead: it takes the last status.json (or, with none, the runs'
state files), says whether the daemon runs (pid + start ticks from daemon.pid), how old the
heartbeat is, and shows submitted-but-not-yet-picked-up jobs as `queued`.
"""
from __future__ import annotations

import sys
import time

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional, Tuple

import boxagent
from boxagent.wire import inbox
from boxagent.base import procs
from boxagent.base.optional import deps
from boxagent.base.fsutil import read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.base.units import iso_utc, parse_iso_utc

SCHEMA = "rgt.status/1"
STATUS_EVENTS = 20
# A heartbeat older than this means the daemon is not looking after the box (it writes one every
# sample_every, 10 s by default; a loop wedged this long is as good as gone).
STALE_AFTER_S = 120.0
AGENT_STATES = ("running", "stale", "stopped")
RUN_FIELDS = "run_fields"    # a part's status block key for fields it adds to runs[] (not a status key)
# status.json holds the active runs and this many of the most recent ended ones; the rest are
# counted (runs_summary) and served from their own files on demand (`status --all`, `--run`).
# With 2,000 ended runs it was 1.67 MB rewritten every 10 s, and a box that runs sweeps for
# months paid for all its history on every tick.
RECENT_ENDED = 50
ACTIVE_STATES = ("queued", "running")


def agent_block(pid: Optional[int], running: bool, heartbeat_at: Optional[float], now: float,
                boot_id: Optional[str], machine_restarted: bool, dep_map: Dict[str, bool]) -> Dict[str, Any]:
    return {"version": boxagent.__version__, "build_sha256": procs.build_sha256(), "pid": pid,
            "running": running, "state": "running" if running else "stopped",
            "stale_after_s": STALE_AFTER_S, "heartbeat_at": iso_utc(heartbeat_at),
            "heartbeat_ts": heartbeat_at,
            "heartbeat_age_s": round(now - heartbeat_at, 3) if heartbeat_at else None,
            "boot_id": boot_id, "machine_restarted": machine_restarted,
            "python": "%d.%d.%d" % sys.version_info[:3], "deps": dep_map}


def stage_block(st: Dict[str, Any], live: Optional[Dict[str, Any]], now: float) -> Dict[str, Any]:
    running = st.get("state") == "running"
    duration = st.get("duration_s")
    if running and st.get("started_at"):
        duration = round(now - st["started_at"], 3)
    progress = st.get("progress")
    if progress and not running and progress.get("eta_s") is not None:
        progress = dict(progress, eta_s=None)      # an ended stage has nothing left to wait for
    block = {"name": st["name"], "kind": st.get("kind", "run"), "state": st["state"],
             "attempt": st.get("attempt", 0), "exit_code": st.get("exit_code"), "signal": st.get("signal"),
             "started_at": iso_utc(st.get("started_at")), "ended_at": iso_utc(st.get("ended_at")),
             "duration_s": duration, "marker": st.get("marker"), "log": st.get("log"),
             "progress": progress, "metrics": st.get("metrics"), "cause": st.get("cause"),
             "warnings": st.get("warnings") or [], "retry_at": iso_utc(st.get("retry_at"))}
    if st.get("slurm_job_id") or st.get("slurm_state"):
        block.update(slurm_block(st))
    if st.get("placement"):
        block["placement"] = st["placement"]
    if live and running:
        block.update(live)
    return block


def slurm_block(st: Dict[str, Any]) -> Dict[str, Any]:
    """A Slurm stage's job as the queue last said: id, state, and why it waits (in words, as the
    engine put them in the stage's record)."""
    block = {"slurm_job_id": st.get("slurm_job_id"), "slurm_state": st.get("slurm_state"),
             "slurm_reason": st.get("slurm_reason")}
    if st.get("slurm_waiting"):
        block["slurm_waiting"] = st["slurm_waiting"]
    return block


def run_block(run: Dict[str, Any], live: Optional[Dict[str, Any]], artifacts: Optional[Dict[str, Any]],
              now: float, finalizing: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    current = run.get("current_stage")
    block = {"name": run["name"], "state": run["state"], "workdir": run.get("workdir"),
             "created_at": iso_utc(run.get("created_at")), "queued_at": iso_utc(run.get("queued_at")),
             "started_at": iso_utc(run.get("started_at")), "ended_at": iso_utc(run.get("ended_at")),
             "current_stage": current, "failed_stage": run.get("failed_stage"), "cause": run.get("cause"),
             "gpus": run.get("gpus"), "group": run.get("group"), "matrix": run.get("matrix"),
             "stages": [stage_block(st, live if st["name"] == current else None, now)
                        for st in run.get("stages", [])],
             "artifacts": artifacts or {"files": 0, "bytes": 0, "manifest": None}}
    placed = [st["placement"] for st in run.get("stages", []) if st.get("placement")]
    if placed:      # where the newest placed attempt ran (a Ray node): its address and host
        block["node"] = {k: placed[-1].get(k) for k in ("node", "node_id", "host", "gpus", "ssh_host")}
    if run.get("pending_pickup"):
        block["pending_pickup"] = True
    if finalizing:
        block["finalizing"] = finalizing
    return block


def queued_block(req: Dict[str, Any]) -> Dict[str, Any]:
    """A submitted job the daemon has not picked up yet."""
    spec = req["spec"]
    stages = spec.get("stage") or spec.get("stages") or []
    run = {"name": spec["name"], "state": "queued", "workdir": spec.get("workdir"), "pending_pickup": True,
           "created_at": req.get("posted_at"), "queued_at": req.get("posted_at"),
           "stages": [{"name": s.get("name"), "kind": "wait" if "wait" in s else "run", "state": "pending"}
                      for s in stages if isinstance(s, dict)]}
    return run_block(run, None, None, 0.0)


DEFAULT_NOTIFICATIONS = {"sent": 0, "pending": 0, "failed": 0, "last_error": None}


def recent(runs: List[Any], state_of: Callable[[Any], Any], tail: int = RECENT_ENDED,
           retired: Optional[Dict[str, int]] = None) -> Tuple[List[Any], Dict[str, Any]]:
    """(the runs status.json shows, its runs_summary): every active run, and the last `tail`
    ended ones (runs in queue order: the ended ones last queued); counts of all by state, the
    `retired` ones (ended runs the daemon holds only on disk) included."""
    by_state: Dict[str, int] = dict(retired or {})
    ended = []
    for i, run in enumerate(runs):
        state = str(state_of(run))
        by_state[state] = by_state.get(state, 0) + 1
        if state not in ACTIVE_STATES:
            ended.append(i)
    keep = set(ended[-tail:]) if tail > 0 else set()
    shown = [r for i, r in enumerate(runs) if i in keep or str(state_of(r)) in ACTIVE_STATES]
    total = sum(by_state.values())
    return shown, {"total": total, "shown": len(shown), "ended_not_shown": total - len(shown), "by_state": by_state}


def compose(now: float, host: Optional[str], profile: Optional[str], agent: Dict[str, Any],
            runs: List[Dict[str, Any]], blocks: Dict[str, Any], events: List[Dict[str, Any]],
            live: Optional[Dict[str, Any]] = None, artifacts: Optional[Dict[str, Any]] = None,
            finalizing: Optional[Dict[str, Any]] = None, summary: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """THE builder of status.json (`rgt.status/1`), for the daemon and for a dead agent's files.
    `runs` are state.json dicts (queue order); `blocks` the parts' top-level blocks (health,
    alerts, history, notifications, ...), and under RUN_FIELDS their fields of each run
    ({run: {field: value}}: runs[].cost); live/artifacts/finalizing are per run name."""
    live, artifacts, finalizing = live or {}, artifacts or {}, finalizing or {}
    blocks = dict(blocks)
    run_fields = blocks.pop(RUN_FIELDS, None)
    status: Dict[str, Any] = {"schema": SCHEMA, "observed_at": iso_utc(now), "host": host, "profile": profile, "agent": agent,
              "health": None, "runs": [run_block(r, live.get(r["name"]), artifacts.get(r["name"]), now,
                                                 finalizing.get(r["name"])) for r in runs],
              "alerts": [], "notifications": dict(DEFAULT_NOTIFICATIONS), "history": {}}
    if isinstance(run_fields, dict):
        for block in status["runs"]:
            extra = run_fields.get(block["name"])
            for key, value in (extra.items() if isinstance(extra, dict) else ()):
                block.setdefault(key, value)     # a part never overwrites what the engine says
    status.update(blocks)
    status["events"] = events
    if summary is not None:
        status["runs_summary"] = summary
    return status


def daemon_pid(home: Home, roots: Roots) -> Optional[int]:
    """The live daemon's pid, or None (pid + start ticks from daemon.pid)."""
    return procs.daemon_pid(home.pidfile, roots)


def read(home: Home, roots: Roots, now: Optional[float] = None, n_events: int = STATUS_EVENTS) -> Dict[str, Any]:
    now = time.time() if now is None else now
    status = read_json(home.status)
    if not isinstance(status, dict) or status.get("schema") != SCHEMA:
        status = skeleton(home, roots, now)
    pid = daemon_pid(home, roots)
    agent = status.setdefault("agent", {})
    agent["running"] = pid is not None
    agent["pid"] = pid if pid is not None else agent.get("pid")
    boot_now = roots.boot_id()
    if agent.get("boot_id") and boot_now and agent["boot_id"] != boot_now:
        # The box rebooted since the daemon last wrote: say so before anyone restarts the daemon.
        agent["machine_restarted"] = True
        agent["boot_id_now"] = boot_now
    hb = agent.get("heartbeat_ts")
    agent["heartbeat_age_s"] = round(now - hb, 3) if isinstance(hb, (int, float)) else None
    agent["state"] = liveness(pid is not None, agent["heartbeat_age_s"])
    agent["stale_after_s"] = STALE_AFTER_S
    written_at = status.get("observed_at")
    status["observed_at"] = iso_utc(now)
    _refresh_running(status, now)
    add_verified_pulls(status, home)
    if pid is None:
        _refresh_cost(status, now, written_at)
    known = {r["name"] for r in status.get("runs") or []}
    for name, req in inbox.pending_submits(home).items():
        if name not in known:
            status.setdefault("runs", []).append(queued_block(req))
    if n_events <= 0:
        status["events"] = []   # = events.tail(path, 0), without importing events (the client's --events 0)
    elif n_events != STATUS_EVENTS:
        from boxagent.wire import events as events_mod
        status["events"] = events_mod.tail(home.events, n_events)
    return status


def verified_pull(home: Home, run: str, box_sha: Any) -> Optional[Dict[str, Any]]:
    """status.json runs[].pull_verified: {verified_at, dest, files, bytes, manifest_sha256,
    current}, `current` when the box's manifest is still the one verified; None when no pull of
    the run was verified. After a verified pull, patrol still said "pull next": the box had
    recorded it, and status had no field for it."""
    rec = read_json(home.pull_verified(run), None)
    if not isinstance(rec, dict) or not isinstance(rec.get("verified_at"), str):
        return None
    out: Dict[str, Any] = {"verified_at": rec["verified_at"]}
    for key, kind in (("dest", str), ("files", int), ("bytes", int), ("manifest_sha256", str)):
        if isinstance(rec.get(key), kind) and not isinstance(rec.get(key), bool):
            out[key] = rec[key]
    out["current"] = bool(box_sha) and rec.get("manifest_sha256") == box_sha
    return out


def add_verified_pulls(status: Dict[str, Any], home: Home) -> None:
    """runs[].pull_verified from each run's own record (`rgt-agent pull-verified`, boxagent/cost/cli.py,
    writes it; the laptop calls it after `verify`), for the writer and for a reader of a dead agent's files alike."""
    for block in status.get("runs") or []:
        name = block.get("name") if isinstance(block, dict) else None
        if not isinstance(name, str) or block.get("state") == "queued":
            continue
        art = block.get("artifacts") if isinstance(block.get("artifacts"), dict) else {}
        got = verified_pull(home, name, art.get("sha256"))
        if got is not None:
            block["pull_verified"] = got
        else:
            block.pop("pull_verified", None)


def liveness(pid_alive: bool, heartbeat_age_s: Optional[float]) -> str:
    """The one verdict on the daemon: running, stale (alive but its heartbeat is old) or stopped."""
    if not pid_alive:
        return "stopped"
    if heartbeat_age_s is None or heartbeat_age_s > STALE_AFTER_S:
        return "stale"
    return "running"


def skeleton(home: Home, roots: Roots, now: float) -> Dict[str, Any]:
    """No status.json yet (the daemon never ran here): what the files say, by the same builder."""
    from boxagent.wire import events as events_mod
    agent = agent_block(None, False, None, now, roots.boot_id(), False, deps())
    runs, summary = recent(_state_files(home), lambda r: r.get("state"))
    return compose(now, None, None, agent, runs, {}, events_mod.tail(home.events, STATUS_EVENTS), summary=summary)


def add_older(status: Dict[str, Any], home: Home, name: Optional[str] = None) -> None:
    """`status --all` (name None) or `status --run NAME`: the ended runs status.json no longer
    holds, from their own state files (read only when asked)."""
    known = {r.get("name") for r in status.get("runs") or [] if isinstance(r, dict)}
    if name is not None:
        if name in known:
            return
        state = read_json(home.run_state(name))
        older = [state] if isinstance(state, dict) and state.get("schema") == "rgt.runstate/1" else []
    else:
        older = [r for r in _state_files(home) if r.get("name") not in known]
    if not older:
        return
    blocks = [run_block(r, None, None, 0.0) for r in older]
    status["runs"] = sorted(blocks + list(status.get("runs") or []), key=lambda r: str(r.get("created_at") or ""))


def _state_files(home: Home) -> List[Dict[str, Any]]:
    """runs/*/state.json, queue order (a reader's view: no engine imported)."""
    import os
    try:
        names = [n for n in os.listdir(home.runs) if not n.startswith(".")]
    except OSError:
        return []
    runs = [read_json(home.run_state(n)) for n in names]
    runs = [r for r in runs if isinstance(r, dict) and r.get("schema") == "rgt.runstate/1"]
    return sorted(runs, key=lambda r: (r.get("seq") or 0, r.get("created_at") or 0))


def _refresh_running(status: Dict[str, Any], now: float) -> None:
    """A running stage's elapsed time is the observer's now, not the last status.json write's;
    its progress says how old it is (it trails the log by up to sample_every)."""
    for run in status.get("runs") or []:
        for st in run.get("stages") or []:
            if st.get("state") != "running":
                continue
            if isinstance(st.get("started_at"), str):
                try:
                    st["duration_s"] = round(max(0.0, now - parse_iso_utc(st["started_at"])), 3)
                except ValueError:
                    pass
            prog = st.get("progress")
            seen = prog.get("seen_at") if isinstance(prog, dict) else None
            if isinstance(seen, (int, float)) and not isinstance(seen, bool):
                prog["age_s"] = round(max(0.0, now - seen), 1)


def _refresh_cost(status: Dict[str, Any], now: float, written_at: Any) -> None:
    """The daemon is down but the box answers, so it is up and billing: its paid hours go on
    from the last status.json write (a dead agent must not show a bill that stopped)."""
    cost = status.get("cost")
    if not isinstance(cost, dict) or not isinstance(cost.get("hours"), (int, float)) or not isinstance(written_at, str):
        return
    try:
        extra_h = max(0.0, now - parse_iso_utc(written_at)) / 3600.0
    except ValueError:
        return
    cost["hours"] = cost["hours"] + extra_h          # full precision: a display rounds
    price = cost.get("price_per_hour")
    if isinstance(price, (int, float)) and not isinstance(price, bool):
        cost["spent"] = cost["hours"] * price
        if isinstance(cost.get("idle_hours"), (int, float)):
            cost["idle_hours"] += extra_h             # the daemon is down: no run is charged meanwhile
            cost["idle_spent"] = cost["idle_hours"] * price
    idle = cost.get("idle")
    if isinstance(idle, dict) and isinstance(idle.get("idle_s"), (int, float)):
        idle["idle_s"] = round(idle["idle_s"] + extra_h * 3600.0, 1)
