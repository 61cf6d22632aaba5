"""The built-in rule table: log evidence -> class (../shared/platform-facts.md), as data.

Each rule: class, pattern, severity (info|warning|critical), retryable, remediation, and
optionally `keywords` (literals for the prefilter; derived from the pattern when absent),
`needs_traceback` (only counts after a `Traceback (most recent call last):` line), `tag`.

Patterns are written in the subset that Python `re` and GNU `grep -E` read the same way
([0-9] not \\d, plain groups, no lookaround, no inline flags), so the benchmark can hand
grep the very same alternation. A raw CR inside a line is matched as a line break (lines are
split at \\r for matching: tqdm redraws), so crlf patterns use [^...] classes, never \\r.

Order matters twice: within one line the first matching rule (in CLASS_RANK order) wins,
so a specific line ("FloatingPointError", "$'\\r': command not found") is never counted as
the generic code_error; across lines diagnose() ranks classes by CLASS_RANK.
"""
from __future__ import annotations

from boxagent.health import xidcatalog
from boxagent.triage.vocab import rule_specs as vocab_rule_specs

# Most specific first. code_error's generic exception line is the last resort.
CLASS_RANK = ("gpu_hardware", "node_failure", "crlf_script", "driver_too_old", "torch_arch_mismatch",
              "disk_full", "inodes_full", "truncated_checkpoint", "cuda_oom", "cgroup_oom",
              "timeout", "preempted", "nccl", "network_transient", "hangup", "killed", "divergence",
              "code_error")

TRANSIENT = frozenset(("nccl", "network_transient", "preempted", "machine_restart", "node_failure"))

REMEDIATION = {
    "cgroup_oom": "the container's memory limit (memory.max on cgroup v2, "
                  "memory.limit_in_bytes on v1) was hit: size DataLoader workers against that "
                  "limit, not the CPU count; share big tensors (memmap); lower batch or prefetch",
    "cuda_oom": "GPU memory ran out: smaller batch (or gradient accumulation), check for other "
                "jobs on the GPU, try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; not "
                "transient, a retry fails the same way",
    "disk_full": "`df -h`: delete *.tmp and rolling latest.pth, keep the best checkpoint, "
                 "move data to the data disk or grow it",
    "inodes_full": "`df -i`: too many small files; shard them into tar/webdataset files, cap "
                   "per-sample outputs, clear caches (pip, HF) on that filesystem",
    "code_error": "a bug or a bad config in the job: fix it and run again; retrying the "
                  "identical command will fail the same way",
    "nccl": "collective communication failed: transient if rare (retry); if it repeats check "
            "the NIC/IB, NCCL_DEBUG=INFO, NCCL_P2P_DISABLE=1, and that every rank got the same "
            "work",
    "network_transient": "a network blip (HTTP/DNS/TLS): retry the identical config; for "
                         "hubs in China set a mirror (HF_ENDPOINT=https://hf-mirror.com) or "
                         "the platform proxy",
    "gpu_hardware": "the GPU is failing (Xid/ECC/fell off the bus): stop and rent another "
                    "box; do not debug your code for this",
    "torch_arch_mismatch": "this torch build has no kernels for this GPU: keep the image's "
                           "torch, or install a wheel built for this compute capability; do "
                           "not let requirements.txt pin another torch",
    "driver_too_old": "the driver is older than the CUDA toolkit in use: pick a host/image "
                      "whose driver supports it, or install a torch built for an older CUDA",
    "truncated_checkpoint": "a checkpoint/cache file is truncated (often a write cut off by a "
                            "full disk or a kill): delete it, resume from the previous one, "
                            "and write checkpoints atomically (tmp -> fsync -> rename)",
    "crlf_script": "the script has Windows line endings: `sed -i 's/\\r$//' script.sh`; add "
                   "`*.sh text eol=lf` to .gitattributes",
    "divergence": "the loss became NaN/inf: retry the identical config once; if it repeats "
                  "lower the LR, add warmup/gradient clipping, check the data and AMP scaling",
    "machine_restart": "the machine restarted: resume from the last marker/checkpoint "
                       "(`rgt-client resume`)",
    "preempted": "the box was preempted/stopped: resume on a new box from durable checkpoints",
    "killed": "something outside the job sent it a signal (a person, a platform watchdog, a "
              "script): find who, then resume",
    "hangup": "the process died with its terminal (SIGHUP): launch through rgt, tmux or "
              "`nohup setsid`, never as a plain foreground job of an ssh session",
    "timeout": "the stage ran past its `timeout`: raise it, or find the hang (py-spy dump)",
    "expect_missing": "the command exited 0 but its declared outputs are missing or empty: "
                      "check the paths in `expect` and that the job really saved them",
    "success_pattern_missing": "the command exited 0 but never printed `success_pattern`: it "
                               "may have skipped its work; check the log and the pattern",
    "cancelled": "cancelled on request: resume it when ready",
    "preflight_failed": "a preflight check failed before the stage started: see the evidence",
    "nonzero_exit": "read the log's last lines (`rgt-client logs`); nothing more specific "
                    "was recognised",
    "node_failure": "the node failed under the job: rgt resubmits the identical stage when it "
                    "has `retries` left; if it repeats on the same node add "
                    "`slurm.extra = [\"--exclude=<node>\"]` and tell the cluster admins; resume "
                    "from the last checkpoint",
}

