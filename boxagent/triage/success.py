"""Warnings for a stage that succeeded: exit 0 is not proof that the work was done.

success_warnings(facts) -> [str]: the log ends in an NCCL/CUDA error, a traceback follows the
last progress line (a script that went on after its python died: `python train.py; echo
done`), errors after the last progress line, the loss turned NaN, GPU faults or OOM kills
during the stage, and a suspiciously fast finish. A job's fail_pattern is what turns such a
line into a failure (the daemon's side).

divergence_spec(hit) -> the `divergence` event spec (warning) for a live run whose log shows
a NaN/inf loss or a collapsing loss scale: StageWatch.poll() returns it once per attempt, at
the first such line, and the daemon emits it like every poll() spec (run and stage added).

fast_spec(facts) -> the `suspiciously_fast` event spec or None: duration_s under fast_ratio
(default 0.5) of expected_duration_s (or, without it, of previous_duration_s: the stage's
last successful duration).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from boxagent.triage import evidence as E
from boxagent.triage.builtin_rules import REMEDIATION
from boxagent.triage.text import clip
from boxagent.triage.incidents import build
from boxagent.base.units import format_duration

# What an NCCL/CUDA failure looks like in the last lines of a log.
_END_ERROR = re.compile(r"CUDA error|CUDA out of memory|cudaError|NCCL (error|WARN|timeout)|"
                        r"ncclInternalError|ncclSystemError|ncclUnhandledCudaError|"
                        r"Watchdog caught collective operation timeout|device-side assert")
_TAIL = 10


def success_warnings(facts: Dict[str, Any]) -> List[str]:
    f = facts or {}
    out: List[str] = []
    for check in (_traceback_after_progress, _errors_after_progress, _ends_in_error,
                  _divergence, _gpu_faults, _oom_kills):
        w = check(f)
        # one warning per problem: a line already quoted by an earlier warning is not repeated
        if w and not any(w.split(": ", 1)[-1].strip(" )") in o for o in out):
            out.append(w)
    fast = fast_spec(f)
    if fast is not None:
        out.append("suspiciously fast: " + fast["summary"])
    return out


def _ends_in_error(f: Dict[str, Any]) -> Optional[str]:
    for line in reversed((f.get("last_lines") or [])[-_TAIL:]):
        if _END_ERROR.search(line or ""):
            return "exited 0 but the log ends with an NCCL/CUDA error: %s" % line
    return None


def _after(f: Dict[str, Any], h: Dict[str, Any]) -> Optional[bool]:
    if "after_progress" in h:
        return h["after_progress"]
    pl = f.get("progress_line_no")
    return None if pl is None else (h.get("line_no") or 0) > pl


def _traceback_after_progress(f: Dict[str, Any]) -> Optional[str]:
    """A traceback after the last progress line (or anywhere, when there is no progress);
    not one of a thread or of a dying object's __del__: the process outlived those."""
    side = set(id(h) for i in build(E.hits_of(f)) if i.noise for h in i.hits)
    tbs = [h for h in E.tracebacks(f) if _after(f, h) is not False and id(h) not in side]
    if not tbs:
        return None
    tb = tbs[-1]
    exc = [h for h in E.hits_of(f) if (h.get("line_no") or 0) > (tb.get("line_no") or 0)
           and h.get("severity") == "critical"]
    where = ("follows the last progress line" if _after(f, tb)
             else "is in a log without progress lines")
    return "exited 0 but a Python traceback %s (line %s)%s" % (
        where, tb.get("line_no"), (": %s" % exc[0].get("line")) if exc else "")


def _errors_after_progress(f: Dict[str, Any]) -> Optional[str]:
    crit = [h for h in E.hits_of(f) if h.get("severity") == "critical"
            and _after(f, h) and h.get("class") != "code_error"]
    if not crit:
        return None
    h = min(crit, key=E.hit_key)
    return "exited 0 but the log shows %s after the last progress line (%s)" % (h["class"], E.hit_line(h))


def _divergence(f: Dict[str, Any]) -> Optional[str]:
    div = [h for h in E.hits_of(f) if h.get("class") == "divergence"]
    if not div:
        return None
    return "the loss became NaN/inf (first at line %s): check the result before using it" % (
        div[0].get("line_no"))


def divergence_spec(hit: Dict[str, Any]) -> Dict[str, Any]:
    """The alert for the first divergence line of a running stage (it may still recover: a
    warning, never a kill)."""
    return {"type": "divergence", "severity": "warning", "key": "divergence",
            "summary": "the loss became NaN/inf (line %s): %s" % (
                hit.get("line_no"), clip(str(hit.get("line", "")), 160)),
            "evidence": [E.hit_line(hit)], "remediation": REMEDIATION["divergence"]}


def _gpu_faults(f: Dict[str, Any]) -> Optional[str]:
    faults = [g for g in f.get("gpu_faults") or [] if isinstance(g, dict)]
    if not faults:
        return None
    g = faults[0]
    return "GPU fault during the stage: %s" % (g.get("summary") or "%s %s" % (g.get("type"), g.get("code", "")))


def _oom_kills(f: Dict[str, Any]) -> Optional[str]:
    d = f.get("oom_kill_delta")
    if isinstance(d, int) and d > 0:
        return ("the cgroup OOM killer killed %d process(es) during the stage (a DataLoader "
                "worker?) although it exited 0" % d)
    return None


def fast_spec(facts: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    f = facts or {}
    dur = f.get("duration_s")
    expected = f.get("expected_duration_s") or f.get("previous_duration_s")
    ratio = f.get("fast_ratio")
    ratio = 0.5 if not isinstance(ratio, (int, float)) or ratio <= 0 else float(ratio)
    if not isinstance(dur, (int, float)) or not isinstance(expected, (int, float)) or expected <= 0:
        return None
    if dur >= ratio * expected:
        return None
    basis = "expected_duration" if f.get("expected_duration_s") else "its last successful run"
    return {"type": "suspiciously_fast", "severity": "warning",
            "summary": "finished in %s, under %d%% of %s (%s)" % (
                format_duration(dur), round(ratio * 100), basis, format_duration(expected)),
            "evidence": ["duration %s" % format_duration(dur),
                         "%s %s" % (basis, format_duration(expected)),
                         "fast_ratio %.2f" % ratio],
            "duration_s": dur, "expected_duration_s": expected, "fast_ratio": ratio}
