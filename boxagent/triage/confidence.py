"""How sure a cause is: `confidence` high|medium|low, and for a doubt the `runner_up` class and
what would `tell_apart` the two.

A confident wrong cause is worse than "not sure": it sends a person to fix the wrong thing.
So `high` is given only where the deciding evidence is unambiguous:
  - a fact the box read (the cgroup's oom_kill counter, statvfs, the boot id, a GPU fault,
    the stage's timeout, a cancel, a Slurm end state): `decided_by_fact` names it;
  - a vocabulary row that names the class itself (`CUDA out of memory`, `No space left on
    device`, an Xid, `$'\\r': command not found`), read by the emitter it came from;
  - a job or profile rule (the user said so).
`medium`: the log decided, but through words another class also uses (a generic exception
line that talks of memory or CUDA, "Connection refused" with no emitter, ENOSPC without the
filesystem's inode use, a word an emitter re-read, a native crash, a warning that stands in
for the error). `low`: a guess named as one (an unexplained SIGKILL where no counter says
whether the OOM killer sent it).

calibrate(cause, facts, decision) fills the three fields in place and returns the cause.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

from boxagent.triage import emitters, runnerups, vocab
from boxagent.triage.builtin_rules import LIMIT_WORDS

Cause = Dict[str, Any]
HIGH, MEDIUM, LOW = "high", "medium", "low"

# Classes a fact or an explicit word decides: no other class uses their evidence.
FACT_CLASSES = frozenset(("cancelled", "preflight_failed", "machine_restart", "preempted",
                          "timeout", "expect_missing", "success_pattern_missing"))
VOCAB_CLASSES = frozenset(("gpu_hardware", "crlf_script", "driver_too_old",
                           "torch_arch_mismatch", "truncated_checkpoint", "cuda_oom", "nccl",
                           "hangup", "node_failure", "inodes_full"))
# What tells two classes apart: (class, runner-up) -> the check a person makes.
TELL_APART: Dict[Tuple[str, str], str] = {
    ("killed", "cgroup_oom"): "check `dmesg -T | grep -i -e oom -e killed` for the OOM killer "
                              "naming this process, and the cgroup's oom_kill counter",
    ("cgroup_oom", "killed"): "check `dmesg -T | grep -i -e oom -e killed`: no OOM-killer line "
                              "for this process means someone or something else sent SIGKILL",
    ("disk_full", "inodes_full"): "`df -h` and `df -i` on the path: inodes at 100% with bytes "
                                  "free means inodes_full",
    ("code_error", "gpu_hardware"): "`dmesg -T | grep -i xid`: Xid 48/63/64/74/79/92-95/119/120 "
                                    "means the GPU; 13/31/43 or none means the code",
    ("code_error", "nonzero_exit"): "read the lines above the error: a stack from the job's own "
                                    "code means a bug; a library's internals, its version",
    ("network_transient", "nccl"): "a URL or a downloader in the traceback means a download; "
                                   "NCCL/c10d/socket.cc lines mean the ranks' own connection",
    ("nccl", "network_transient"): "NCCL_DEBUG=INFO shows which peer the transport lost",
    ("network_transient", "code_error"): "`curl -sI https://huggingface.co` from the box: it "
                                         "answers, then check the repo id, the revision and "
                                         "access to a gated model",
    ("truncated_checkpoint", "code_error"): "`ls -l` the file against the size it should "
                                            "have; 'Weights only load failed' or 'invalid load "
                                            "key' is a whole file of another format or torch "
                                            "version, not a cut one",
    ("nccl", "code_error"): "read every rank's log: a rank that died first (an OOM, an "
                            "exception) or ran different work leaves the others waiting; "
                            "NCCL_DEBUG=INFO and TORCH_NCCL_TRACE_BUFFER_SIZE show the collective",
    ("cgroup_oom", "cuda_oom"): "`nvidia-smi` memory at the limit means the GPU; `free -g` and "
                                "`dmesg | grep -i oom` mean host RAM",
    ("cuda_oom", "cgroup_oom"): "`nvidia-smi` memory at the limit means the GPU; `free -g` and "
                                "`dmesg | grep -i oom` mean host RAM",
    ("divergence", "code_error"): "the loss turned NaN before the crash: rerun once; if the crash "
                                  "comes without NaN, it is the code",
    ("killed", "preempted"): "the provider's console or event log says whether it stopped the "
                             "instance (spot/preemption)",
    ("timeout", "killed"): "the platform's run history (the CI job's page, `modal app logs`, the "
                           "scheduler's accounting) says whether its time limit ended the run",
    ("preempted", "killed"): "the provider's console or event log (`sky jobs queue`, the cloud's "
                             "instance history) says whether it took the machine back; if not, "
                             "someone stopped the job",
    ("cancelled", "killed"): "`sacct -j JOB -o JobID,State,Reason` names who ended it: CANCELLED "
                             "by a uid is a scancel",
}
_CUDA_WORDS = re.compile(r"CUDA error|cudaError|illegal memory access|unspecified launch failure|"
                         r"CUBLAS_STATUS|CUDNN_STATUS|device-side assert")
_SPECIFIC_CODE = re.compile(r"SyntaxError|IndentationError|TabError|No module named|cannot import "
                            r"name|command not found|unrecognized arguments|arguments are "
                            r"required|can't open file|KeyError|NameError|AttributeError|"
                            r"TypeError|ImportError|ModuleNotFoundError|FileNotFoundError|"
                            r"AssertionError|IndexError|ZeroDivisionError|shape|size mismatch|"
                            r"device-side assert|Assertion `")
_OOM_WORDS = re.compile(r"Out of memory: Kill|oom-kill|oom_kill_process|Memory cgroup out of "
                        r"memory|Exceeded job memory limit|exceeded memory limit|low on memory|"
                        r"OOMKilled|low on resource: \[?memory|condition: \[MemoryPressure|"
                        r"ran out-of-memory and exited|[Kk]illed (due to|because of) [^.;]{0,60}"
                        r"(memory pressure|low on memory|low memory|out of memory|memory used)|"
                        r"[Kk]illed [^ ]+ due to memory (pressure|used)|"
                        r"low memory! at or below SIG(TERM|KILL) limits")
# A collective that timed out or was aborted is often the symptom of another rank's failure
# (an OOM, an exception, ranks doing different work) that this log does not show.
_COLLECTIVE_SYMPTOM = re.compile(r"[Ww]atchdog|timed out|[Tt]imeout|was aborted|DistBackendError")
# huggingface_hub says the same when the hub cannot be reached and when the repo or file does
# not exist (a typo, a gated model, a revision).
_HUB_MISS = re.compile(r"couldn't connect to 'https|LocalEntryNotFoundError|cannot find the "
                       r"requested files in the (disk )?cache|outgoing traffic has been disabled")
# The words of a file cut short; an UnpicklingError without them may be a whole file of
# another format ("invalid load key", torch 2.6's "Weights only load failed").
_CUT = re.compile(r"truncated|unexpected EOF|central directory|Ran out of input|file signature "
                  r"not found|PytorchStreamReader failed|incomplete|short read|eof = [0-9]+")
_LIMIT_WORDS = re.compile(LIMIT_WORDS)
_NET_GENERIC = re.compile(r"[Cc]onnection refused|[Cc]onnection reset|[Nn]o route to host|timed out|"
                          r"[Nn]etwork is unreachable|[Bb]roken pipe|i/o timeout")


def confidence_words(cause: Cause) -> str:
    """"low: maybe cgroup_oom instead; check `dmesg …`" - one line for a person."""
    level = str(cause.get("confidence") or "")
    if level == HIGH or not cause.get("runner_up"):
        return level
    out = "%s: maybe %s instead" % (level, cause["runner_up"])
    return out + ("; %s" % cause["tell_apart"] if cause.get("tell_apart") else "")


def calibrate(cause: Cause, facts: Dict[str, Any], decision: Any = None) -> Cause:
    """Fill confidence (and runner_up, tell_apart where in doubt) on `cause`."""
    level, runner = cause.get("confidence"), cause.get("runner_up")
    if level is None:
        level, runner = _judge(cause, facts, decision)
    elif level != HIGH and not runner and cause["class"] in ("code_error", "nonzero_exit"):
        runner = _runner_up(cause, _said(cause), facts)     # a step judged it, named no other
    cause["confidence"] = level
    if level != HIGH and runner and runner != cause["class"]:
        cause["runner_up"] = runner
        cause.setdefault("tell_apart", TELL_APART.get((cause["class"], runner)) or
                         "read the log's last lines (`rgt-client logs`) around the deciding line")
    else:
        cause.pop("runner_up", None)
        cause.pop("tell_apart", None)
    return cause


def _judge(cause: Cause, facts: Dict[str, Any], decision: Any) -> Tuple[str, Optional[str]]:
    cls = cause["class"]
    hit = decision.hit if decision is not None and decision.hit.get("class") == cls else None
    if cause.get("decided_by_fact"):
        return HIGH, None
    if cls in FACT_CLASSES:      # a platform's own line can still be a suggestive row
        said = str(hit.get("line") or "") if hit is not None else ""
        if hit is not None and cls == "timeout" and _LIMIT_WORDS.search(said) and \
                vocab.row_for(said, cls) is None:
            return MEDIUM, "killed"     # the family's words, no platform's own row: not certain
        return (MEDIUM, None) if hit is not None and _suggestive(said, cls) else (HIGH, None)
    if hit is None:
        return _without_line(cause, facts)
    if hit.get("source", "builtin") != "builtin":
        return HIGH, None                              # a job or profile rule: the user's word
    if decision.kind != "error":
        return MEDIUM, ("code_error" if decision.kind == "warning" else None)
    line = str(hit.get("line") or "")
    if hit.get("emitter"):
        return MEDIUM, hit.get("was")
    level, runner = _by_class(cls, line, cause, facts)
    if level == HIGH and _suggestive(line, cls):
        return MEDIUM, runner      # the row's words have another common cause (its source says)
    return level, runner


def _suggestive(line: str, cls: str) -> bool:
    """Whether the vocabulary row that gave the line its class is marked suggestive only."""
    row = vocab.row_for(line, cls)
    return row is not None and not row.definitive


def _by_class(cls: str, line: str, cause: Cause, facts: Dict[str, Any]) -> Tuple[str, Optional[str]]:
    if cls == "code_error":
        if _CUDA_WORDS.search(line) and "device-side assert" not in line:
            return MEDIUM, "gpu_hardware"
        fam = emitters.domain_words(line)
        if fam == "memory":
            return MEDIUM, "cgroup_oom"
        if fam == "network":
            return MEDIUM, "network_transient"
        if _SPECIFIC_CODE.search(line) and not runnerups.pick("code_error", line, facts):
            return HIGH, None
        return MEDIUM, _runner_up(cause, line, facts)
    if cls == "disk_full":
        if any("of bytes used" in str(e) for e in cause.get("evidence") or []):
            return HIGH, None
        return MEDIUM, "inodes_full"
    if cls == "cgroup_oom":
        if _OOM_WORDS.search(line):
            return HIGH, None
        who = emitters.emitter_of(line)
        if who is not None and who[1] == "host_memory":
            return MEDIUM, "cuda_oom"    # the process said it ran out: nobody killed it
        return LOW, "killed"
    if cls == "network_transient" and _NET_GENERIC.search(line) and \
            not emitters.emitter_of(line) and _distributed(facts):
        return MEDIUM, "nccl"
    if cls == "killed":
        return MEDIUM, "preempted"
    if cls == "network_transient" and _HUB_MISS.search(line):
        return MEDIUM, "code_error"          # offline, or a repo name that does not exist
    if cls == "truncated_checkpoint" and not _CUT.search(line):
        return MEDIUM, "code_error"          # a pickle that is whole but of another format
    if cls == "nccl" and _COLLECTIVE_SYMPTOM.search(line):
        return MEDIUM, "code_error"          # a rank that died or went its own way first
    if cls == "divergence":
        return HIGH, None
    if cls in VOCAB_CLASSES or cls in ("network_transient", "timeout", "preempted"):
        return HIGH, None
    return MEDIUM, None


def _without_line(cause: Cause, facts: Dict[str, Any]) -> Tuple[str, Optional[str]]:
    """A cause no log line decided: a signal, an exit code, a launcher's report alone."""
    cls = cause["class"]
    if cls == "code_error" and "command not found" in str(cause.get("summary")):
        return HIGH, None
    if cls == "killed":
        return MEDIUM, "preempted"
    if cls == "hangup":
        return HIGH, None
    if cls in ("code_error", "nonzero_exit"):
        return MEDIUM, _runner_up(cause, _said(cause), facts)
    return MEDIUM, None


