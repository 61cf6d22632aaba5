"""The reading verbs: a stage's log (its last lines), a run's handbook, a run's state as its
files say. Nothing here posts to the inbox or needs the daemon.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

from boxagent.base.errors import UsageError
from boxagent.base.home import Home
from boxagent.wire import inbox


def read_state(home: Home, name: str) -> Optional[Dict[str, Any]]:
    from boxagent.engine.store import read_state as read   # here: `version` needs no engine
    return read(home, name)


def stage_dict(run: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    return next((st for st in run.get("stages") or [] if st.get("name") == name), None)


def logs(home: Home, name: str, stage: Optional[str], n: int, attempt: Optional[int]) -> str:
    """One stage's log tail; without --stage, every stage that ran (latest attempt), in order,
    each under a `==> stage (attempt K): path <==` header like tail(1) prints for several files."""
    run = read_state(home, name)
    if run is None:
        if inbox.pending_submits(home).get(name) is not None:
            # submitted, not yet picked up (the daemon is down or busy): status lists it as
            # queued, so "no run named" here contradicted it
            raise UsageError("run %s is queued and has no stage log yet" % name,
                             "its stages log once it starts; see `rgt-agent status --run %s`" % name)
        raise UsageError("no run named %r on this box" % name, "list the runs with `rgt-agent status`")
    if stage is not None or attempt is not None:
        st = _pick_stage(run, stage)
        return tail_lines(_log_path(home, name, st, attempt), n)
    ran = [st for st in run["stages"] if st.get("attempt") and st.get("log") and os.path.exists(st["log"])]
    if not ran:
        raise UsageError("run %s has no stage log yet (state: %s)" % (name, run["state"]),
                         "see `rgt-agent status --run %s`" % name)
    if len(ran) == 1:
        return tail_lines(ran[0]["log"], n)
    parts = []
    for st in ran:
        text = tail_lines(st["log"], n)
        parts.append("==> %s (attempt %d): %s <==\n%s%s" % (st["name"], st["attempt"], st["log"], text,
                                                           "" if not text or text.endswith("\n") else "\n"))
    return "\n".join(parts)


def _log_path(home: Home, name: str, st: Dict[str, Any], attempt: Optional[int]) -> str:
    if attempt is None:
        attempt = st.get("attempt") or 1
    path = st.get("log") if (st.get("kind") == "wait" or attempt == st.get("attempt")) and st.get("log") \
        else home.stage_log(name, st["name"], attempt)
    if not path or not os.path.exists(path):
        raise UsageError("stage %s of run %s has no log for attempt %d yet" % (st["name"], name, attempt),
                         "its state is %s; see `rgt-agent status --run %s`" % (st["state"], name))
    return path


def _pick_stage(run: Dict[str, Any], stage: Optional[str]) -> Dict[str, Any]:
    if stage is not None:
        st = stage_dict(run, stage)
        if st is None:
            raise UsageError("run %s has no stage %r" % (run["name"], stage),
                             "its stages: %s" % ", ".join(s["name"] for s in run["stages"]))
        return st
    if run.get("current_stage"):
        return stage_dict(run, run["current_stage"]) or run["stages"][0]
    started = [s for s in run["stages"] if s.get("attempt")]
    return started[-1] if started else run["stages"][0]


def tail_lines(path: str, n: int) -> str:
    """The last n lines as a human reads them (logtail: LF ends a line, a progress bar's CR
    redraws count as one line, the last; bounded reads); n <= 0: all of them."""
    from boxagent.daemon import logtail
    try:
        if n <= 0:
            import io
            buf = io.BytesIO()
            logtail.copy_all(path, buf)
            data = buf.getvalue()
        else:
            data = logtail.tail(path, n)
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def handbook_text(home: Home, name: str) -> str:
    try:
        with open(home.handbook(name), encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        raise UsageError("no handbook for run %r (unknown run, or not picked up by the daemon yet)" % name,
                         "list the runs with `rgt-agent status`")


