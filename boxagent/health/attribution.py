"""Whose fault an Xid is: the GPU's, or the process that faulted (and that process's stage).

Field failure on a real H100: a job's device-side assert logged Xid 43 and its out-of-bounds
kernel write Xid 31 (`pid=…, name=python3`). NVIDIA's catalog calls both application faults: the
GPU is fine, the job's code is at fault. rgt raised each as a box-wide GPU warning that named no
run, outlived the run, and showed as `gpu0 … Xid 31` under the next run. Here an application
Xid goes to the stage whose process faulted (the kernel line's pid, looked up in /proc or in the
pid book), and is a GPU alert only when it is not one of rgt's: another tenant's fault, named as
that process's.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from boxagent.health import xidcatalog


def is_application(f: Dict[str, Any]) -> bool:
    cls = f.get("xid_class") or xidcatalog.klass(f.get("code"))
    return f.get("type") == "gpu_xid" and cls == "application"


def belongs(f: Dict[str, Any], run: str, stage: Optional[str]) -> bool:
    """Is fault `f` (on this stage's GPUs, in its window) part of this stage's story?
    Hardware faults are every holder's story; an application Xid only its own process's."""
    if not is_application(f):
        return True
    owner = f.get("owner") or {}
    if owner.get("rgt") is True and owner.get("run") is not None:
        return owner.get("run") == run and (stage is None or owner.get("stage") == stage)
    if owner.get("rgt") is False:
        return False            # a process rgt did not start: its own fault, not this stage's
    return True                 # no pid (NVML's event names none): the GPU's holder faulted


def process_words(f: Dict[str, Any]) -> str:
    """'pid 2931 (python3)' or 'a process the driver did not name'."""
    if f.get("pid") is None:
        return "a process the driver did not name"
    name = f.get("process") or ((f.get("owner") or {}).get("command") or "").split(" ")[0]
    return "pid %s%s" % (f["pid"], " (%s)" % name if name else "")


def stage_words(f: Dict[str, Any]) -> str:
    """The evidence line a stage's cause carries for its own application Xid."""
    code = f.get("code")
    meaning = xidcatalog.meaning(code) or "a GPU fault"
    who = "" if f.get("pid") is None else ", %s" % process_words(f)
    return ("%s by this stage's process (Xid %s%s on GPU %s): a bug in a kernel or extension, "
            "not a failing GPU" % (meaning, code, who, f.get("gpu")))


def alert_for(f: Dict[str, Any], holder: Optional[Tuple[str, Optional[str]]]) -> Optional[Dict[str, Any]]:
    """How a fault shows as an alert: None for an application Xid of one of rgt's stages (or of
    the GPU's holder when no pid is named) - it is that stage's evidence, not the GPU's health;
    else {severity, summary, class?, key_suffix}."""
    if f.get("type") != "gpu_xid":
        return {"severity": "critical", "summary": f.get("summary")}
    code = f.get("code")
    if is_application(f):
        owner = f.get("owner") or {}
        if f.get("claimed") or owner.get("rgt") is True or (owner.get("rgt") is None and holder is not None):
            return None
        whose = "a process rgt did not start" if owner.get("rgt") is False else "a process that has ended"
        return {"severity": "warning", "key_suffix": ":%s" % f.get("pid"),
                "summary": "Xid %s (%s) by %s, %s: a bug in its own code; the GPU is fine"
                           % (code, xidcatalog.meaning(code), process_words(f), whose)}
    if f.get("hardware"):
        row = xidcatalog.lookup(code)
        critical = f["critical"] if "critical" in f else xidcatalog.is_critical(code)
        sev = "critical" if critical else "warning"
        summary = f.get("summary") or ""
        if row is not None:
            summary += " (NVIDIA: %s)" % row.action
        return {"severity": sev, "summary": summary, "class": "gpu_hardware"}
    return {"severity": "warning", "summary": f.get("summary")}
