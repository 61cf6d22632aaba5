"""The box layout under RGT_HOME (DESIGN.md "On the box"). One place names every path."""
from __future__ import annotations

import os

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Optional


class Home:
    def __init__(self, root: str):
        self.root = os.path.abspath(os.path.expanduser(root))

    @classmethod
    def from_env(cls, override: Optional[str] = None) -> "Home":
        return cls(override or os.environ.get("RGT_HOME") or "~/.rgt")

    def _p(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def pyz(self) -> str: return self._p("rgt-agent.pyz")
    @property
    def config(self) -> str: return self._p("config.json")
    @property
    def secrets(self) -> str: return self._p("secrets.json")
    @property
    def lock(self) -> str: return self._p("daemon.lock")
    @property
    def pidfile(self) -> str: return self._p("daemon.pid")
    @property
    def daemon_log(self) -> str: return self._p("daemon.log")
    @property
    def status(self) -> str: return self._p("status.json")
    @property
    def events(self) -> str: return self._p("events.jsonl")
    @property
    def outbox(self) -> str: return self._p("outbox")
    @property
    def cost(self) -> str:
        """The cost part's memory: the agent's first start on this box, paid hours, alerts sent."""
        return self._p("cost.json")
    @property
    def runs(self) -> str: return self._p("runs")
    @property
    def inbox(self) -> str:
        """Requests from `submit`/`cancel`/`resume` to the daemon (the daemon has no socket)."""
        return self._p("inbox")

    @property
    def archive(self) -> str:
        """Old runs moved aside by `submit --replace` (never deleted)."""
        return self._p("runs", ".archive")

    def run_dir(self, run: str) -> str: return self._p("runs", run)
    def run_spec(self, run: str) -> str: return self._p("runs", run, "spec.json")
    def run_state(self, run: str) -> str: return self._p("runs", run, "state.json")
    def handbook(self, run: str) -> str: return self._p("runs", run, "HANDBOOK.md")
    def manifest(self, run: str) -> str: return self._p("runs", run, "manifest.json")
    def pull_verified(self, run: str) -> str:
        """Written by `pull-verified` after the laptop verified a pull of this manifest."""
        return self._p("runs", run, "pull_verified.json")
    def marker(self, run: str, stage: str) -> str: return self._p("runs", run, "markers", stage + ".done")
    def stage_log(self, run: str, stage: str, attempt: int) -> str:
        return self._p("runs", run, "logs", "%s.%d.log" % (stage, attempt))
    def stage_exit(self, run: str, stage: str, attempt: int) -> str:
        return self._p("runs", run, "stages", "%s.%d.exit" % (stage, attempt))

    def stage_dir(self, run: str) -> str: return self._p("runs", run, "stages")
    def log_dir(self, run: str) -> str: return self._p("runs", run, "logs")
    def marker_dir(self, run: str) -> str: return self._p("runs", run, "markers")
    def stage_launch(self, run: str, stage: str, attempt: int) -> str:
        """What the shim runs (command, workdir, env): a file, so env values never reach argv."""
        return self._p("runs", run, "stages", "%s.%d.launch.json" % (stage, attempt))
    def stage_claim(self, run: str, stage: str, attempt: int) -> str:
        """Created O_EXCL by the shim before it starts the command: an attempt never runs twice."""
        return self._p("runs", run, "stages", "%s.%d.claim" % (stage, attempt))
    def stage_pid(self, run: str, stage: str, attempt: int) -> str:
        return self._p("runs", run, "stages", "%s.%d.pid" % (stage, attempt))
    def stage_sbatch(self, run: str, stage: str, attempt: int) -> str:
        """Slurm: the batch script of the attempt (it only runs the shim; no env value in it)."""
        return self._p("runs", run, "stages", "%s.%d.sbatch" % (stage, attempt))
    def stage_job(self, run: str, stage: str, attempt: int) -> str:
        """Slurm: the job id of the attempt, written as soon as sbatch answered."""
        return self._p("runs", run, "stages", "%s.%d.job" % (stage, attempt))

    def ensure_run(self, run: str) -> None:
        for d in (self.stage_dir(run), self.log_dir(run), self.marker_dir(run)):
            os.makedirs(d, exist_ok=True)

    def ensure(self) -> None:
        for d in (self.root, self.outbox, self.runs, self.inbox):
            os.makedirs(d, exist_ok=True)
        try:
            os.chmod(self.root, 0o700)
        except OSError:
            pass
