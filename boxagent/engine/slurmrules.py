"""The scheduler's rules for runs with `backend = "slurm"` (a part of the Scheduler, like
requests.py, working on its tables). The stages run as sbatch jobs on a cluster, so:

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

from typing import Any, Dict, List

from boxagent.base.fsutil import read_json
from boxagent.engine import states as S
from boxagent.engine.launch import launch_record, slurm_options, slurm_record, stage_env
from boxagent.engine.records import Run, Stage
from boxagent.slurm import spec as slurm_spec
from boxagent.slurm import states as slurm_states

LEFT_BEHIND_FIX = ("fix what stopped stage %s, then `resume` the run: stages with a marker are "
                   "skipped, the others are submitted again")


class SlurmRules:
    # provided by the Scheduler
    runs: Dict[str, Run]
    specs: Dict[str, Dict[str, Any]]

    def is_slurm(self, run: str) -> bool:
        return slurm_spec.backend(self.specs.get(run) or {}) == "slurm"

    def marked(self, run: Run, st: Stage) -> bool:
        """The stage is skipped for its marker. On a box only the daemon writes markers, after
        judging; a Slurm stage's shim writes its own when it succeeds, so the chain may have run
        a stage while the daemon was away (or just slower): a marker of the attempt the chain
        ran (the next one) is that attempt's success, to bind to, judge and report, not a skip."""
        if not self.store.has_marker(run.name, st.name):
            return False
        if not self.is_slurm(run.name):
            return True
        mark = read_json(self.store.marker_path(run.name, st.name))
        return not (isinstance(mark, dict) and mark.get("attempt") == st.attempt + 1)

    # -- starting a stage: it and the rest of its chain
    def _slurm_launch(self, att: Any, run: Run) -> Dict[str, Any]:
        record = self._slurm_stage(run, att.sspec, att.ref.attempt)
        chain = []
        names = [s.name for s in run.stages]
        for st in run.stages[names.index(att.stage) + 1:]:
            if st.kind != "run":
                break                               # a wait stage runs here: it splits the chain
            if self.marked(run, st):
                continue                            # advance() will skip it
            sspec = self._sspec(run.name, st.name)
            chain.append({"stage": st.name, "attempt": st.attempt + 1, "options": slurm_options(self.specs[run.name], sspec),
                          "launch": self._slurm_stage(run, sspec, st.attempt + 1)})
        record["sbatch"] = {"options": slurm_options(self.specs[run.name], att.sspec), "chain": chain}
        return record

    def _slurm_stage(self, run: Run, sspec: Dict[str, Any], attempt: int) -> Dict[str, Any]:
        spec = self.specs[run.name]
        # The node's CPUs are the job's: cpus_per_task caps the thread pools, never this host's quota.
        cores = slurm_options(spec, sspec).get("cpus_per_task")
        env = stage_env(spec, sspec, run.name, attempt, self.store.home.root, cores, self.env_hints)
        log = self.store.log_path(run.name, sspec["name"], attempt)
        marker = {"run": run.name, "stage": sspec["name"], "attempt": attempt, "spec_sha256": run.spec_sha256}
        return slurm_record(launch_record(sspec, spec["workdir"], env, log), sspec,
                            self.store.marker_path(run.name, sspec["name"]), marker)

    @staticmethod
    def _node_reading(reading: Dict[str, Any]) -> Dict[str, Any]:
        """The box's reading for a stage that ran on a compute node: only the shared disks count."""
        return dict(reading, oom_kill_delta=None, gpu_faults=[], cgroup_version=None)

    # -- what the queue says, into the records (status)
    def queue_update(self, now: float) -> None:
        for run in list(self.runs.values()):
            if not self.is_slurm(run.name) or not (run.state == S.RUNNING or _unsettled(run)):
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
                att = self.active.get(run.name)
                if att is not None and att.stage == st.name and seen.get("state") == "RUNNING":
                    att.running_since = seen.get("start_at") or now
            if specs:
                self.journal.commit(run, specs, now)
            elif changed:
                self.store.save(run)

    def _queue_news(self, run: Run, st: Stage, seen: Dict[str, Any]) -> List[Dict[str, Any]]:
        """A warning, once, for a job that will not start without someone's change, and for a
        later stage whose sbatch was refused (the run fails there unless it is fixed)."""
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
    def _left_behind(self, run: Run, now: float) -> List[Dict[str, Any]]:
        """The stages a failed or cancelled Slurm run will not run, each `cancelled` with why."""
        if not self.is_slurm(run.name) or run.state not in S.RESUMABLE:
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

    def detach_slurm(self) -> List[str]:
        """SIGTERM to the daemon: forget the Slurm runs' attempts without stopping their jobs
        (the next daemon re-adopts them). The names of the runs left running."""
        left = [name for name in self.active if self.is_slurm(name)]
        for name in left:
            att = self.active.pop(name)
            if att.watch is not None:
                att.watch.close()
        return left


def _unsettled(run: Run) -> bool:
    """A stage whose job's last known state is not an end state: keep asking (status converges)."""
    return any(st.slurm_job_id and slurm_states.phase(st.slurm_state) != "ended" for st in run.stages
               if st.slurm_state is not None)

