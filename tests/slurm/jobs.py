"""Helpers for tests against the real cluster: submit one stage's job with the real argv builder,
wait with the real poll, cancel what a test leaves behind."""
from __future__ import annotations

import functools
import time
import uuid
from pathlib import Path
from typing import Dict, List, Optional

from boxagent.slurm import follow, states, submit
from boxagent.slurm.cmd import run_command


class Jobs:
    def __init__(self, cluster, shared: Path):
        self.cluster = cluster
        self.shared = shared
        self.run = "r" + uuid.uuid4().hex[:8]
        self.ids: List[str] = []
        self.runner = functools.partial(run_command, env=cluster.env)

    def log(self, stage: str) -> Path:
        return self.shared / "logs" / ("%s.1.log" % stage)

    def stage(self, stage: str, body: str, after: Optional[str] = None,
              options: Optional[Dict[str, object]] = None) -> str:
        """A stage whose batch script is `body` (bash), chained after `after`."""
        script = self.shared / ("%s.sh" % stage)
        script.write_text("#!/bin/bash\n" + body + "\n")
        return self.submit_script(stage, script, after, options)

    def submit_script(self, stage: str, script: Path, after: Optional[str] = None,
                      options: Optional[Dict[str, object]] = None, log: Optional[Path] = None) -> str:
        log = log or self.log(stage)
        log.parent.mkdir(parents=True, exist_ok=True)
        argv = submit.sbatch_argv(str(script), self.run, stage, str(log), str(self.shared), options, after)
        job_id = submit.submit(argv, runner=self.runner)
        self.ids.append(job_id)
        return job_id

    def poll(self, ids: List[str], **kw) -> Dict[str, object]:
        return follow.poll(ids, runner=self.runner, **kw)

    def wait(self, ids: List[str], phase: str = "ended", timeout: float = 90,
             reasons: Optional[Dict[str, str]] = None) -> Dict[str, Dict[str, object]]:
        """Poll (one squeue call a round) until every job is in `phase` (and has its reason)."""
        deadline = time.monotonic() + timeout
        recs: Dict[str, Dict[str, object]] = {}
        while time.monotonic() < deadline:
            out = self.poll(ids)
            recs = out["records"]
            if all(i in recs and states.phase(recs[i]["state"]) == phase for i in ids) and \
                    all(recs[i]["reason"] == r for i, r in (reasons or {}).items()):
                return recs
            time.sleep(0.25)
        raise AssertionError("not all %s after %ss: %s" % (phase, timeout, {
            i: (r["state"], r["reason"]) for i, r in recs.items()}))

    def cancel_all(self) -> None:
        if self.ids:
            self.cluster.run("scancel", *self.ids, timeout=30)
            try:
                self.wait(self.ids, timeout=30)
            except AssertionError:
                pass     # the session's stop() sweeps what is left