# The same classes on a Slurm cluster, where the fix is in the job's [slurm] table.
SLURM_REMEDIATION = {
    "timeout": "the job ran past its Slurm time limit: raise `slurm.time`, within the "
               "partition's limit (`sinfo -o \"%P %l\"`), or checkpoint and resume",
    "cgroup_oom": "the job used more memory than its `slurm.mem` (Slurm's cgroup killed it): "
                  "raise `slurm.mem` within the nodes' memory (`sinfo -N -l`), or size DataLoader "
                  "workers and batches against it",
    "preempted": "a higher-priority job took the node: rgt resubmits the identical stage when it "
                 "has `retries` left; resume from the last checkpoint; a partition or QOS without "
                 "preemption avoids it",
    "killed": "someone cancelled the Slurm job outside rgt (scancel, an admin, a policy): ask "
              "who, then `resume` the run",
}

SUMMARY = {
    "cgroup_oom": "killed by the cgroup OOM killer (memory limit)",
    "cuda_oom": "CUDA out of memory",
    "disk_full": "the disk is full (no space left on device)",
    "inodes_full": "the filesystem ran out of inodes (bytes were still free)",
    "code_error": "the job crashed with an error in its code or config",
    "nccl": "NCCL / collective communication failure",
    "network_transient": "a network error (transient)",
    "gpu_hardware": "GPU hardware fault",
    "torch_arch_mismatch": "torch has no CUDA kernels for this GPU",
    "driver_too_old": "the NVIDIA driver is too old for this CUDA",
    "truncated_checkpoint": "a truncated checkpoint or cache file",
    "crlf_script": "a script with Windows (CRLF) line endings",
    "divergence": "the loss diverged (NaN/inf)",
    "hangup": "hung up with its terminal (SIGHUP)",
    "killed": "killed by a signal from outside",
    "timeout": "Slurm cancelled the job at its time limit",
    "preempted": "Slurm preempted the job for a higher-priority one",
    "node_failure": "the Slurm node failed while the job ran",
}

_C, _W, _I = "critical", "warning", "info"

# Python's built-in exceptions that name a bug or a bad input (not the ones other classes own:
# connection/timeout errors, MemoryError, FloatingPointError, EOFError).
BUILTIN_EXCEPTIONS = (
    "Exception", "ArithmeticError", "AssertionError", "AttributeError",
    "FileExistsError", "FileNotFoundError", "ImportError", "IndexError", "IsADirectoryError",
    "KeyError", "LookupError", "ModuleNotFoundError", "NameError", "NotADirectoryError",
    "NotImplementedError", "OSError", "OverflowError", "PermissionError", "RecursionError",
    "RuntimeError", "StopIteration", "SystemError", "TypeError", "UnboundLocalError",
    "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError", "ValueError",
    "ZeroDivisionError")


