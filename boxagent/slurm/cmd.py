"""The one seam to the Slurm commands: run an argv (never a shell line) with a timeout.

Tests and the daemon pass `run_command` (or a fake with the same signature) to the functions in
submit/follow/probe; nothing else in this package starts a process.
"""
from __future__ import annotations

import os
import subprocess
from typing import Dict, List, NamedTuple, Optional

RC_TIMEOUT = 124      # like timeout(1): the command did not answer in time (it was killed)
RC_NOT_FOUND = 127    # like a shell: the command is not installed

# Variables that change what squeue/sacct/scontrol print: a user's SLURM_TIME_FORMAT=relative
# turns "2024-05-01T10:00:00" into "Tomorr 10:00"; SQUEUE_*/SACCT_* set formats, sorting and
# cluster headers. SBATCH_* stay: they are the user's own submission defaults.
_FORMAT_VARS = ("SLURM_TIME_FORMAT", "SQUEUE_", "SACCT_", "SLURM_CLUSTERS", "SINFO_", "SCONTROL_")


class Result(NamedTuple):
    rc: int
    out: str
    err: str

    @property
    def timed_out(self) -> bool:
        return self.rc == RC_TIMEOUT

    def why(self, argv0: str) -> str:
        """One line for a failed call (the last line Slurm printed on stderr)."""
        if self.rc == RC_TIMEOUT:
            return "%s did not answer in time" % argv0
        if self.rc == RC_NOT_FOUND:
            return "%s is not installed (not on PATH)" % argv0
        last = [line for line in self.err.splitlines() if line.strip()]
        return "%s exited %d: %s" % (argv0, self.rc, last[-1].strip() if last else "no message")


def slurm_env(base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not any(k == p or (p.endswith("_") and k.startswith(p)) for p in _FORMAT_VARS)}
    env["SLURM_TIME_FORMAT"] = "standard"
    return env


def run_command(argv: List[str], timeout: float, env: Optional[Dict[str, str]] = None) -> Result:
    """Run argv; rc 124 when it ran past `timeout` (killed), 127 when it is not installed."""
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout, env=slurm_env(env), cwd="/")
    except subprocess.TimeoutExpired as exc:
        return Result(RC_TIMEOUT, _text(exc.stdout), _text(exc.stderr))
    except FileNotFoundError as exc:
        return Result(RC_NOT_FOUND, "", str(exc))
    except OSError as exc:
        return Result(126, "", str(exc))
    return Result(proc.returncode, _text(proc.stdout), _text(proc.stderr))


def _text(data: Optional[bytes]) -> str:
    return (data or b"").decode("utf-8", "replace")
