"""The Slurm backend (`backend = "slurm"`): its processes (slurmctl.SlurmProcesses: each attempt one
sbatch job) and its rules, which the scheduler reads as traits and three calls. The stages run as
sbatch jobs on a cluster, so:

- a Slurm run starts as soon as it is queued: this host's GPU slots and `max_parallel` are not
  its resources, and it holds none of them;
- starting a stage submits it AND the rest of its chain at once (up to a `wait` stage, which
  runs here and splits the chain), each job `afterok` on the one before; the stages' records
  show every submitted job's id, state and pending reason, pending stages included;
- Slurm enforces the time limit (`slurm.time`, or the stage's `timeout` in whole minutes):
  rgt does not stop the job itself, so a dead daemon changes nothing;
- what this host's cgroup and GPUs saw says nothing of a compute node: no OOM counter, no GPU
  fault, no reboot of this host is blamed on a Slurm stage;
- the stages behind one that did not succeed end `cancelled` with the reason (Slurm cancelled
  their jobs with DependencyNeverSatisfied, or, after a purge, nobody says: rgt does), and
  whatever of the run still waits in the queue is cancelled;
- SIGTERM to the daemon (the login node's session ending) is no preemption of the cluster's
  jobs: Slurm runs are left running, for the next daemon to re-adopt.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

from boxagent.engine import states as S
from boxagent.engine.launch import launch_record, slurm_options, slurm_record, stage_env
from boxagent.engine.ports import RunHost, StageProcesses, Traits
from boxagent.engine.records import Run, Stage
from boxagent.slurm import spec as slurm_spec
from boxagent.slurm import states as slurm_states

LEFT_BEHIND_FIX = ("fix what stopped stage %s, then `resume` the run: stages with a marker are "
                   "skipped, the others are submitted again")


class SlurmBackend:
    name = "slurm"
    traits = Traits(queues_elsewhere=True, runs_elsewhere=True, own_timeout=True, shim_marks=True)

    def __init__(self, procs: StageProcesses):
        self.procs = procs
        self._told: Dict[tuple, set] = {}           # (run, stage) -> queue warnings already given

    @classmethod
    def assemble(cls, home: Any, config: Dict[str, Any], settings: Dict[str, Any],
                 log: Callable[[str], None]) -> "SlurmBackend":
        """The node runs the shim with `slurm_python` (config.json) or this daemon's own Python."""
        from boxagent.engine.slurmctl import SlurmProcesses
        python = config.get("slurm_python")
        return cls(SlurmProcesses(home, python=python if isinstance(python, str) and python else None,
                                  poll_s=settings["slurm_poll"], exit_grace_s=settings["slurm_exit_grace"], log=log))

    def _mine(self, host: RunHost, run: str) -> bool:
        return slurm_spec.backend(host.specs.get(run) or {}) == self.name

    # -- starting a stage: it and the rest of its chain
    def launch_record(self, host: RunHost, att: Any, run: Run) -> Dict[str, Any]:
        record = self._stage_record(host, run, att.sspec, att.ref.attempt)
        chain = []
        names = [s.name for s in run.stages]
        for st in run.stages[names.index(att.stage) + 1:]:
            if st.kind != "run":
                break                               # a wait stage runs here: it splits the chain
            if host.marked(run, st):
                continue                            # advance() will skip it
            sspec = host.sspec(run.name, st.name)
            chain.append({"stage": st.name, "attempt": st.attempt + 1, "options": slurm_options(host.specs[run.name], sspec),
                          "launch": self._stage_record(host, run, sspec, st.attempt + 1)})
        record["sbatch"] = {"options": slurm_options(host.specs[run.name], att.sspec), "chain": chain}
        return record

    def _stage_record(self, host: RunHost, run: Run, sspec: Dict[str, Any], attempt: int) -> Dict[str, Any]:
        spec = host.specs[run.name]
        # The node's CPUs are the job's: cpus_per_task caps the thread pools, never this host's quota.
        cores = slurm_options(spec, sspec).get("cpus_per_task")
        env = stage_env(spec, sspec, run.name, attempt, host.store.home.root, cores, host.env_hints)
        log = host.store.log_path(run.name, sspec["name"], attempt)
        marker = {"run": run.name, "stage": sspec["name"], "attempt": attempt, "spec_sha256": run.spec_sha256}
        return slurm_record(launch_record(sspec, spec["workdir"], env, log), sspec,
                            host.store.marker_path(run.name, sspec["name"]), marker)

    # -- what the queue says, into the records (status)
    def sync(self, host: RunHost, now: float) -> None:
        for run in list(host.runs.values()):
            if not self._mine(host, run.name) or not (run.state == S.RUNNING or _unsettled(run)):
                continue
            view = self.procs.queue_view(run.name)
            changed, specs = False, []
            for st in run.stages:
                seen = view.get(st.name)
                if seen is None or (seen.get("submitted_at") or now) < (run.queued_at or 0) - 1.0:
                    continue                        # none, or a job of before the last resume
                words = slurm_states.pending_text(seen.get("reason")) if seen.get("state") == "PENDING" else None
                waiting = {"text": words["text"], "blocked": words["blocked"]} if words else None
                changed = st.queue_seen(seen.get("job_id"), seen.get("state"), seen.get("reason"), waiting) or changed
                specs += self._queue_news(run, st, seen)
                att = host.active.get(run.name)
                if att is not None and att.stage == st.name and seen.get("state") == "RUNNING":
                    att.running_since = seen.get("start_at") or now
            if specs:
                host.journal.commit(run, specs, now)
            elif changed:
                host.store.save(run)

    def _queue_news(self, run: Run, st: Stage, seen: Dict[str, Any]) -> List[Dict[str, Any]]:
        """A warning, once, for a job that will not start without someone's change, and for a
        later stage whose sbatch was refused (the run fails there unless it is fixed)."""
        key: tuple
        if seen.get("error"):
            key, summary = ("refused", seen["error"]), "stage %s could not be submitted: %s" % (st.name, seen["error"])
        elif seen.get("state") == "PENDING" and seen.get("reason") != "DependencyNeverSatisfied" \
                and slurm_states.pending_text(seen.get("reason"))["blocked"]:
            words = slurm_states.pending_text(seen["reason"])["text"]
            key, summary = ("blocked", seen.get("job_id"), seen["reason"]), "stage %s (Slurm job %s) %s (%s)" % (
                st.name, seen.get("job_id"), words, seen["reason"])
        else:
            return []
        told = self._told.setdefault((run.name, st.name), set())
        if key in told:
            return []
        told.add(key)
        return [{"type": "slurm_blocked", "severity": "warning", "run": run.name, "stage": st.name,
                 "summary": summary, "evidence": [summary], "job_id": seen.get("job_id"),
                 "reason": seen.get("reason")}]

    # -- the end of a run
    def left_behind(self, host: RunHost, run: Run, now: float) -> List[Dict[str, Any]]:
        """The stages a failed or cancelled Slurm run will not run, each `cancelled` with why."""
        if run.state not in S.RESUMABLE:
            return []
        stopped = run.failed_stage or run.current_stage or "?"
        view = self.procs.queue_view(run.name)
        specs = []
        for st in run.stages:
            if st.state != S.PENDING:
                continue
            seen = view.get(st.name) or {}
            if run.state == S.FAILED:
                summary = "stage %s did not succeed" % stopped
            else:
                summary = "the run was %s at stage %s" % (run.state, stopped)
            evidence = ["never submitted (the chain stopped before it)"]
            if seen.get("job_id") and (seen.get("submitted_at") or now) >= (run.queued_at or 0) - 1.0:
                # As the queue said when the run ended; Slurm's own cancel (afterok never
                # satisfied) follows, and the stage's slurm_state shows it.
                evidence = ["Slurm job %s: %s%s" % (seen["job_id"], seen.get("state") or "no longer known",
                                                     ", reason %s" % seen["reason"] if seen.get("reason") else "")]
            specs.append(st.left_behind(now, {"class": "cancelled", "summary": summary, "retryable": False,
                                              "remediation": LEFT_BEHIND_FIX % stopped, "evidence": evidence}))
        return specs


def _unsettled(run: Run) -> bool:
    """A stage whose job's last known state is not an end state: keep asking (status converges)."""
    return any(st.slurm_job_id and slurm_states.phase(st.slurm_state) != "ended" for st in run.stages
               if st.slurm_state is not None)