LIMIT_WORDS = (r"exceeded (the |its )?(maximum |max )?(allowed |execution |run ?)?(time ?limit|"
               r"timeout|time|wall ?time|walltime)( of [0-9]| limit|[ .,;]|$)|hit (its|the) "
               r"(time ?limit|timeout)( of [0-9]|[ .,;]|$)|reached (its|the) (maximum )?(time ?limit|"
               r"wall ?time|walltime|maximum (execution|run) ?time)")
PLATFORM_LIMIT = ("the platform's time limit ended the job: raise it (GitHub Actions "
                  "`timeout-minutes`, Azure `timeoutInMinutes`, GitLab `timeout`, Kubernetes "
                  "`activeDeadlineSeconds`, Modal `timeout=`) or checkpoint and resume in "
                  "several runs")


def _r(cls, pattern, severity=_C, **extra):
    rule = {"class": cls, "pattern": pattern, "severity": severity,
            "retryable": cls in TRANSIENT, "remediation": REMEDIATION[cls]}
    rule.update(extra)
    return rule


BUILTIN_RULES = [
    # gpu_hardware: Xid codes that mean the hardware, not the code (13/31/43 are app errors):
    # NVIDIA's catalog decides (boxagent/health/xidcatalog.py).
    # Bus ids carry hex letters (PCI:0000:3b:00) - the classic monitor trap.
    _r("gpu_hardware", r"Xid \(PCI:[0-9A-Fa-f:.]+\): (%s)\b" % "|".join(map(str, xidcatalog.stage_fatal_codes())),
       keywords=["Xid (PCI:"]),
    _r("gpu_hardware", r"fallen off the bus|GPU is lost|GPU_IS_LOST|Unable to determine the "
       r"device handle for GPU",
       keywords=["off the bus", "GPU is lost", "GPU_IS_LOST", "device handle"]),
    # bash quotes a word holding a CR as $'…\r' in every locale (`行 2: $'\r': 未找到命令`), and
    # env names the interpreter with its \r whatever language the rest of the message is in
    # (`/usr/bin/env: “bash\r”: 没有那个文件或目录`): match those, not the English words
    # around them.
    _r("crlf_script", r"\$'[^']*\\r'", keywords=[": $'\\r': ", "unexpected token",
                                                  "': No such file"]),
    _r("crlf_script", r"set: -[^:A-Za-z0-9]?: invalid option|\\r[^:]{0,3}: No such file or "
       r"directory|bin/env: [^ :]*\\r[^ :]*: |(\^M|[^A-Za-z0-9 )]): bad interpreter",
       keywords=["invalid option", ": No such file or directory", "bin/env: ",
                 ": bad interpreter"]),
    # A name that ends in the script's CR, shown as ^M (cat -v, zsh's nicechar, less), in
    # whatever message quotes it ("bad interpreter: /bin/bash^M: no such file", "python^M:
    # not found"); and the tools that say it in words: fish ("The file uses Windows line
    # endings (\r\n)"), sbatch ("Batch script contains DOS line breaks (\r\n)"), shellcheck
    # SC1017 ("Literal carriage return"). git's "LF will be replaced by CRLF" names no line
    # ending of a script that ran: not matched.
    _r("crlf_script", r"[A-Za-z0-9_./-]\^M['\"]?: ([Bb]ad interpreter|[Nn]o such file)|bad "
       r"interpreter: [^ :]*\^M: |([Ww]indows|DOS|CRLF|CR-LF) line[ -](endings?|breaks?)|"
       r"[Ll]iteral carriage return",
       keywords=[": bad interpreter", ": No such file or directory", ": no such file or directory",
                 "line ending", "line break", "line-ending", "line-break", "carriage return"]),
    # A SIGKILL nobody asked for is usually the OOM killer, however the layer above words it:
    # bash's "Killed", srun's "srun: error: node7: task 0: Killed" (srun_job.c: strsignal), zsh's "[1]  12 killed  python …", torchrun's "exitcode: -9",
    # mp.spawn's "terminated with signal SIGKILL", subprocess's "died with <Signals.SIGKILL:
    # 9>". diagnose() checks the cgroup counter before blaming memory.
    _r("cgroup_oom", r"^Killed$|[0-9]+ Killed +[^ ]|: tasks? [0-9,-]+: Killed$|^\[[0-9]+\] *[-+]? +[0-9]+ +killed  +[^ ]|"
       r"zsh: killed +[^ ]|killed by signal: Killed|Out of memory: Kill|oom-kill|"
       r"oom_kill_process|Memory cgroup out of memory|exitcode *: -9\b|Signal 9 \(SIGKILL\)|"
       r"terminated with signal SIGKILL|<Signals\.SIGKILL: 9>|exit status -9\b",
       keywords=["Killed", "killed  ", "zsh: killed", "Out of memory", "out of memory", "oom-kill",
                 "oom_kill_process", "exitcode", "(SIGKILL)", "signal SIGKILL", "SIGKILL: 9",
                 "exit status -9"]),
    # torchrun forwards the signal it got to its workers ("Sending process N closing signal
    # SIGHUP") and raises SignalException ("Process N got signal: 1"). Its SIGTERMs to the
    # surviving workers after one failed are no signal from outside: not matched.
    # A platform's time limit in its own words (GitHub Actions "has exceeded the maximum
    # execution time of 360 minutes", Azure Pipelines "exceeded the maximum allowed time of
    # 01:00:00", Modal "hit its timeout of 300s", a scheduler "reached its time limit"): the
    # words of the family, not one row per platform (vocabulary rows hold the exact ones).
    # A network wait ("Read timed out", "deadline exceeded") says none of them.
    _r("timeout", LIMIT_WORDS, remediation=PLATFORM_LIMIT,
       keywords=["exceeded", "its timeout", "the timeout", "its time limit", "the time limit",
                 "its timelimit", "the timelimit", "reached its", "reached the"]),
    # A file cut short, in the words of whatever reads it: HDF5 ("truncated file: eof = N"),
    # h5py 2 capitalising HDF5's words ("Truncated file: eof"), zipfile ("Truncated file
    # header"), PIL ("image file is truncated"): the family, not one reader's row.
    _r("truncated_checkpoint", r"[Tt]runcated file|file is truncated|[Tt]runcated (checkpoint|"
       r"archive)", keywords=["runcated file", "file is truncated", "runcated checkpoint",
                              "runcated archive"]),
    # A supervisor that kills for memory and says so: Ray's raylet ("12 Workers (tasks /
    # actors) killed due to memory pressure (OOM)", "Task was killed due to the node running
    # low on memory"), systemd-oomd ("Killed /user.slice/... due to memory pressure for ...
    # being 62.10% > 50.00%", "... due to memory used (...) / total (...)"), earlyoom
    # (main.c: "low memory! at or below SIGTERM limits: mem 3.00%, swap 10.00%", before
    # kill.c's "sending SIGTERM to process N"). The words, not one row per supervisor.
    _r("cgroup_oom", r"[Kk]illed (due to|because of) [^.;]{0,60}(memory pressure|low on memory|"
       r"low memory|out of memory|memory used)|[Kk]illed [^ ]+ due to memory (pressure|used)|"
       r"low memory! at or below SIG(TERM|KILL) limits",
       keywords=["illed due to", "illed because of", " due to memory pressure",
                 " due to memory used", "low memory! at or below"]),
    _r("hangup", r"^Hangup$|[0-9]+ Hangup +[^ ]|Received (SIGHUP|1 death signal)|SIGHUP "
       r"received|Signal 1 \(SIGHUP\)|signal: hangup|closing signal SIGHUP|got signal: 1\b",
       keywords=["Hangup", "SIGHUP", "death signal", "signal: hangup", "got signal: 1"]),
    _r("killed", r"^Terminated$|[0-9]+ Terminated +[^ ]|: tasks? [0-9,-]+: Terminated$|Received (SIGTERM|SIGINT|15 death "
       r"signal|2 death signal)|Signal 15 \(SIGTERM\)|signal: terminated|^KeyboardInterrupt$|"
       r"closing signal SIGINT|got signal: (2|15)\b",
       keywords=["Terminated", "SIGTERM", "SIGINT", "death signal", "signal: terminated",
                 "KeyboardInterrupt", "got signal: 2", "got signal: 15"]),
    # A model quantity that "is/became NaN" (a guard's message: "Loss became infinite or NaN",
    # "Network outputs is NAN! Stop Training"), and fp16's dynamic loss scale that cannot go
    # lower (DeepSpeed: "Current loss scale already at minimum"): every step overflows.
    _r("divergence", r"FloatingPointError|([Ll]oss|[Oo]utputs?|[Ll]ogits|[Gg]radients?) (is|are|"
       r"became|become|has become) (nan|NaN|NAN|inf|infinite)|NaN or Inf found|"
       r"non-finite loss|returned nan values|[Dd]etected (NaN|nan|inf)|"
       r"loss scale already at minimum",
       keywords=["FloatingPointError"] +
       [v + " " + x for v in ("is", "are", "became", "become") for x in ("nan", "NaN", "NAN", "inf")] +
       ["NaN or Inf", "non-finite loss", "nan values", "etected NaN", "etected nan",
        "etected inf", "loss scale already at minimum"]),
    # loss=nan in a progress line: a warning (training may recover); the crash it causes is
    # what fails the stage.
    # (also a tensor printed as the value, `loss=tensor(nan, device='cuda:0')`, and -inf)
    # (the gradient norm in either spelling: HF's `grad_norm=nan`, Megatron's `grad norm: nan |`)
    _r("divergence", r"[Ll]oss(=| = |: |': |\": | )(tensor\()?-?(nan|NaN|inf)\b|grad_norm(=|: |': )(nan|inf)\b|grad norm: (nan|inf)\b",
       _W, keywords=[p + t + v for p in ("oss=", "oss = ", "oss: ", "oss': ", "oss\": ", "oss ")
                     for t in ("", "tensor(", "-", "tensor(-") for v in ("nan", "NaN", "inf")] +
       ["grad_norm" + p + v for p in ("=", ": ", "': ") for v in ("nan", "inf")] +
       ["grad norm: nan", "grad norm: inf"]),
    # fp16 overflow skips are normal while the loss scale calibrates (65536 -> 8192); a scale
    # pushed below 10 means nearly every step overflows: the run is diverging.
    _r("divergence", r"OVERFLOW!.*reducing to [0-9](\.[0-9]+)?( |,|$)|reducing loss scale to "
       r"[0-9](\.[0-9]+)?( |,|$)", _W, keywords=["reducing to ", "reducing loss scale to "]),
    _r("code_error", r"Traceback \(most recent call last\)", _I, tag="traceback",
       keywords=["Traceback (most recent call last)"]),
    # Structure, not causes (tags read by triage/incidents.py): a chained traceback, and the
    # tracebacks of a dying object's __del__, of an atexit hook or of a thread, which are not
    # what stopped the process.
    _r("code_error", r"During handling of the above exception|The above exception was the "
       r"direct cause", _I, tag="chain", keywords=["During handling of the above",
                                                    "The above exception was"]),
    _r("code_error", r"Exception ignored in|Error in atexit\._run_exitfuncs", _I, tag="ignored",
       keywords=["Exception ignored in", "Error in atexit._run_exitfuncs"]),
    _r("code_error", r"Exception in thread ", _I, tag="thread", keywords=["Exception in thread "]),
    # A launcher reporting that its child failed: the child's own error, printed before, is
    # the cause (torchrun's ChildFailedError, accelerate's CalledProcessError of python).
    _r("code_error", r"ChildFailedError|CalledProcessError: Command '?\[?'?[^' ]*(python|"
       r"accelerate|torchrun|deepspeed)[^' ]*'|ProcessExitedException: process [0-9]+ "
       r"terminated with exit code|failed \(exitcode: [0-9]+\)", tag="wrapper",
       keywords=["ChildFailedError", "CalledProcessError: Command", "terminated with exit code",
                 "failed (exitcode: "]),
    # How a process died, printed after (or instead of) the error that killed it.
    # (bash's words for SIGBUS/SIGILL/SIGFPE, and glog's failure-signal handler in TF, XLA and
    # torch's C++: "*** SIGSEGV (@0x8) received by PID 4321 (TID 0x7f..) ...; stack trace: ***")
    _r("code_error", r"Segmentation fault|terminate called (after throwing|without an active "
       r"exception)|Aborted \(core dumped\)|Fatal Python error: |(Bus error|Illegal instruction|"
       r"Floating point exception) \(core dumped\)|\*\*\* SIG[A-Z]+ \(@0x[0-9a-f]+\) received by PID",
       tag="crash",
       keywords=["Segmentation fault", "terminate called", "Aborted (core dumped)",
                 "Fatal Python error: ", "Bus error (core dumped)", "Illegal instruction (core dumped)",
                 "Floating point exception (core dumped)", ") received by PID"]),
    # torch's boilerplate after it ("Compile with `TORCH_USE_CUDA_DSA` to enable device-side
    # assertions.") is no error: on a real H100 it was the deciding line of a device assert.
    _r("code_error", r"CUDA error: device-side assert triggered|\.cuh?:[0-9]+: .*Assertion `.*` failed",
       keywords=["device-side assert", "operator(): block"],
       remediation="an index out of range on the GPU (often labels >= num_classes): rerun "
                   "with CUDA_LAUNCH_BLOCKING=1 to see the line; fix the data or the model"),
    _r("code_error", r"No module named |ImportError: cannot import name",
       keywords=["No module named", "cannot import name"],
       remediation="a Python package is missing (or the wrong version) in the interpreter the "
                   "stage runs: install it there (conda activate / the venv first), pin it in "
                   "requirements, and keep the image's torch"),
    _r("code_error", r"^(SyntaxError|IndentationError|TabError): |"
       r"can't open file .*No such file or directory|: command not found$|: error: "
       r"(unrecognized arguments|the following arguments are required|argument )",
       keywords=["SyntaxError: ", "IndentationError: ", "TabError: ", "can't open file",
                 "command not found", ": error: "]),
    # Python's own exception names need no traceback header around them: a paste that starts
    # mid-traceback still ends in "NameError: …". Other names do (see below).
    _r("code_error", r"^(" + "|".join(BUILTIN_EXCEPTIONS) + r"): |^AssertionError$",
       keywords=[n + ":" for n in BUILTIN_EXCEPTIONS] + ["AssertionError"]),
    # The generic exception line counts only after a traceback header, so a metric printed
    # as "MeanSquaredError: 0.12" or a line like "ErrorRate: 3" is never a crash.
    _r("code_error", r"^([A-Za-z_][A-Za-z0-9_]*\.)*(Exception|[A-Z][A-Za-z0-9_]*(Error|"
       r"Exception|Failure))(: |:$|$)", needs_traceback=True,
       keywords=["Error", "Exception", "Failure"]),
]

# The libraries' own vocabularies (triage/vocab: one row per code or message, with its
# source: CUDA, NCCL, errno, torch, the HTTP clients, Slurm, ...), one rule per class. The
# rules above are the structural ones (shells' and launchers' signal words, CRLF, divergence,
# traceback structure) and the Xid/NVML lines; they come first: within a class a tagged rule
# (crash, wrapper, traceback) keeps its line.
def _vocab_rule(spec):
    cls = spec.pop("class")
    if spec.get("remediation") == "slurm":          # the fix is in the job's [slurm] table
        spec["remediation"] = SLURM_REMEDIATION[cls]
    return _r(cls, spec.pop("pattern"), spec.pop("severity"), **spec)


BUILTIN_RULES += [_vocab_rule(spec) for spec in vocab_rule_specs()]
