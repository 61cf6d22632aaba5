"""Slurm job states as rgt facts: the phase of a job, the words for a pending reason, and the
cause an end state names on its own.

`end_cause(rec)` returns {class, summary, retryable, evidence[]} when the Slurm state alone names
the cause (OUT_OF_MEMORY, TIMEOUT, PREEMPTED, NODE_FAIL, a cancel), and None when it does not
(COMPLETED, FAILED with an exit code): then the exit file and the log triage decide, as on a box.
Remediations stay with the triage rule tables.
"""
from __future__ import annotations

import re
import time
from typing import Any, Dict, List, Optional

PENDING = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD")
RUNNING = ("RUNNING", "CONFIGURING", "COMPLETING", "SIGNALING", "STAGE_OUT", "RESIZING", "SUSPENDED", "STOPPED")
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
         "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT")

# Pending reasons -> words for status. "blocked" = it will not start without a change by someone.
PENDING_REASONS = {
    "Priority": ("waiting behind higher-priority jobs", False),
    "Resources": ("waiting for CPUs/GPUs/memory to free up", False),
    "Dependency": ("waiting for the stage before it", False),
    "None": ("waiting to be scheduled", False),
    "BeginTime": ("waiting for its begin time", False),
    "JobHeldUser": ("held by its owner (scontrol release)", True),
    "JobHeldAdmin": ("held by an administrator", True),
    "DependencyNeverSatisfied": ("will never start: the stage before it did not succeed", True),
    "ReqNodeNotAvail": ("waiting: the nodes it needs are down, drained or reserved", False),
    "PartitionTimeLimit": ("will never start: its time is above the partition's limit", True),
    "PartitionNodeLimit": ("will never start: more nodes than the partition allows", True),
    "PartitionDown": ("waiting: the partition is down", False),
    "InvalidAccount": ("will never start: the account is not valid", True),
    "InvalidQOS": ("will never start: the QOS is not valid", True),
    "BadConstraints": ("will never start: no node satisfies its constraints", True),
    "QOSMaxJobsPerUserLimit": ("waiting: the QOS limit on running jobs per user is reached", False),
    "AssocGrpGRES": ("waiting: the account's GPU (gres) limit is reached", False),
    "AssocGrpCpuLimit": ("waiting: the account's CPU limit is reached", False),
    "AssocMaxJobsLimit": ("waiting: the account's job limit is reached", False),
}

# slurmstepd's line in the job's output when Slurm kills it:
#   slurmstepd: error: *** JOB 42 ON node7 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***
#   ... *** JOB 42 ON node7 CANCELLED AT 2024-05-01T10:00:00 ***        (scancel)
#   ... *** JOB 42 CANCELLED AT 2024-05-01T10:00:00 DUE TO PREEMPTION *** (older releases: no ON)
#   ... DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***
CANCEL_LINE = re.compile(r"\*\*\* (?:JOB|STEP) (?P<job>[0-9][0-9_.+a-z]*)(?: ON (?P<node>\S+))? "
                         r"CANCELLED AT (?P<at>\S+)(?: DUE TO (?P<due>[^*,]+?))?(?:,[^*]*)?(?: by \S+)? \*\*\*")


def phase(state: Optional[str]) -> str:
    """pending | running | ended | unknown."""
    if state in PENDING:
        return "pending"
    if state in RUNNING:
        return "running"
    if state in ENDED:
        return "ended"
    return "unknown"


def pending_text(reason: Optional[str]) -> Dict[str, Any]:
    """{reason, text, blocked} for status while a job waits."""
    text, blocked = PENDING_REASONS.get(reason or "None", ("waiting (%s)" % reason, False))
    return {"reason": reason, "text": text, "blocked": blocked}


