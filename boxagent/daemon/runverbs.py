"""The run verbs a command posts to the daemon's inbox: submit (one job or a sweep), cancel (a run
or a sweep), resume. Each checks what it can from the files first (a UsageError for what must not
happen), posts, and waits briefly for the daemon's answer in state.json.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from boxagent.base.errors import EXIT_NOT_RUNNING, EXIT_OK, AgentError, UsageError
from boxagent.base.fsutil import read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.daemon.control import POLL_S, daemon_pid
from boxagent.daemon.reading import read_state
from boxagent.engine import states as state
from boxagent.wire import inbox


def read_job_text(path: str) -> str:
    """At most one byte past the job size limit: a huge stdin is refused, never read whole."""
    from boxagent.engine.joblimits import MAX_JOB_BYTES
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_JOB_BYTES + 1)
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_JOB_BYTES + 1)
        # Past the limit the size check refuses it; a character cut at the edge is not the news.
        return data.decode("utf-8", "replace" if len(data) > MAX_JOB_BYTES else "strict")
    except OSError as exc:
        raise UsageError("cannot read the job file %s: %s" % (path, exc.strerror), "check the path")
    except UnicodeDecodeError:
        raise UsageError("the job file %s is not UTF-8 text" % path, "save it as UTF-8")


def submit(home: Home, text: str, source: str, replace: bool = False) -> Dict[str, Any]:
    """Validate and queue; {"run", "state", "duplicate"}, plus {"group", "runs": [...]} for a
    sweep ([matrix]: one run per combination). All or nothing: on any error nothing is queued."""
    from boxagent.engine import jobspec, sweep
    spec = jobspec.validate(jobspec.parse_text(text, source), source)
    if not os.path.isdir(spec["workdir"]):
        # Accepted, it would only fail at start as a bare exit 127 with a generic fix.
        raise UsageError("workdir %s does not exist on this box" % spec["workdir"],
                         "create it first (mkdir -p %s), or fix the job's `workdir`" % spec["workdir"])
    _check_gpu_count(home, spec)
    specs = sweep.expand(spec)
    with inbox.submit_lock(home):
        plans = [_plan(home, s, jobspec.spec_sha256(s), replace) for s in specs]
        if not all(p["duplicate"] for p in plans):
            # One request for the whole sweep (the daemon expands it): a cut submit leaves all or none.
            inbox.post(home, "submit", {"spec": spec, "replace": any(p.get("replace") for p in plans)})
        for plan in plans:
            plan.pop("replace", None)
            plan.pop("replace", None)
    if len(plans) == 1 and "group" not in specs[0]:
        return plans[0]
    return {"run": spec["name"], "group": spec["name"], "runs": plans,
            "state": state.QUEUED if any(not p["duplicate"] for p in plans) else plans[0]["state"],
            "duplicate": all(p["duplicate"] for p in plans)}


def _plan(home: Home, spec: Dict[str, Any], sha: str, replace: bool) -> Dict[str, Any]:
    """What submitting this one run means; UsageError when it must not happen."""
    name = spec["name"]
    current = _current(home, name)
    if current is None:
        return {"run": name, "state": state.QUEUED, "duplicate": False, "replace": False}
    cur_state, cur_sha = current
    if cur_sha == sha:
        return {"run": name, "state": cur_state, "duplicate": True}
    if cur_state in state.LIVE:
        raise UsageError("run %s is %s with a different job" % (name, cur_state),
                         "pick another name, or cancel it first: `rgt-agent cancel %s`" % name)
    if not replace:
        # resume was the first suggestion here: it reruns the OLD job, not the one just sent
        raise UsageError("run %s already exists (%s) with a different job" % (name, cur_state),
                         "pick another name, or, to run this job under that name, submit with --replace: the "
                         "old run moves to runs/.archive/")
    return {"run": name, "state": state.QUEUED, "duplicate": False, "replace": True}


def _check_gpu_count(home: Home, spec: Dict[str, Any]) -> None:
    """A run asking more GPUs than the box has would wait for ever: refuse it now."""
    want = spec.get("gpus")
    if not isinstance(want, int) or want == 0 or spec.get("backend", "local") != "local":
        return          # a cluster's nodes hold the GPUs (Ray), not this box
    have = box_gpu_count(home)
    if have is not None and want > have:
        raise UsageError("the job asks for %d GPU(s); this box has %d" % (want, have),
                         "lower `gpus` (or use gpus = \"all\" for the whole box)")


def box_gpu_count(home: Home) -> Optional[int]:
    """The usable GPUs the daemon last saw (status.json), None before it ever sampled."""
    health = (read_json(home.status) or {}).get("health")
    if not isinstance(health, dict) or "gpus" not in health:
        return None
    return len([g for g in health.get("gpus") or [] if isinstance(g, dict) and not g.get("lost")])


def _current(home: Home, name: str) -> Optional[Tuple[str, Optional[str]]]:
    """(state, spec sha) of the run under this name: a pending submit first, then state.json."""
    from boxagent.engine import jobspec, sweep
    pending = inbox.pending_submits(home, sweep.expand).get(name)
    if pending is not None:
        if "group" in pending["spec"]:           # a run of a pending sweep: expanded from a checked job
            return state.QUEUED, jobspec.spec_sha256(pending["spec"])
        try:
            return state.QUEUED, jobspec.spec_sha256(jobspec.validate(pending["spec"]))
        except UsageError:
            return state.QUEUED, None
    run = read_state(home, name)
    if run is not None:
        return run["state"], run.get("spec_sha256")
    return None


def _known_state(home: Home, name: str) -> str:
    current = _current(home, name)
    if current is None:
        raise UsageError("no run named %r on this box" % name, "list the runs with `rgt-agent status`")
    return current[0]


def group_members(home: Home, group: str) -> List[str]:
    """The runs of the sweep named `group` (queued ones still in the inbox too), in name order."""
    from boxagent.engine import sweep
    names = {n for n, req in inbox.pending_submits(home, sweep.expand).items()
             if (req.get("spec") or {}).get("group") == group}
    try:
        listed = [n for n in os.listdir(home.runs) if not n.startswith(".")]
    except OSError:
        listed = []
    names.update(n for n in listed if (read_state(home, n) or {}).get("group") == group)
    return sorted(names)


def cancel(home: Home, roots: Roots, name: str, wait: float, kind: Optional[str] = None) -> Tuple[str, int]:
    """kind "group": the sweep NAME; "run": the run NAME; None: whichever exists, and a name that
    is both is asked about (a cancel of a sweep once went to a plain run of the same name)."""
    is_run, members = _current(home, name) is not None, group_members(home, name)
    if kind == "group" or (kind is None and members and not is_run):
        if not members:
            raise UsageError("no sweep named %r on this box" % name, "list the runs with `rgt-agent status`")
        return _cancel_group(home, roots, name, wait)
    if kind is None and members:
        raise UsageError("%s is both a run and a sweep of %d run(s)" % (name, len(members)),
                         "say which: `rgt-agent cancel --group %s` (every run of the sweep) or "
                         "`rgt-agent cancel --run %s` (the one run)" % (name, name))
    before = _known_state(home, name)
    if before not in state.LIVE:
        return "run %s is already %s; nothing to cancel" % (name, before), EXIT_OK
    inbox.post(home, "cancel", {"run": name})
    if daemon_pid(home, roots) is None:
        return ("cancel of run %s queued, but the daemon is not running: it takes effect when it starts "
                "(`rgt-agent start`)" % name), EXIT_NOT_RUNNING
    after = _wait_state(home, name, lambda s: s not in state.LIVE, wait)
    if after == state.CANCELLED:
        return "run %s cancelled" % name, EXIT_OK
    if after not in state.LIVE:
        return "run %s ended as %s before the cancel took effect" % (name, after), EXIT_OK
    return "run %s: cancel requested; its stage is stopping (TERM sent, KILL after stop_grace)" % name, EXIT_OK


def resume(home: Home, roots: Roots, name: str) -> Tuple[str, int]:
    before = _known_state(home, name)
    if before in state.LIVE:
        return "run %s is already %s; nothing to resume" % (name, before), EXIT_OK
    if before == state.SUCCEEDED:
        return "run %s already succeeded; nothing to resume" % name, EXIT_OK
    alive = _live_attempt(home, roots, name)
    if alive is not None:
        raise AgentError("run %s: %s still runs; resuming now would run that stage twice" % (name, alive),
                         "cancel it first (`rgt-agent cancel %s`) or wait for it to end" % name)
    inbox.post(home, "resume", {"run": name})
    if daemon_pid(home, roots) is None:
        return ("resume of run %s queued; the daemon is not running: start it with `rgt-agent start`" % name,
                EXIT_NOT_RUNNING)
    _wait_state(home, name, lambda s: s in state.LIVE, 3.0)
    return "run %s queued again; stages with a marker will be skipped" % name, EXIT_OK


def _cancel_group(home: Home, roots: Roots, group: str, wait: float) -> Tuple[str, int]:
    """Every run of a sweep: one request (the engine cancels the group's live runs together)."""
    members = group_members(home, group)
    live = [n for n in members if (_current(home, n) or ("", None))[0] in state.LIVE]
    if not live:
        return "sweep %s: none of its %d run(s) is live; nothing to cancel" % (group, len(members)), EXIT_OK
    inbox.post(home, "cancel", {"group": group})
    if daemon_pid(home, roots) is None:
        return ("cancel of sweep %s (%d live run(s)) queued, but the daemon is not running: it takes effect "
                "when it starts (`rgt-agent start`)" % (group, len(live))), EXIT_NOT_RUNNING
    deadline = time.monotonic() + wait
    left = live
    while left and time.monotonic() < deadline:
        time.sleep(POLL_S)
        left = [n for n in live if (_current(home, n) or ("", None))[0] in state.LIVE]
    if not left:
        return "sweep %s: %d run(s) cancelled (%s)" % (group, len(live), ", ".join(live)), EXIT_OK
    return ("sweep %s: cancel requested for %d run(s); %d still stopping (TERM sent, KILL after stop_grace): %s"
            % (group, len(live), len(left), ", ".join(left))), EXIT_OK


def _live_attempt(home: Home, roots: Roots, name: str) -> Optional[str]:
    """The run's stage attempt whose processes still live, said for a person, or None."""
    run = read_state(home, name) or {}
    for st in run.get("stages") or []:
        if not st.get("attempt") or st.get("kind") != "run":
            continue
        info = read_json(home.stage_pid(name, st["name"], st["attempt"])) or {}
        if not info.get("pgid"):
            continue
        from boxagent.engine import contain
        alive = [p for p in contain.members(roots, info.get("contain"), info["pgid"]) if p != info.get("shim_pid")]
        if alive:
            return "stage %s attempt %d (pid %s)" % (st["name"], st["attempt"], ", ".join(map(str, alive[:5])))
    return None


def _wait_state(home: Home, name: str, done: Any, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    current = ""
    while True:
        run = read_state(home, name)
        current = run["state"] if run else state.QUEUED
        if done(current) or time.monotonic() >= deadline:
            return current
        time.sleep(POLL_S)


