"""Reading Slurm's view of our jobs: squeue, `scontrol show job -o` and sacct, parsed into one
record shape, and `poll()` that follows many jobs with ONE squeue call (plus one sacct call for
jobs squeue no longer knows, where accounting exists).

A record: {job_id, name, state, reason, exit_code, signal, submit_at, start_at, end_at,
expected_start_at, node, partition, time_limit_s, dependency, cancelled_by_uid, source}
(times are epoch seconds; Slurm prints the submit host's local time; unknown = None).

Facts found on Slurm 22.05 (the test cluster): `scontrol show job` takes ONE id (a comma list is
"Invalid job id specified"), so it is for one job's details, never the per-interval batch;
`squeue --jobs=a,b --states=all` answers for every id it still knows (ended jobs for MinJobAge,
default 300 s) and silently drops the others, unless it knows none: then it exits 1 with
"Invalid job id specified".
"""
from __future__ import annotations

import os
import re
import time
from typing import Any, Callable, Dict, Iterable, List, Optional

from boxagent.slurm.cmd import Result, run_command
from boxagent.slurm.spec import slurm_time_seconds

FOLLOW_TIMEOUT_S = 20.0
SEP = "|"
# squeue -o: the job name is user text and may hold the separator, so it comes last (split
# with a maximum). %r is the reason code alone (%R would append node lists).
SQUEUE_FIELDS = (("job_id", "%i"), ("state", "%T"), ("reason", "%r"), ("submit", "%V"),
                 ("start", "%S"), ("end", "%e"), ("node", "%N"), ("partition", "%P"),
                 ("time_limit", "%l"), ("dependency", "%E"), ("name", "%j"))
SACCT_FIELDS = ("JobID", "State", "ExitCode", "Reason", "Submit", "Start", "End", "NodeList",
                "Partition", "Timelimit", "JobName")
EMPTY = ("", "(null)", "N/A", "None", "Unknown", "n/a", "none")
UNKNOWN_ID = "Invalid job id specified"
_KV = re.compile(r"(?:^|\s)([A-Z][A-Za-z0-9_:/]*)=")   # Slurm keys are CamelCase
_BY_UID = re.compile(r"^(\S+)(?:\s+by\s+(\d+))?")


def squeue_argv(ids: Iterable[str], user: Optional[str] = None, squeue: str = "squeue") -> List[str]:
    """`user` (the uid that submitted the jobs) lets slurmctld answer with that user's jobs only:
    with several --jobs and no single --user, squeue asks for EVERY job on the cluster and filters
    them itself (tens of thousands of records a poll on a big cluster)."""
    argv = [squeue, "--noheader", "--states=all", "--jobs=" + ",".join(ids)]
    if user is not None:
        argv.append("--user=" + str(user))
    return argv + ["--format=" + SEP.join(code for _name, code in SQUEUE_FIELDS)]


def squeue_by_name_argv(names: Iterable[str], squeue: str = "squeue") -> List[str]:
    """Find jobs by name (`rgt:<run>:<stage>`): after an sbatch that timed out, or lost job ids."""
    return [squeue, "--noheader", "--states=all", "--name=" + ",".join(names),
            "--format=" + SEP.join(code for _name, code in SQUEUE_FIELDS)]


def scontrol_argv(job_id: str, scontrol: str = "scontrol") -> List[str]:
    return [scontrol, "show", "job", "--oneliner", str(job_id)]


def sacct_argv(ids: Iterable[str], completion: bool = False, sacct: str = "sacct") -> List[str]:
    """--completion reads the JobComp log (jobcomp/filetxt) where there is no slurmdbd."""
    argv = [sacct, "--parsable2", "--noheader", "--allocations", "--jobs=" + ",".join(ids),
            "--format=" + ",".join(SACCT_FIELDS)]
    return argv + ["--completion"] if completion else argv


def parse_squeue(text: str) -> Dict[str, Dict[str, Any]]:
    out = {}
    names = [name for name, _code in SQUEUE_FIELDS]
    for line in text.splitlines():
        parts = line.rstrip("\n").split(SEP, len(names) - 1)
        if len(parts) != len(names) or not parts[0].strip():
            continue        # a cluster header (SLURM_CLUSTERS) or a warning line
        raw = dict(zip(names, (p.strip() for p in parts)))
        rec = _record(raw["job_id"], raw["state"], "squeue")
        rec.update(name=_val(raw["name"]), reason=_val(raw["reason"]), node=_val(raw["node"]),
                   partition=_val(raw["partition"]), dependency=_val(raw["dependency"]),
                   time_limit_s=slurm_time_seconds(raw["time_limit"]), submit_at=_epoch(raw["submit"]))
        _times(rec, raw["start"], raw["end"])
        out[rec["job_id"]] = rec
    return out


def parse_scontrol(text: str) -> Dict[str, Dict[str, Any]]:
    """`scontrol show job -o` lines: `Key=Value` pairs; a value may hold spaces (WorkDir,
    Command, Comment), so a pair ends where the next ` Key=` begins."""
    out = {}
    for line in text.splitlines():
        kv = parse_pairs(line)
        if "JobId" not in kv:
            continue
        rec = _record(kv["JobId"], kv.get("JobState", ""), "scontrol")
        code, sig = _exit_pair(kv.get("ExitCode"))
        rec.update(name=_val(kv.get("JobName", "")), reason=_val(kv.get("Reason", "")),
                   node=_val(kv.get("NodeList", "")), partition=_val(kv.get("Partition", "")),
                   dependency=_val(kv.get("Dependency", "")), exit_code=code, signal=sig,
                   time_limit_s=slurm_time_seconds(kv.get("TimeLimit", "")),
                   submit_at=_epoch(kv.get("SubmitTime", "")))
        _times(rec, kv.get("StartTime", ""), kv.get("EndTime", ""))
        out[rec["job_id"]] = rec
    return out


