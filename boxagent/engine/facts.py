"""How an attempt ended: the facts for `diagnose()`, and success as DESIGN.md defines it.

Success = exit 0 (no signal) AND every `expect` path exists and is non-empty AND `success_pattern`
(if given) appeared AND `fail_pattern` did not. Anything else is failure, whatever the exit code.
The facts keys are the ones documented in boxagent/triage/diagnose.py.
"""
from __future__ import annotations

import os
import re
import signal as _signal
from typing import Any, Dict, List, Optional

from boxagent.base import safefile


LAST_LINES = 20


def build_facts(stage_spec: Dict[str, Any], stage_state: Dict[str, Any], workdir: str,
                exit_info: Optional[Dict[str, Any]], watch: Any, now: float,
                stop_reason: Optional[str] = None, vanished: bool = False, boot_changed: bool = False,
                reading: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The facts of one ended attempt. `watch` is its StageWatch (None for a wait stage without a
    log); `reading` is what the health part read from the box when it ended (BoxReader.since):
    oom_kill_delta, gpu_faults, disks, cgroup_version."""
    exit_info = exit_info or {}
    reading = reading or {}
    sig = exit_info.get("signal")
    started = stage_state.get("started_at")
    facts: Dict[str, Any] = {
        "stage": stage_spec["name"], "kind": stage_state.get("kind"), "attempt": stage_state.get("attempt"),
        "exit_code": exit_info.get("exit_code"), "signal": sig,
        "timed_out": stop_reason == "timeout", "cancelled": stop_reason == "cancel",
        "preempted": stop_reason == "preempt", "boot_changed": boot_changed, "vanished": vanished,
        "hangup": sig == int(_signal.SIGHUP),
        "expect_missing": expect_missing(workdir, stage_spec.get("expect") or []),
        "success_pattern": _success_pattern(stage_spec),
        "success_seen": False, "fail_line": None, "hits": [], "last_lines": [],
        "oom_kill_delta": reading.get("oom_kill_delta"), "cgroup_version": reading.get("cgroup_version"),
        "gpu_faults": list(reading.get("gpu_faults") or []), "disks": list(reading.get("disks") or []),
        "gpu_tenants": list(reading.get("gpu_tenants") or []),
        # A Slurm job's wait in the queue is no part of how long the stage ran: the shim's own clock.
        "duration_s": exit_info["ran_s"] if isinstance(exit_info.get("ran_s"), (int, float))
        else (round(now - started, 3) if started else None),
        "expected_duration_s": stage_spec.get("expected_duration"),
        "fast_ratio": stage_spec.get("fast_ratio", 0.5),
        "log": stage_state.get("log"), "timeout_s": stage_spec.get("timeout"), "workdir": workdir,
        "previous_duration_s": stage_state.get("last_success_s"),
    }
    if exit_info.get("error"):
        facts["spawn_error"] = exit_info["error"]
        if exit_info.get("hint"):
            facts["spawn_hint"] = exit_info["hint"]
    if isinstance(exit_info.get("slurm"), dict):
        facts["slurm"] = exit_info["slurm"]          # the job's record: state, reason, node, ...
        facts["no_exit_file"] = bool(exit_info.get("no_exit_file"))
    if isinstance(exit_info.get("ray"), dict):
        facts["ray"] = exit_info["ray"]              # the Ray job's record: status, message, node, ...
        facts["no_exit_file"] = bool(exit_info.get("no_exit_file"))
    if watch is not None:
        facts.update(watch.facts())      # success_seen, fail_line, hits, last_lines, progress_line_no...
    elif stage_state.get("log"):
        # The tailer could not be made for this log: the patterns still decide, from the file.
        facts["success_seen"], facts["fail_line"] = scan_log(
            stage_state["log"], facts["success_pattern"],
            (stage_spec.get("wait") or {}).get("fail_pattern") or stage_spec.get("fail_pattern"))
    return facts


def scan_log(path: str, success: Optional[str], fail: Optional[str], limit: int = 64 << 20) -> tuple:
    """(success_seen, first fail line) over the last `limit` bytes of a log."""
    if not success and not fail:
        return False, None
    s_re, f_re = (re.compile(success) if success else None), (re.compile(fail) if fail else None)
    seen, fail_line = False, None
    try:
        with os.fdopen(safefile.open_regular(path), "rb") as fh:   # a FIFO log must not block the verdict
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - limit))
            for raw in fh:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                seen = seen or bool(s_re and s_re.search(line))
                if f_re and fail_line is None and f_re.search(line):
                    fail_line = line
    except OSError:
        pass
    return seen, fail_line


def _success_pattern(stage_spec: Dict[str, Any]) -> Optional[str]:
    if "wait" in stage_spec:
        return stage_spec["wait"].get("pattern") or stage_spec.get("success_pattern")
    return stage_spec.get("success_pattern")


def succeeded(facts: Dict[str, Any]) -> bool:
    if facts["timed_out"] or facts["cancelled"] or facts["preempted"] or facts["vanished"] or facts["boot_changed"]:
        return False
    if facts["kind"] == "run" and (facts["exit_code"] != 0 or facts["signal"]):
        return False
    if facts["expect_missing"] or facts["fail_line"]:
        return False
    if facts["success_pattern"] and not facts["success_seen"]:
        return False
    return True


def expect_missing(workdir: str, expect: List[str]) -> List[str]:
    """The `expect` paths that do not exist or are empty (a file of 0 bytes, an empty directory)."""
    missing = []
    for rel in expect:
        path = rel if os.path.isabs(rel) else os.path.join(workdir, rel)
        try:
            ok = bool(os.listdir(path)) if os.path.isdir(path) else os.stat(path).st_size > 0
        except OSError:
            ok = False
        if not ok:
            missing.append(rel)
    return missing


def newest_mtime(workdir: str, paths: List[str]) -> Optional[float]:
    """The newest mtime among the `expect` paths (a stage whose log is silent may still write)."""
    best = None
    for rel in paths:
        try:
            m = os.stat(rel if os.path.isabs(rel) else os.path.join(workdir, rel)).st_mtime
        except OSError:
            continue
        best = m if best is None else max(best, m)
    return best


def fallback_cause(facts: Dict[str, Any]) -> Dict[str, Any]:
    """Used only when diagnose() itself raised: the stage still fails with an honest cause."""
    ec = facts.get("exit_code")
    return {"class": "nonzero_exit", "summary": "the stage failed (exit code %s)" % ec,
            "remediation": "read the stage log", "retryable": False,
            "evidence": ["exit code %s" % ec] if ec is not None else []}


def elsewhere(reading: Dict[str, Any]) -> Dict[str, Any]:
    """The box's reading for a stage that ran on another machine (a Slurm node): what this host's
    cgroup and GPUs saw says nothing of it; only the shared disks count."""
    return dict(reading, oom_kill_delta=None, gpu_faults=[], cgroup_version=None)
