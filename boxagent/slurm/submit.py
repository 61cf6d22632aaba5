"""One stage as one sbatch job: the argv (a list, never a shell line), the batch script, and
reading sbatch's --parsable answer.

The batch script only `exec`s the agent's own stage shim on the compute node; the shim reads the
attempt's launch file (command, workdir, env: 0600 on the shared filesystem) exactly as on a box,
so no env value reaches sbatch's argv, the script (slurmctld keeps a copy that admins and
`scontrol write batch_script` can read) or squeue.
"""
from __future__ import annotations

import re
import shlex
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from boxagent.slurm.cmd import Result, run_command
from boxagent.base.errors import AgentError

SUBMIT_TIMEOUT_S = 60.0
_JOB_ID = re.compile(r"^(\d+)(?:;(\S+))?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Table key -> sbatch long option, in the order they are written.
OPTIONS = (("partition", "partition"), ("gres", "gres"), ("time", "time"), ("mem", "mem"),
           ("cpus_per_task", "cpus-per-task"), ("nodes", "nodes"), ("account", "account"), ("qos", "qos"))

# What sbatch says when a submission is refused -> what the user should change.
HINTS = (
    ("invalid partition", "check slurm.partition against `sinfo -h -o %P`"),
    ("invalid account", "check slurm.account against `sacctmgr show assoc user=$USER format=account`"),
    ("invalid qos", "check slurm.qos against `sacctmgr show assoc user=$USER format=qos`"),
    ("invalid generic resource", 'check slurm.gres against `sinfo -o "%P %G"` (e.g. "gpu:1")'),
    ("requested node configuration is not available",
     "ask for fewer CPUs/GPUs/memory per node than the partition's nodes have (`sinfo -N -l`)"),
    ("memory specification can not be satisfied", "lower slurm.mem below the nodes' memory (`sinfo -N -l`)"),
    ("time limit", "lower slurm.time below the partition's limit (`sinfo -o \"%P %l\"`)"),
    ("qosmax", "the QOS allows fewer jobs or resources: lower the request or pick another slurm.qos"),
    ("job violates accounting/qos policy", "the account/QOS limits refuse it: `sacctmgr show qos`"),
    ("unable to contact slurm controller", "the Slurm controller is down or unreachable from this host: try again later"),
)


class SubmitError(AgentError):
    """sbatch refused the job or did not answer; message = what Slurm said, hint = what to change."""


class SubmitTimeout(SubmitError):
    """sbatch did not answer in time: the job may exist all the same (look for it by name)."""


def shim_argv(home: str, run: str, stage: str, attempt: int, python: str = "python3",
              agent: Optional[Sequence[str]] = None) -> List[str]:
    """The stage shim as the compute node runs it: `<python> <home>/rgt-agent.pyz exec-stage ...`.
    `agent` replaces the .pyz (e.g. ["-m", "boxagent"] from a source tree)."""
    target = list(agent) if agent is not None else [home.rstrip("/") + "/rgt-agent.pyz"]
    return [python] + target + ["exec-stage", "--home", home, "--run", run, "--stage", stage,
                                "--attempt", str(int(attempt))]


def batch_script(shim: Sequence[str], title: str = "", env: Optional[Dict[str, str]] = None) -> str:
    """The batch script text: bash that `exec`s the shim (every word shlex-quoted). `env` is for
    NON-secret plumbing only (PYTHONPATH for a source tree): the script is readable by admins."""
    lines = ["#!/bin/bash"]
    if title:
        lines.append("# " + " ".join(title.split()))
    lines.append("# Written by rgt-agent: the stage shim runs the command on this node and writes the")
    lines.append("# exit file on the shared filesystem. The stage's env is in its launch file, not here.")
    for name, value in sorted((env or {}).items()):
        if not _ENV_NAME.match(name) or "\0" in value:
            raise ValueError("not an environment variable: %r" % name)
        lines.append("export %s=%s" % (name, shlex.quote(value)))
    lines.append("exec " + " ".join(shlex.quote(word) for word in shim))
    return "\n".join(lines) + "\n"


def job_name(run: str, stage: str) -> str:
    """`rgt:<run>:<stage>`: how a restarted daemon finds a stage's job when its id was lost."""
    return "rgt:%s:%s" % (run, stage)


def sbatch_argv(script: str, run: str, stage: str, log: str, workdir: str,
                options: Optional[Dict[str, object]] = None, after: Optional[str] = None,
                sbatch: str = "sbatch") -> List[str]:
    """The full sbatch argv for one stage; `after` = the job id of the stage before it."""
    argv = [sbatch, "--parsable", "--job-name=" + job_name(run, stage),
            "--output=" + output_path(log), "--error=" + output_path(log),
            # append: the shim appends the command's output to the same file; Slurm must not
            # truncate what it wrote before. no-requeue: rgt retries as a NEW attempt; a batch
            # job Slurm requeued itself would find the attempt's claim file and do nothing.
            "--open-mode=append", "--no-requeue",
            "--chdir=" + workdir, "--kill-on-invalid-dep=yes"]
    if after:
        argv.append("--dependency=afterok:%s" % after)
    argv += table_options(options or {})
    argv.append(script)
    return argv


def table_options(options: Dict[str, object]) -> List[str]:
    """The merged [slurm] table as sbatch options (extra last, as given)."""
    out = []
    for key, flag in OPTIONS:
        if key in options and options[key] is not None:
            value = "0" if (key == "mem" and options[key] == "all") else str(options[key])
            out.append("--%s=%s" % (flag, value))
    extra: Any = options.get("extra") or []
    out += [str(x) for x in extra]
    return out


def output_path(path: str) -> str:
    """sbatch expands %j, %x, %u ... in --output/--error: a literal % is written %%. A backslash
    anywhere turns the expansion off entirely, so such a path is passed as it is."""
    return path if "\\" in path else path.replace("%", "%%")


def parse_job_id(stdout: str) -> Tuple[str, Optional[str]]:
    """sbatch --parsable prints `id` or `id;cluster`; ValueError when there is no id."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    m = _JOB_ID.match(lines[-1]) if lines else None
    if m is None:
        raise ValueError("sbatch printed no job id: %r" % stdout.strip()[-200:])
    return m.group(1), m.group(2)


def submit(argv: List[str], runner: Callable[..., Result] = run_command,
           timeout: float = SUBMIT_TIMEOUT_S) -> str:
    """Run sbatch; the job id, or SubmitError with Slurm's own words and a hint.
    A timeout does NOT mean nothing was submitted: look for the job by name before resubmitting."""
    res = runner(argv, timeout)
    if res.rc == 0:
        try:
            return parse_job_id(res.out)[0]
        except ValueError as exc:
            raise SubmitError(str(exc), "run the same sbatch by hand to see what it prints")
    said = res.why("sbatch")
    if res.timed_out:
        raise SubmitTimeout(said + " (the job may exist: look for it by name before submitting again)",
                          "check `squeue --me`; the controller may be overloaded")
    return _raise_refused(said)


def _raise_refused(said: str) -> str:
    low = said.lower()
    for needle, hint in HINTS:
        if needle in low:
            raise SubmitError(said, hint)
    raise SubmitError(said, "fix the job's [slurm] table; `sbatch --help` lists the options")
