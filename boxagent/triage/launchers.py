"""Launchers: the programs that start the job's process and report its failure.

A launcher's own exception says "my child failed", not what failed: torch.distributed's
ChildFailedError, subprocess's CalledProcessError, DeepSpeed's "exits with return code",
mpirun's "exited with non-zero status", srun's "Exited with exit code". With the child's error
in the log, the child's error decides; without it the stage is a child's non-zero exit, never
a bug in the launcher's code.

REPORTS is the table of such lines (a rule may have called the line a code_error: it is a
generic `XError:` after a traceback); reread(hit) tags them `wrapper`.

root_cause_rank(lines) reads torchrun's summary, which names the deciding rank itself:

    Root Cause (first observed failure):
    [0]:
      rank      : 3 (local_rank: 3)
      exitcode  : 1 (pid: 1234)
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

Hit = Dict[str, Any]

# (pattern, launcher, source of the wording)
REPORTS = (
    (r"ChildFailedError", "torchrun",
     "pytorch torch/distributed/elastic/multiprocessing/errors/__init__.py"),
    (r"CalledProcessError: Command .* returned non-zero exit status", "a subprocess launcher",
     "python Lib/subprocess.py CalledProcessError.__str__"),
    (r"exits with return code ?= ?-?[0-9]+|Launch(er)? failed", "DeepSpeed launcher",
     "deepspeed/launcher/runner.py, launch.py ('... exits with return code = %d')"),
    (r"ProcessExitedException: process [0-9]+ terminated with", "torch.multiprocessing.spawn",
     "pytorch torch/multiprocessing/spawn.py"),
    (r"failed \(exitcode: -?[0-9]+\)", "torchrun",
     "pytorch torch/distributed/elastic/multiprocessing/api.py"),
    (r"mpirun detected that one or more processes exited with non-zero status|"
     r"Primary job +terminated normally, but [0-9]+ process returned", "mpirun",
     "open-mpi orte/tools/orterun help-orterun.txt"),
    (r"srun: error: [^:]+: tasks? [0-9,-]+: Exited with exit code", "srun",
     "slurm src/srun/srun_job.c"),
    (r"FailedJobError: Job \(task=[0-9]+\) failed", "submitit",
     "facebookincubator/submitit submitit/core/utils.py FailedJobError"),
    # wrappers that carry a worker's failure: the inner error, when the log has it, decides
    (r"RayTaskError(\([A-Za-z_.]*\))?|RayActorError|ActorDiedError|WorkerCrashedError|"
     r"The actor died unexpectedly|The worker died unexpectedly", "Ray",
     "ray 2.35 python/ray/exceptions.py (RayTaskError, ActorDiedError, WorkerCrashedError)"),
    # CI runners and build tools reporting a step's or a recipe's non-zero exit
    (r"Process completed with exit code [0-9]+", "GitHub Actions",
     "actions/runner src/Runner.Worker/Handlers/ScriptHandler.cs"),
    (r"(Bash|Script|PowerShell) (exited with code|failed with exit code)", "Azure Pipelines",
     "microsoft/azure-pipelines-tasks BashV3/CmdLineV2 (\"Bash exited with code '%s'.\")"),
    (r"Job failed: exit (code|status) [0-9]+", "GitLab Runner", "gitlab-runner common/build.go"),
    (r"make(\[[0-9]+\])?: \*\*\* .*Error [0-9]+", "make", "GNU make 4.4 src/job.c (\"*** [%s] Error %d\")"),
    (r"ninja: build stopped: subcommand failed", "ninja", "ninja 1.12 src/ninja.cc"),
    (r"Engine core initialization failed", "vLLM",
     "vllm 0.8 vllm/v1/engine/core_client.py (\"Engine core initialization failed. See root cause "
     "above.\")"),
    (r"Horovod detected that one or more processes exited with non-zero status", "horovodrun",
     "horovod 0.28 horovod/runner/gloo_run.py"),
    (r"ProcessRaisedException|Process [0-9]+ terminated with the following error",
     "torch.multiprocessing.spawn", "pytorch torch/multiprocessing/spawn.py ProcessRaisedException"),
)
_REPORTS = tuple((re.compile(p), who) for p, who, _ in REPORTS)
_ROOT_HEAD = re.compile(r"Root Cause \(first observed failure\)")
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*([0-9]+)")
_ROOT_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?[0-9]+)")


def launcher_of(line: str) -> Optional[str]:
    for rx, who in _REPORTS:
        if rx.search(line):
            return who
    return None


# A wrapper that names the type of the exception it carries, not its words:
# `RayTaskError(OutOfMemoryError)` is torch's CUDA OOM or any other OutOfMemoryError; the
# inner exception's own line, printed below it, decides (a row matching the bare type name
# on the wrapper's line must not).
_CARRIER = re.compile(r"RayTaskError\([A-Za-z_.]+\)|ProcessRaisedException")


# An exception whose message starts on the next line: torch.multiprocessing.spawn before
# ProcessRaisedException raised `Exception(msg)` with msg = "\n\n-- Process N terminated with
# the following error:\n" + the child's traceback, so the line itself reads `Exception:`.
_EMPTY_MESSAGE = re.compile(r"(^|[^A-Za-z0-9_])[A-Za-z_.]*(Exception|Error):\s*$")


def reread(h: Hit, detail: str = "") -> Hit:
    """A launcher's report of its failed child, tagged `wrapper` whatever rule matched it.
    `detail`: the lines right after the hit, read when its own message is empty."""
    if h.get("tag") or h.get("source", "builtin") != "builtin":
        return h
    if detail and h.get("class") == "code_error" and \
            _EMPTY_MESSAGE.search(str(h.get("line") or "")):
        who = launcher_of(detail)
        if who:
            return dict(h, tag="wrapper", launcher=who)
    if h.get("class") != "code_error":
        line = str(h.get("line") or "")
        if not _CARRIER.search(line):
            return h
        out = dict(h, tag="wrapper", launcher=launcher_of(line), was=h.get("class"))
        out["class"] = "code_error"
        return out
    who = launcher_of(str(h.get("line") or ""))
    return dict(h, tag="wrapper", launcher=who) if who else h


_TEARDOWN = re.compile(r"closing signal|death signal|got signal: (1|2|15)\b|"
                       r"Signal (1|2|15) \((SIGHUP|SIGINT|SIGTERM)\)")
OUTSIDE = (-15, -2, -1)     # a first failure by these signals is a stop from outside


def teardown_looked_through(hits: List[Hit], lines: List[str]) -> List[Hit]:
    """The hits, with the launcher's teardown lines turned into its reports (`wrapper`) when
    its own summary says the first failure was no signal from outside: torchrun lists the
    ranks it stopped under "Failures:" (`Signal 15 (SIGTERM) received by PID`) after a rank
    aborted with -6; those SIGTERMs are its own, never a kill from outside."""
    first = root_cause(lines).get("exitcode")
    if first is None or first in OUTSIDE:
        return hits
    return [dict(h, tag="wrapper") if h.get("class") in ("killed", "hangup") and
            h.get("source", "builtin") == "builtin" and _TEARDOWN.search(str(h.get("line") or ""))
            else h for h in hits]


def root_cause(lines: List[str]) -> Dict[str, Optional[int]]:
    """{rank, exitcode} from torchrun's `Root Cause (first observed failure)` section (the
    last one), or {} when the lines hold none."""
    out: Dict[str, Optional[int]] = {}
    inside = False
    for line in lines:
        text = str(line or "")
        if _ROOT_HEAD.search(text):
            inside, out = True, {}
            continue
        if not inside:
            continue
        m = _ROOT_RANK.match(text)
        if m and "rank" not in out:
            out["rank"] = int(m.group(1))
        m = _ROOT_EXIT.match(text)
        if m and "exitcode" not in out:
            out["exitcode"] = int(m.group(1))
        if text.startswith("====="):
            inside = False
    return out