def end_cause(rec: Dict[str, Any], cancelled_by_rgt: bool = False,
              log_line: Optional[Dict[str, Any]] = None) -> Optional[Dict[str, Any]]:
    """The cause an end state names by itself, or None (exit file + log triage decide).
    `cancelled_by_rgt`: rgt itself scancel'ed the job (cancel, or a run that stopped);
    `log_line`: cancel_line() found in the stage's log (says when, and often why)."""
    state = rec.get("state")
    ev = [_evidence(rec)]
    if log_line:
        ev.append("slurmstepd: cancelled at %s%s" % (log_line["at"], " due to " + log_line["due"].lower() if log_line.get("due") else ""))
    node = rec.get("node") or "its node"
    if state == "OUT_OF_MEMORY":
        return _cause("cgroup_oom", "Slurm killed the job for using more memory than its --mem "
                      "(OUT_OF_MEMORY on %s)" % node, False, ev)
    if state in ("TIMEOUT", "DEADLINE"):
        limit = rec.get("time_limit_s")
        return _cause("timeout", "the job ran past its Slurm time limit%s" % (
            " of %s" % _hms(limit) if limit else ""), False, ev)
    if state == "PREEMPTED":
        return _cause("preempted", "Slurm preempted the job for a higher-priority one", True, ev)
    if state in ("NODE_FAIL", "BOOT_FAIL"):
        return _cause("node_failure", "the Slurm node %s failed while the stage ran (%s)" % (node, state), True, ev)
    if state == "CANCELLED":
        return _cancelled(rec, cancelled_by_rgt, log_line, ev)
    if state in ("REVOKED", "SPECIAL_EXIT"):
        return _cause("nonzero_exit", "Slurm ended the job as %s" % state, False, ev)
    return None


def _cancelled(rec: Dict[str, Any], by_rgt: bool, log_line: Optional[Dict[str, Any]],
               ev: List[str]) -> Dict[str, Any]:
    if rec.get("reason") == "DependencyNeverSatisfied":
        return _cause("cancelled", "not run: the stage before it did not succeed (Slurm cancelled "
                      "job %s, DependencyNeverSatisfied)" % rec.get("job_id"), False, ev)
    due = ((log_line or {}).get("due") or "").upper()
    if "TIME LIMIT" in due:
        return _cause("timeout", "the job ran past its Slurm time limit", False, ev)
    if "PREEMPTION" in due:
        return _cause("preempted", "Slurm preempted the job for a higher-priority one", True, ev)
    if "NODE" in due:
        return _cause("node_failure", "the Slurm node %s failed while the stage ran" % (rec.get("node") or "?"), True, ev)
    if by_rgt:
        return _cause("cancelled", "cancelled through rgt (scancel of job %s)" % rec.get("job_id"), False, ev)
    who = uid_name(rec.get("cancelled_by_uid"))
    when = (log_line or {}).get("at") or _iso_local(rec.get("end_at"))
    summary = "Slurm job %s was cancelled from outside rgt%s%s" % (
        rec.get("job_id"), " by " + who if who else "", " at " + when if when else "")
    return _cause("killed", summary, False, ev)


def cancel_line(text: str) -> Optional[Dict[str, Any]]:
    """The last slurmstepd cancel line in a log tail: {job, node, at, due}, or None."""
    found = None
    for m in CANCEL_LINE.finditer(text):
        found = {"job": m.group("job"), "node": m.group("node"), "at": m.group("at"),
                 "due": (m.group("due") or "").strip() or None}
    return found


def uid_name(uid: Optional[int]) -> Optional[str]:
    if uid is None:
        return None
    try:
        import pwd
        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except (ImportError, KeyError):
        return "uid %d" % uid


def _cause(cls: str, summary: str, retryable: bool, evidence: List[str]) -> Dict[str, Any]:
    return {"class": cls, "summary": summary, "retryable": retryable, "evidence": evidence}


def _evidence(rec: Dict[str, Any]) -> str:
    bits = ["Slurm job %s: %s" % (rec.get("job_id"), rec.get("state"))]
    if rec.get("reason"):
        bits.append("reason %s" % rec["reason"])
    if rec.get("exit_code") is not None:
        bits.append("ExitCode %s:%s" % (rec["exit_code"], rec.get("signal") or 0))
    if rec.get("node"):
        bits.append("node %s" % rec["node"])
    if rec.get("cancelled_by_uid") is not None:
        bits.append("cancelled by uid %d" % rec["cancelled_by_uid"])
    return ", ".join(bits) + " (from %s)" % rec.get("source", "slurm")


def _hms(seconds: float) -> str:
    s = int(seconds)
    return "%d:%02d:%02d" % (s // 3600, (s % 3600) // 60, s % 60)


def _iso_local(ts: Optional[float]) -> Optional[str]:
    return None if ts is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))
