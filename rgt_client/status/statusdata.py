"""Facts read from a box's status.json (`rgt.status/1`): no rendering here, no ssh.

The box may be compromised, so the answer is checked before anything reads it: every field a
renderer or a verdict uses has the type it must have (a number is finite), and a field that does
not is an error naming the field and the host, never `internal error: KeyError`.
"""
from __future__ import annotations

import math
import shlex
from typing import Any, TypedDict, Union

from boxagent.api import NON_FINITE
from rgt_client import exitcodes
from rgt_client.errors import ClientError

AGENT_STATES = ("running", "stale", "stopped")
ACTIVE = ("running", "queued")
ENDED_BAD = ("failed", "cancelled", "interrupted")
RECENT_ENDED = 5          # `status` without --all: active runs and this many ended ones

# -- the shape the client reads (anything else in the answer is passed on by --json, unread) --
# "s" str, "n" finite number, "f" any number (a metric: NaN or inf is news, not damage),
# "m" a metric's last value (a number, or "nan"/"inf"/"-inf" as the agent writes a non-finite
# one), "i" int, "b" bool; every field may also be null/absent.
_PROGRESS = {"done": "n", "total": "n", "fraction": "n", "eta_s": "n", "last_line": "s", "seen_at": "n",
             "age_s": "n"}
_CAUSE = {"class": "s", "summary": "s", "remediation": "s", "retryable": "b", "evidence": ["s"],
          "decided_by": "s", "overruled": ["s"], "confidence": "s", "runner_up": "s", "tell_apart": "s",
          "decided_by_fact": "s",
          "similar": [{"source": "s", "url": "s", "class": "s", "why": "s", "fix": "s", "score": "n"}]}
_STAGE = {"name": "s", "kind": "s", "state": "s", "attempt": "i", "exit_code": "i", "duration_s": "n",
          "log": "s", "progress": _PROGRESS, "cause": _CAUSE, "warnings": ["s"], "metrics": {"*": "m"},
          "slurm_job_id": "s", "slurm_state": "s", "slurm_waiting": {"text": "s", "blocked": "b"},
          "placement": {"state": "s", "node": "s", "host": "s", "gpus": "s", "ssh_host": "s"}}
_RUN = {"name": "s", "state": "s", "workdir": "s", "created_at": "s", "started_at": "s", "ended_at": "s",
        "stages": [_STAGE], "artifacts": {"files": "i", "bytes": "n"}, "pending_pickup": "b",
        "cost": {"hours": "n", "spent": "n"},
        "pull_verified": {"verified_at": "s", "dest": "s", "files": "i", "bytes": "i", "manifest_sha256": "s",
                          "current": "b"}}
_COST = {"price_per_hour": "n", "currency": "s", "since": "s", "hours": "n", "spent": "n", "budget": "n",
         "runs_hours": "n", "runs_spent": "n", "idle_hours": "n", "idle_spent": "n", "runs_folded": "i",
         "budget_used_pct": "n", "idle_alert_after_s": "n", "stop_deadline_at": "s", "stop_deadline_in_s": "n",
         "idle": {"since": "s", "idle_s": "n", "spent": "n", "reminders_sent": "i", "next_reminder_at": "s"}}
_GPU = {"index": "i", "name": "s", "util_pct": "n", "memory_used_bytes": "n", "memory_total_bytes": "n",
        "temperature_c": "n", "power_w": "n", "throttle_reasons": ["s"], "lost": "b",
        "xid_last": {"code": "i"}, "run": "s",
        "processes": [{"pid": "i", "rgt": "b", "command": "s", "visible": "b", "used_memory_bytes": "n"}]}
_HEALTH = {"memory": {"cgroup": "s", "current_bytes": "n", "max_bytes": "n", "used_pct": "n", "peak_bytes": "n",
                      "oom_kill": "i", "host_total_bytes": "n"},
           "cpu": {"quota_cores": "n"}, "gpu_unavailable_reason": "s", "gpus": [_GPU],
           "disks": [{"path": "s", "role": "s", "bytes_total": "n", "bytes_used_pct": "n", "inodes_used_pct": "n",
                      "dev": "i"}]}