def _said(cause: Cause) -> str:
    return "\n".join([str(cause.get("summary") or "")] + [str(e) for e in cause.get("evidence") or []])


def _runner_up(cause: Cause, text: str, facts: Dict[str, Any]) -> Optional[str]:
    """The class runnerups.py finds plausible beside the cause (its check set on the cause as
    `tell_apart`), or None: no meaningless runner-up."""
    found = runnerups.pick(cause["class"], text, facts)
    if found is None:
        return None
    cause.setdefault("tell_apart", found[1])
    return found[0]


# A supervisor's own line that it stops a process for memory (earlyoom, systemd-oomd, Ray's
# raylet); a kubelet eviction names the resource but its SIGTERM stays `killed`.
_SUPERVISOR_KILL = re.compile(r"[Kk]illed (due to|because of) [^.;]{0,60}(memory pressure|low on "
                              r"memory|low memory|out of memory|memory used)|[Kk]illed [^ ]+ due "
                              r"to memory (pressure|used)|low memory! at or below SIG(TERM|KILL) limits")


def supervisor_killed_for_memory(hit: Dict[str, Any]) -> bool:
    """Whether a line is a memory supervisor's announcement that it stops a process."""
    return bool(_SUPERVISOR_KILL.search(str(hit.get("line") or "")))


def said_oom(hit: Dict[str, Any]) -> bool:
    """Whether a line is the OOM killer's own (the kernel, slurmstepd's oom-kill event, Ray's
    memory monitor), not only a SIGKILL's trace."""
    return bool(_OOM_WORDS.search(str(hit.get("line") or "")))


def _distributed(facts: Dict[str, Any]) -> bool:
    return any(h.get("class") == "nccl" or str(h.get("line") or "").startswith("[rank")
               for h in facts.get("hits") or [] if isinstance(h, dict))