def parse_pairs(line: str) -> Dict[str, str]:
    marks = list(_KV.finditer(line))
    kv = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(line)
        kv[m.group(1)] = line[m.end():end].strip()
    return kv


def parse_sacct(text: str) -> Dict[str, Dict[str, Any]]:
    out = {}
    for line in text.splitlines():
        parts = line.split(SEP, len(SACCT_FIELDS) - 1)
        if len(parts) != len(SACCT_FIELDS) or not parts[0].strip():
            continue
        raw = dict(zip(SACCT_FIELDS, parts))
        m = _BY_UID.match(raw["State"].strip())
        rec = _record(raw["JobID"], m.group(1) if m else "", "sacct")
        code, sig = _exit_pair(raw["ExitCode"])
        rec.update(name=_val(raw["JobName"]), reason=_val(raw["Reason"]), node=_val(raw["NodeList"]),
                   partition=_val(raw["Partition"]), exit_code=code, signal=sig,
                   cancelled_by_uid=int(m.group(2)) if m and m.group(2) else None,
                   time_limit_s=slurm_time_seconds(raw["Timelimit"].strip()),
                   submit_at=_epoch(raw["Submit"]))
        _times(rec, raw["Start"], raw["End"])
        out[rec["job_id"]] = rec
    return out


def poll(ids: List[str], runner: Callable[..., Result] = run_command, sacct: Optional[str] = None,
         timeout: float = FOLLOW_TIMEOUT_S, user: Optional[str] = "self") -> Dict[str, Any]:
    """Slurm's view of `ids`: {records: {id: rec}, gone: [ids Slurm no longer knows],
    error: None | why the view is incomplete, calls: n}. `sacct` = None (no accounting: skip),
    "accounting" (slurmdbd) or "completion" (JobComp log). While `error` is set, a missing id
    means "not known now", never "gone": a controller that does not answer has lost nothing.
    `user`: the jobs' owner ("self" = this process's uid; None = do not filter)."""
    result: Dict[str, Any] = {"records": {}, "gone": [], "error": None, "calls": 0}
    if not ids:
        return result
    res = runner(squeue_argv(ids, user=str(os.getuid()) if user == "self" else user), timeout)
    result["calls"] += 1
    if res.rc == 0:
        result["records"] = {k: v for k, v in parse_squeue(res.out).items() if k in ids}
    elif UNKNOWN_ID not in res.err:
        result["error"] = res.why("squeue")
        return result
    missing = [i for i in ids if i not in result["records"]]
    if missing and sacct in ("accounting", "completion"):
        res = runner(sacct_argv(missing, completion=sacct == "completion"), timeout)
        result["calls"] += 1
        if res.rc != 0:
            result["error"] = res.why("sacct")
            return result
        found = {k: v for k, v in parse_sacct(res.out).items() if k in missing}
        result["records"].update(found)
        missing = [i for i in missing if i not in found]
    result["gone"] = missing
    return result


def show_job(job_id: str, runner: Callable[..., Result] = run_command,
             timeout: float = FOLLOW_TIMEOUT_S) -> Optional[Dict[str, Any]]:
    """One job's details through scontrol (its exit code, for one): None when Slurm forgot it."""
    res = runner(scontrol_argv(job_id), timeout)
    if res.rc != 0:
        return None
    return parse_scontrol(res.out).get(str(job_id))


def _record(job_id: str, state: str, source: str) -> Dict[str, Any]:
    return {"job_id": job_id.strip(), "name": None, "state": state.strip().split(" ")[0].upper() or None,
            "reason": None, "exit_code": None, "signal": None, "submit_at": None, "start_at": None,
            "end_at": None, "expected_start_at": None, "node": None, "partition": None,
            "time_limit_s": None, "dependency": None, "cancelled_by_uid": None, "source": source}


def _times(rec: Dict[str, Any], start: str, end: str) -> None:
    # A pending job's StartTime is the scheduler's estimate, not a fact: kept apart.
    if rec["state"] == "PENDING":
        rec["expected_start_at"] = _epoch(start)
        return
    rec["start_at"], rec["end_at"] = _epoch(start), _epoch(end)
    if rec["state"] in ("RUNNING", "SUSPENDED", "CONFIGURING"):
        rec["end_at"] = None      # the time limit's end, not an end


def _val(text: str) -> Optional[str]:
    text = (text or "").strip()
    return None if text in EMPTY else text


def _epoch(text: str) -> Optional[float]:
    text = (text or "").strip()
    if text in EMPTY:
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def _exit_pair(text: Optional[str]) -> "tuple":
    """Slurm's "code:signal" (e.g. "3:0", "0:15"); a signal of 0 is no signal."""
    try:
        code, sig = (int(x) for x in (text or "").strip().split(":", 1))
    except ValueError:
        return None, None
    return code, (sig or None)