SHAPE = {
    "observed_at": "s", "host": "s", "profile": "s",
    "agent": {"version": "s", "build_sha256": "s", "pid": "i", "running": "b", "state": "s",
              "heartbeat_age_s": "n", "machine_restarted": "b",
              "storage": {"state": "s", "since": "s", "error": "s", "pending_writes": "i",
                          "need_free_bytes": "i", "free_bytes": "i"}},
    "health": _HEALTH,
    "history": {"mem_used_pct": ["n"], "gpu_util_pct": {"*": ["n"]}, "disk_used_pct": {"*": ["n"]}},
    "runs": [_RUN],
    "alerts": [{"severity": "s", "type": "s", "summary": "s"}],
    "notifications": {"sent": "i", "pending": "i", "failed": "i", "last_error": "s"},
    "events": [{"at": "s", "severity": "s", "type": "s", "summary": "s"}],
    "metrics_history": {"*": {"stage": "s", "metric": "s", "values": ["f"]}},
    "cost": _COST,
    "runs_summary": {"total": "i", "shown": "i", "ended_not_shown": "i"},
}
# The same stage blocks as types, for the renderers that read them (every field may be null or
# absent; tests/client/test_status_contract.py holds their keys to the shapes above).
Progress = TypedDict("Progress", {"done": "float | None", "total": "float | None", "fraction": "float | None",
                                  "eta_s": "float | None", "last_line": "str | None", "seen_at": "float | None",
                                  "age_s": "float | None"}, total=False)
Cause = TypedDict("Cause", {"class": "str | None", "summary": "str | None", "remediation": "str | None",
                            "retryable": "bool | None", "evidence": "list[str] | None", "decided_by": "str | None",
                            "overruled": "list[str] | None", "confidence": "str | None", "runner_up": "str | None",
                            "tell_apart": "str | None", "decided_by_fact": "str | None",
                            "similar": "list[dict[str, Any]] | None"}, total=False)
SlurmWaiting = TypedDict("SlurmWaiting", {"text": "str | None", "blocked": "bool | None"}, total=False)
Placement = TypedDict("Placement", {"state": "str | None", "node": "str | None", "host": "str | None",
                                    "gpus": "str | None", "ssh_host": "str | None"}, total=False)
Stage = TypedDict("Stage", {"name": "str | None", "kind": "str | None", "state": "str | None",
                            "attempt": "int | None", "exit_code": "int | None", "duration_s": "float | None",
                            "log": "str | None", "progress": "Progress | None", "cause": "Cause | None",
                            "warnings": "list[str] | None", "metrics": "dict[str, Union[float, str]] | None",
                            "slurm_job_id": "str | None", "slurm_state": "str | None",
                            "slurm_waiting": "SlurmWaiting | None", "placement": "Placement | None"}, total=False)
_NAMES = {"s": "a string", "n": "a finite number", "f": "a number", "m": "a number or \"nan\"/\"inf\"/\"-inf\"", "i": "an integer", "b": "true or false"}
_BIG = 1e18   # past this a number is nonsense, and %d/%.0f of it is slow or overflows


class Malformed(Exception):
    def __init__(self, path: str, want: str, got: Any) -> None:
        super().__init__(path)
        self.path, self.want, self.got = path, want, got


def validate(status: Any, host: str) -> dict[str, Any]:
    """The status as it came, once every field the client reads has its type; else ClientError."""
    try:
        if not isinstance(status, dict):
            raise Malformed("", "an object", status)     # the whole answer a bare null or list
        _check(status, SHAPE, "")
    except Malformed as bad:
        raise ClientError("%s sent a malformed status: %s: expected %s, got %s"
                          % (host, bad.path or "the answer", bad.want, _short(bad.got)),
                          "the agent there may be damaged or compromised: look at the box over plain "
                          "ssh, then reinstall it: rgt-client install %s" % shlex.quote(host))
    state = (status.get("agent") or {}).get("state")
    if state is not None and state not in AGENT_STATES:
        raise ClientError("%s sent a malformed status: agent.state: expected one of %s, got %s"
                          % (host, ", ".join(AGENT_STATES), _short(state)),
                          "reinstall the agent: rgt-client install %s" % shlex.quote(host))
    return status


