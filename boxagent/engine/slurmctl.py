"""The StageProcesses port for runs with `backend = "slurm"`: each stage attempt is one sbatch
job whose batch script runs the agent's own shim on a compute node; the shim writes the claim,
pid and exit files (and the marker on success) on the filesystem the nodes share, exactly as
on a box. Slurm is the engine: the chain goes on without the daemon.

launch(ref, record) submits the attempt AND the rest of the run's chain the scheduler put in
`record["sbatch"]["chain"]`, each job `afterok` on the one before; when the scheduler later
starts one of those stages, launch finds its job and binds to it. Rules found on a real cluster
(tests/slurm):
- afterok on a job id Slurm no longer knows (purged after MinJobAge) is silently dropped and
  the job runs at once: a stage is chained only on a job squeue still knows; when that job is
  gone, the earlier stage's marker decides (no marker: submit nothing now; the scheduler submits
  the stage when it gets there).
- a timed-out sbatch may still have submitted the job: an attempt whose batch script exists
  without a job file is looked for by name (`rgt:<run>:<stage>`) before it is submitted again.
- an attempt's job is bound to, never submitted again, once it ran (claim or exit file) or while
  it waits or runs; a job that ended without ever running (its dependency failed, a person
  cancelled it while it waited) is submitted again for the same attempt: the shim's O_EXCL
  claim still guarantees the command runs once.

An attempt has ended when Slurm names the job's end state (one squeue call per `poll_s` for
every job followed; sooner when an exit file appeared) and the exit file is there; a job that
ended without one (node failure, a kill the shim did not survive) waits `exit_grace_s` for the
shared filesystem, then its facts come from Slurm alone.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from boxagent.base import procs
from boxagent.base.fsutil import atomic_write_json, atomic_write_text, read_json
from boxagent.base.home import Home
from boxagent.base.roots import Roots
from boxagent.base.storage import is_full
from boxagent.engine import shim
from boxagent.engine.ports import AttemptRef
from boxagent.slurm import follow, probe, submit
from boxagent.engine.slurmbook import FINAL, JobBook
from boxagent.slurm.cmd import Result, run_command

CONFIRM_S = 30.0       # an exit file while Slurm still says RUNNING: wait this long for its end state
EXIT_GRACE_S = 15.0    # Slurm says ended, no exit file yet: a shared filesystem may show it late
URGENT_GAP_S = 0.25    # the first re-poll after an exit file appeared or a job was submitted
ERROR_BACKOFF_S = 30.0  # a controller that did not answer is asked again after this long
EXIT_CHECK_S = 1.0     # while a job is followed: look for exit files (a stat) this often without inotify
# Only pending jobs followed: squeue every PENDING_FACTOR x poll_s. A wait in the queue changes
# slowly, and an end is seen by its exit file first; slurmctld is shared by everyone.
PENDING_FACTOR = 3.0
SCANCEL_TIMEOUT_S = 20.0

# The batch job's exit code when the shim could not run the command at all: what it means, and
# what to change.
NO_PYTHON = ("node %(node)s could not run the stage shim with %(python)s (exit %(code)s)",
             "set `slurm_python` in config.json to a Python >= 3.8 every node has at the same path "
             "(a pyenv or conda shim on the login node's PATH often is not one)")
SHIM_CODES = {
    shim.EXIT_NO_LAUNCH: ("the stage shim on node %(node)s found no launch file",
                          "RGT_HOME (%(home)s) must be on a filesystem the compute nodes share, at the same path"),
    shim.EXIT_NO_SPACE: ("the shared filesystem was full on node %(node)s: the shim could not write the "
                         "attempt's records, nothing ran", "free space there (df -h; df -i), then resume the run"),
    126: NO_PYTHON,
    127: NO_PYTHON,
}


class SlurmProcesses:
    def __init__(self, home: Home, runner: Callable[..., Result] = run_command, python: Optional[str] = None,
                 poll_s: float = 5.0, exit_grace_s: float = EXIT_GRACE_S, clock: Callable[[], float] = time.time,
                 user: Optional[str] = "self", sacct: Optional[str] = "probe",
                 log: Callable[[str], None] = lambda text: None):
        self.home, self.runner, self.clock, self.log = home, runner, clock, log
        self.python = python or sys.executable
        pyz = procs.running_pyz()
        # -S: the shim needs only the standard library (a conda site costs every stage start).
        self.agent = ["-S", pyz] if pyz else ["-S", "-m", "boxagent"]
        self.script_env = {} if pyz else {"PYTHONPATH": procs.source_root()}
        self.poll_s, self.exit_grace_s = poll_s, exit_grace_s
        self.book = JobBook(home, runner, user, None if sacct == "probe" else sacct)
        self._probe = sacct == "probe"
        self.next_poll = 0.0
        self.last_poll = float("-inf")
        self.gap, self.urgent = URGENT_GAP_S, False
        self.exit_seen: Dict[AttemptRef, float] = {}   # exit file there, Slurm not yet ended
        self.end_seen: Dict[AttemptRef, float] = {}    # Slurm ended, no exit file yet
        self.refused: Dict[Tuple[str, str], str] = {}  # a later stage's sbatch refusal, for status
        self.cancelled: set = set()
        self.detailed: set = set()

    # -- submitting
    def launch(self, ref: AttemptRef, launch: Dict[str, Any], now: float) -> None:
        sb = launch.get("sbatch") or {}
        record = {k: v for k, v in launch.items() if k != "sbatch"}
        items = [(ref, record, sb.get("options") or {})] + [
            (AttemptRef(ref.run, c["stage"], int(c["attempt"])), c["launch"], c.get("options") or {})
            for c in sb.get("chain") or []]
        self._sacct_mode()
        self.book.load(ref.run)
        known = [j for j in (self.book.job_of(r) for r, _rec, _opts in items) if j]
        self.book.poll(known)                  # what exists, fresh: bind or submit
        prev: Optional[str] = None
        fresh: set = set()                          # submitted by this call: Slurm knows them
        for i, (r, rec, opts) in enumerate(items):
            job = self._bound(r)
            if job and prev and self._waits_on_another(r, job, prev):
                self._scancel([job])           # chained on a job the chain no longer has (a retry,
                job = None                     # a resume before Slurm cancelled it): a new one
            if job is None:
                after = self._after(prev, items[i - 1][0], fresh) if i else ""
                if after is None:
                    break
                job = self._submit(r, rec, opts, after or None, now, first=i == 0)
                fresh.add(job)
            if not job:
                break
            prev = job

    def _bound(self, r: AttemptRef) -> Optional[str]:
        """The job this attempt already has ("" = it ended without one), or None: submit it."""
        if os.path.exists(self.home.stage_exit(*r)):
            return self.book.job_of(r) or ""
        job = self.book.job_of(r)
        if job is None and os.path.exists(self.home.stage_sbatch(*r)):
            job = self.book.find_by_name([r]).get(r)
        if job is None:
            return None
        phase, rec = self.book.phase(job), self.book.rec(job)
        if phase not in FINAL or os.path.exists(self.home.stage_claim(*r)):
            return job
        if rec is not None and rec.get("node") and rec.get("state") != "CANCELLED":
            return job                         # it ran (and failed before the shim claimed)
        return None                            # it never ran: this attempt is submitted again

    def _waits_on_another(self, r: AttemptRef, job: str, prev: str) -> bool:
        after = (self.book.jobs.get(r) or {}).get("after")
        return after not in (None, prev) and self.book.phase(job) == "pending"

    def _after(self, prev: Optional[str], prev_ref: AttemptRef, fresh: set) -> Optional[str]:
        """The dependency for the job after `prev`: its id while Slurm knows it, "" (none) when
        it is gone but its stage's marker exists, None: submit nothing more now."""
        phase = self.book.phase(prev)
        if prev in fresh or phase in ("pending", "running", "ended"):
            return prev
        if phase == "gone" and os.path.exists(self.home.marker(prev_ref.run, prev_ref.stage)):
            return ""
        return None

    def _submit(self, r: AttemptRef, rec: Dict[str, Any], opts: Dict[str, Any], after: Optional[str],
                now: float, first: bool) -> Optional[str]:
        try:
            self.home.ensure_run(r.run)
            atomic_write_json(self.home.stage_launch(*r), rec, mode=0o600)   # the job's env may hold tokens
            script = self.home.stage_sbatch(*r)
            argv = submit.shim_argv(self.home.root, r.run, r.stage, r.attempt, self.python, self.agent)
            atomic_write_text(script, submit.batch_script(argv, "rgt %s/%s attempt %d" % r, self.script_env))
        except OSError as exc:
            if not is_full(exc):
                raise
            return None                        # the scheduler launches it again when there is room
        argv = submit.sbatch_argv(script, r.run, r.stage, rec["log"], rec["workdir"], opts, after)
        try:
            job = submit.submit(argv, runner=self.runner)
        except submit.SubmitTimeout as exc:
            self.log("run %s: stage %s attempt %d: %s" % (r.run, r.stage, r.attempt, exc.message))
            return self.book.find_by_name([r]).get(r)    # none: launched again after launch_grace
        except submit.SubmitError as exc:
            said = "sbatch refused the job: %s" % exc.message
            self.log("run %s: stage %s attempt %d: %s" % (r.run, r.stage, r.attempt, said))
            if first:
                atomic_write_json(self.home.stage_exit(*r), {
                    "exit_code": shim.SPAWN_FAILED, "signal": None, "ended_at": now, "error": said,
                    "hint": exc.hint})
            else:
                self.refused[(r.run, r.stage)] = said + ("; " + exc.hint if exc.hint else "")
            return None
        self.book.record(r, job, now, after)
        self.log("run %s: stage %s attempt %d is Slurm job %s%s" % (r.run, r.stage, r.attempt, job,
                                                                     " (afterok:%s)" % after if after else ""))
        self.refused.pop((r.run, r.stage), None)
        self.urgent = True
        return job

    def _sacct_mode(self) -> None:
        """Which sacct answers for jobs squeue forgot: asked once, when the first job is submitted."""
        if self._probe:
            self._probe = False
            self.book.sacct = probe.probe(self.runner).get("sacct")

    # -- what the scheduler asks every tick
    def refresh(self, now: float) -> bool:
        # Jobs just loaded (a restarted daemon re-adopting its runs) are asked about at once,
        # unless the controller did not answer last time (then it is asked after its backoff).
        fresh = self.book.unasked() and self.book.error is None
        if not (now >= self.next_poll or ((self.urgent or fresh) and now - self.last_poll >= self.gap)):
            return False
        self.gap = min(self.poll_s, self.gap * 2) if self.urgent else URGENT_GAP_S
        self.urgent = False
        self.last_poll = now
        ok = self.book.poll()
        every = self.poll_s if self.book.running() else self.poll_s * PENDING_FACTOR
        self.next_poll = now + (every if ok else max(self.poll_s, ERROR_BACKOFF_S))
        return ok

    def wake_in(self, now: float) -> Optional[float]:
        due: List[float] = []
        if self.urgent or (self.book.unasked() and self.book.error is None):
            due.append(self.last_poll + self.gap - now)
        if self.book.followed():
            # A short job may start and end between two polls: its exit file tells first.
            due += [self.next_poll - now, EXIT_CHECK_S]
        due += [t + self.exit_grace_s - now for t in self.end_seen.values()]
        return max(0.0, min(due)) if due else None

    def exit_info(self, ref: AttemptRef) -> Optional[Dict[str, Any]]:
        path = self.home.stage_exit(*ref)
        info = read_json(path) if os.path.exists(path) else None
        info = info if isinstance(info, dict) else None
        job = self.book.job_of(ref)
        if job is None:
            return info                        # no job: sbatch refused it (or a box attempt)
        phase, rec, now = self.book.phase(job), self.book.rec(job), self.clock()
        if phase in FINAL:
            self.exit_seen.pop(ref, None)
            if info is None:
                ran = rec is None or bool(rec.get("node"))
                # From Slurm's end time where it says one: a daemon back after hours waits no more.
                since = min(self.end_seen.setdefault(ref, now), (rec or {}).get("end_at") or now)
                if ran and now - since < self.exit_grace_s:
                    return None
                info = self._from_slurm(job, rec, now)
            return dict(info, slurm=self._details(job, rec))
        if info is not None:
            if ref not in self.exit_seen:
                self.gap = URGENT_GAP_S            # the shim is done: ask Slurm soon, then less often
            if now - self.exit_seen.setdefault(ref, now) >= CONFIRM_S:
                return dict(info, slurm=self._details(job, rec))
            self.urgent = True                 # the shim is done: Slurm's end state is moments away
        return None

    def _from_slurm(self, job: str, rec: Optional[Dict[str, Any]], now: float) -> Dict[str, Any]:
        """How the attempt ended when its shim wrote nothing: what Slurm says."""
        if rec is None:
            return {"exit_code": None, "signal": None, "ended_at": now, "no_exit_file": True}
        rec = self._details(job, rec)
        code, sig = rec.get("exit_code"), rec.get("signal")
        info = {"exit_code": None if sig else code, "signal": sig, "ended_at": rec.get("end_at") or now,
                "no_exit_file": True}
        if rec.get("state") == "FAILED" and not sig and code in SHIM_CODES:
            words = {"node": rec.get("node") or "?", "home": self.home.root, "python": self.python, "code": code}
            info["error"], info["hint"] = (text % words for text in SHIM_CODES[code])
        return info

    def _details(self, job: str, rec: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        """The ended job's record, with its exit code (scontrol: squeue has none) and, where
        accounting runs, who cancelled it (sacct). Asked once per job."""
        if rec is None:
            return {"job_id": job, "state": None, "gone": True}
        if job not in self.detailed:
            self.detailed.add(job)
            if rec.get("exit_code") is None and rec.get("source") == "squeue":
                more = follow.show_job(job, runner=self.runner)
                if more:
                    rec.update(exit_code=more["exit_code"], signal=more["signal"])
            if rec.get("state") == "CANCELLED" and self.book.sacct == "accounting":
                res = self.runner(follow.sacct_argv([job]), follow.FOLLOW_TIMEOUT_S)
                uid = (follow.parse_sacct(res.out).get(job) or {}).get("cancelled_by_uid") if res.rc == 0 else None
                rec["cancelled_by_uid"] = uid
        return dict(rec)

    def shim_state(self, ref: AttemptRef) -> str:
        # A job of ours exists: its end comes through exit_info (Slurm's view, then the files).
        if self.book.job_of(ref):
            return "alive"
        return "gone" if os.path.exists(self.home.stage_exit(*ref)) else "unknown"

    def claimed_for(self, ref: AttemptRef, now: float) -> Optional[float]:
        try:
            return max(0.0, now - os.stat(self.home.stage_claim(*ref)).st_mtime)
        except OSError:
            return None

    def command_alive(self, ref: AttemptRef) -> bool:
        job = self.book.job_of(ref)
        if job is not None and self.book.phase(job) == "unknown":
            self.book.poll([job])              # never asked (a resume right after a restart): ask now
        return job is not None and self.book.phase(job) not in FINAL

    def signal(self, ref: AttemptRef, sig: int) -> None:
        """scancel: Slurm sends SIGTERM to the job, SIGKILL after its KillWait (so TERM and KILL
        alike cancel the job once)."""
        job = self.book.job_of(ref)
        if job and job not in self.cancelled and self.book.phase(job) not in FINAL:
            self._scancel([job])

    def run_ended(self, run: str) -> None:
        """The run failed or was cancelled: cancel its jobs still waiting or running, except
        those behind a job that did not complete: Slurm cancels them itself and says why
        (DependencyNeverSatisfied), which is the better record."""
        doomed, ids = set(), []
        for _ref, job in sorted(self.book.latest(run).values(), key=lambda rj: int(rj[1]["job_id"])):
            jid, dep = job["job_id"], self.book.rec(job.get("after"))
            if job.get("after") in doomed or (dep is not None and dep.get("state") != "COMPLETED"
                                              and self.book.phase(job["after"]) == "ended"):
                doomed.add(jid)
            elif jid not in self.cancelled and self.book.phase(jid) not in FINAL:
                ids.append(jid)
        if ids:
            self._scancel(ids)

    def _scancel(self, ids: List[str]) -> None:
        res = self.runner(["scancel"] + ids, SCANCEL_TIMEOUT_S)
        self.log("scancel %s%s" % (" ".join(ids), "" if res.rc == 0 else ": " + res.why("scancel")))
        self.cancelled.update(ids)
        self.urgent = True

    def queue_view(self, run: str) -> Dict[str, Dict[str, Any]]:
        """stage -> its newest job: {job_id, attempt, submitted_at, state, reason, start_at, node};
        `error` when the stage's sbatch was refused (a later stage of a chain)."""
        out: Dict[str, Dict[str, Any]] = {}
        for stage, (ref, job) in self.book.latest(run).items():
            rec = self.book.rec(job["job_id"]) or {}
            out[stage] = {"job_id": job["job_id"], "attempt": ref.attempt, "submitted_at": job.get("submitted_at"),
                          "state": rec.get("state"), "reason": rec.get("reason"), "start_at": rec.get("start_at"),
                          "node": rec.get("node")}
        for (name, stage), said in self.refused.items():
            if name == run:
                out[stage] = dict(out.get(stage) or {"job_id": None, "state": None, "reason": None}, error=said)
        return out

    # -- nothing of these on a cluster
    def cpu_seconds(self, ref: AttemptRef) -> Optional[float]:
        return None

    def leftovers(self, ref: AttemptRef) -> List[str]:
        return []       # slurmstepd kills what the batch script left when it exits

    def identity(self, ref: AttemptRef) -> Optional[Dict[str, Any]]:
        return None     # the stage runs on a compute node: no process of it is on this box

    def release(self, ref: AttemptRef) -> None:
        self.exit_seen.pop(ref, None)
        self.end_seen.pop(ref, None)

    def reap(self) -> None:
        pass

    def pid_alive(self, pid: int, start_ticks: Optional[int]) -> bool:
        return procs.alive(Roots.from_env(), pid, start_ticks)

    def start_ticks(self, pid: int) -> Optional[int]:
        return Roots.from_env().process_start_ticks(pid)