def _check(value: Any, shape: Any, path: str) -> None:
    if value is None:
        return
    if isinstance(shape, str):
        _scalar(value, shape, path)
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise Malformed(path, "a list", value)
        for i, item in enumerate(value):
            if item is None and isinstance(shape[0], dict):
                raise Malformed("%s[%d]" % (path, i), "an object", item)   # a null run or GPU
            _check(item, shape[0], "%s[%d]" % (path, i))
    else:
        if not isinstance(value, dict):
            raise Malformed(path, "an object", value)
        for key, sub in shape.items():
            if key == "*":
                for k, v in value.items():
                    _check(v, sub, "%s.%s" % (path, k) if path else str(k))
            elif key in value:
                _check(value[key], sub, "%s.%s" % (path, key) if path else key)


def _scalar(value: Any, kind: str, path: str) -> None:
    if kind == "s":
        good = isinstance(value, str)
    elif kind == "b":
        good = isinstance(value, bool)
    elif kind == "m" and isinstance(value, str):
        good = value in NON_FINITE
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        good = False
    elif kind == "i":
        good = isinstance(value, int) and abs(value) < _BIG
    elif kind in ("f", "m"):
        good = not isinstance(value, int) or abs(value) < _BIG   # a float is any float
    else:
        good = abs(value) < _BIG and math.isfinite(value)   # abs first: isfinite(10**400) overflows
    if not good:
        raise Malformed(path, _NAMES[kind], value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- facts --------------------------------------------------------------------------------------

def agent_state(status: dict[str, Any]) -> str:
    """The agent's own verdict on its daemon (status.json agent.state: running | stale | stopped).
    An agent older than that field only says whether the daemon runs: running, else stopped."""
    agent = status.get("agent") or {}
    state = agent.get("state")
    if state in AGENT_STATES:
        return state
    return "running" if agent.get("running") else "stopped"


def state_dir_full(status: dict[str, Any]) -> dict[str, Any] | None:
    """agent.storage when the agent says its state dir is full (it runs on, from memory)."""
    storage = (status.get("agent") or {}).get("storage") or {}
    return storage if storage.get("state") == "full" else None


def alive(status: dict[str, Any]) -> bool:
    return agent_state(status) == "running"


def find_run(status: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    for run in (status or {}).get("runs") or []:
        if run.get("name") == name:
            return run
    return None


def unknown_run(host: str, name: str, status: dict[str, Any] | None) -> ClientError:
    names = [str(r.get("name")) for r in (status or {}).get("runs") or []]
    word = shlex.quote(host)
    if len(names) > 20:
        names = names[-20:] + ["… (rgt-client status %s --all)" % word]
    hint = ("runs on %s: %s" % (host, ", ".join(names))) if names else \
        "there are no runs on %s yet: rgt-client run %s JOB.toml" % (host, word)
    return ClientError("no run %r on %s" % (name, host), hint, exitcodes.USAGE)


def warnings_of(run: dict[str, Any]) -> list[tuple[str, str]]:
    """(stage, warning) for every warning a stage of the run recorded (a NaN loss that still
    exited 0, a suspiciously fast stage...): a run with any is not plainly healthy."""
    return [(str(st.get("name")), w) for st in run.get("stages") or [] for w in st.get("warnings") or []]


def not_in_answer(summary: Any) -> int:
    """Ended runs the box left out of its answer (status.json keeps a recent tail; `--all` asks
    for the rest): a count from the box, checked, or 0."""
    n = summary.get("ended_not_shown") if isinstance(summary, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 10 ** 9 else 0


def runs_to_show(runs: list[dict[str, Any]], show_all: bool,
                 recent: int = RECENT_ENDED) -> tuple[list[dict[str, Any]], int]:
    """(runs newest first, how many older ended ones were left out). Without show_all: the active
    runs and the last `recent` ended ones; 20 runs once made a 106-line status."""
    active = [r for r in runs if r.get("state") in ACTIVE]
    ended = [r for r in runs if r.get("state") not in ACTIVE]
    active.sort(key=lambda r: r.get("started_at") or r.get("created_at") or "", reverse=True)
    ended.sort(key=lambda r: r.get("ended_at") or r.get("created_at") or "", reverse=True)
    if show_all:
        return active + ended, 0
    return active + ended[:recent], max(0, len(ended) - recent)
