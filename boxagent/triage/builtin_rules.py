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

# Most specific first. code_error's generic exception line is the last resort.
CLASS_RANK = ("gpu_hardware", "crlf_script", "driver_too_old", "torch_arch_mismatch",
              "disk_full", "inodes_full", "truncated_checkpoint", "cuda_oom", "cgroup_oom",
              "nccl", "network_transient", "hangup", "killed", "divergence", "code_error")

TRANSIENT = frozenset(("nccl", "network_transient", "preempted", "machine_restart"))

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
}

_C, _W, _I = "critical", "warning", "info"


def _r(cls, pattern, severity=_C, **extra):
    rule = {"class": cls, "pattern": pattern, "severity": severity,
            "retryable": cls in TRANSIENT, "remediation": REMEDIATION[cls]}
    rule.update(extra)
    return rule


BUILTIN_RULES = [
    # gpu_hardware: Xid codes that mean the hardware, not the code (13/31/43 are app errors).
    # Bus ids carry hex letters (PCI:0000:3b:00) - the classic monitor trap.
    _r("gpu_hardware", r"Xid \(PCI:[0-9A-Fa-f:.]+\): (48|63|64|74|79|92|94|95|119|120)\b",
       keywords=["Xid (PCI:"]),
    _r("gpu_hardware", r"fallen off the bus|GPU is lost|GPU_IS_LOST|Unable to determine the "
       r"device handle for GPU",
       keywords=["off the bus", "GPU is lost", "GPU_IS_LOST", "device handle"]),
    _r("gpu_hardware", r"uncorrectable ECC error|cudaErrorECCUncorrectable|ECC_UNCORRECTABLE",
       keywords=["ECC error", "ECCUncorrectable", "ECC_UNCORRECTABLE"]),
    _r("crlf_script", r"\$'[^']*\\r': command not found|unexpected token .\$'[^']*\\r'",
       keywords=["\\r': command", "unexpected token"]),
    _r("crlf_script", r"set: -[^:A-Za-z0-9]?: invalid option|\\r[^:]{0,3}: No such file or "
       r"directory|(\^M|[^A-Za-z0-9 ]): bad interpreter",
       keywords=["invalid option", ": No such file or directory", ": bad interpreter"]),
    _r("driver_too_old", r"CUDA driver version is insufficient|cudaErrorInsufficientDriver|"
       r"CUDA failure 804|forward compatibility was attempted on non supported HW|"
       r"driver on your system is too old|[Pp]lease update your (GPU |NVIDIA )?driver|"
       r"UNSUPPORTED_PTX_VERSION|PTX was compiled with an unsupported toolchain",
       keywords=["driver version", "InsufficientDriver", "CUDA failure 804", "forward compatib",
                 "driver on your system", "lease update your", "UNSUPPORTED_PTX",
                 "PTX was compiled"]),
    _r("torch_arch_mismatch", r"no kernel image is available for execution|"
       r"cudaErrorNoKernelImageForDevice|is not compatible with the current PyTorch "
       r"installation", keywords=["kernel image", "NoKernelImage", "current PyTorch"]),
    _r("disk_full", r"No space left on device|ENOSPC|\[Errno 28\]|basic_ios::clear: iostream "
       r"error|unexpected pos [0-9]+ vs [0-9]+|Disk quota exceeded|EDQUOT",
       keywords=["No space left", "ENOSPC", "[Errno 28]", "iostream error", "unexpected pos",
                 "quota exceeded", "EDQUOT"]),
    _r("truncated_checkpoint", r"PytorchStreamReader failed|unexpected EOF, expected [0-9]+ "
       r"more bytes|EOFError: Ran out of input|UnpicklingError|SafetensorError|BadZipFile|"
       r"file signature not found|image file is truncated",
       keywords=["PytorchStreamReader", "unexpected EOF", "EOFError", "UnpicklingError",
                 "SafetensorError", "BadZipFile", "file signature", "is truncated"]),
    _r("cuda_oom", r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|"
       r"CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation|RESOURCE_EXHAUSTED: Out of memory|"
       r"HIP out of memory",
       keywords=["out of memory", "Out of memory", "OutOfMemoryError", "STATUS_ALLOC_FAILED",
                 "cudaErrorMemoryAllocation"]),
    # A bare "Killed" is bash reporting SIGKILL: usually the OOM killer; diagnose() checks the
    # cgroup counter before blaming memory.
    _r("cgroup_oom", r"^Killed$|[0-9]+ Killed +[^ ]|killed by signal: Killed|Out of memory: "
       r"Kill|oom-kill|oom_kill_process|Memory cgroup out of memory|exitcode *: -9\b|"
       r"Signal 9 \(SIGKILL\)",
       keywords=["Killed", "Out of memory", "out of memory", "oom-kill", "oom_kill_process",
                 "exitcode", "(SIGKILL)"]),
    _r("nccl", r"NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|"
       r"ncclRemoteError|Watchdog caught collective operation timeout|NCCL communicator was "
       r"aborted|NCCL (timeout|watchdog)|ProcessGroupNCCL.*([Tt]imeout|timed out)|"
       r"DistBackendError|RendezvousTimeoutError|RendezvousConnectionError|"
       r"Gloo connectFullMesh failed",
       keywords=["NCCL error", "ncclInternalError", "ncclSystemError", "ncclUnhandledCudaError",
                 "ncclRemoteError", "collective operation", "NCCL communicator", "NCCL timeout",
                 "NCCL watchdog", "ProcessGroupNCCL", "DistBackendError", "Rendezvous",
                 "connectFullMesh"]),
    _r("network_transient", r"Connection(Reset|Refused|Aborted)?Error|Connection (timed out|"
       r"reset by peer|refused)|ReadTimeout|ConnectTimeout|Temporary failure in name "
       r"resolution|Name or service not known|Could not resolve host|Max retries exceeded|"
       r"MaxRetryError|RemoteDisconnected|IncompleteRead|ChunkedEncodingError|SSLError|"
       r"EOF occurred in violation of protocol|HTTPError: 5[0-9][0-9]|5[0-9][0-9] Server "
       r"Error|429 Too Many Requests|Service Unavailable|Bad Gateway|Gateway Time-?out|"
       r"wandb: (ERROR )?Network error|CommError|couldn't connect to 'https|"
       r"unable to access '[^']*': (Could not|Failed|Recv failure|GnuTLS|OpenSSL)",
       keywords=["ConnectionError", "ConnectionResetError", "ConnectionRefusedError",
                 "ConnectionAbortedError", "Connection timed out", "Connection reset by peer",
                 "Connection refused", "ReadTimeout", "ConnectTimeout", "name resolution",
                 "service not known", "resolve host", "Max retries", "MaxRetryError",
                 "RemoteDisconnected", "IncompleteRead", "ChunkedEncodingError", "SSLError",
                 "EOF occurred", "HTTPError: 5", "Server Error", "Too Many Requests",
                 "Unavailable", "Gateway", "Network error", "CommError", "couldn't connect",
                 "unable to access"]),
    _r("hangup", r"^Hangup$|[0-9]+ Hangup +[^ ]|Received (SIGHUP|1 death signal)|SIGHUP "
       r"received|Signal 1 \(SIGHUP\)|signal: hangup",
       keywords=["Hangup", "SIGHUP", "death signal", "signal: hangup"]),
    _r("killed", r"^Terminated$|[0-9]+ Terminated +[^ ]|Received (SIGTERM|15 death signal)|"
       r"Signal 15 \(SIGTERM\)|signal: terminated|^KeyboardInterrupt$",
       keywords=["Terminated", "SIGTERM", "death signal", "signal: terminated",
                 "KeyboardInterrupt"]),
    _r("divergence", r"FloatingPointError|[Ll]oss is (nan|NaN|inf)|NaN or Inf found|"
       r"non-finite loss|returned nan values|[Dd]etected (NaN|nan|inf)",
       keywords=["FloatingPointError", "oss is nan", "oss is NaN", "oss is inf", "NaN or Inf",
                 "non-finite loss", "nan values", "etected NaN", "etected nan", "etected inf"]),
    # loss=nan in a progress line: a warning (training may recover); the crash it causes is
    # what fails the stage.
    _r("divergence", r"[Ll]oss(=| = |: |': |\": | )(nan|NaN|inf)\b|grad_norm(=|: |': )(nan|inf)\b",
       _W, keywords=[p + v for p in ("oss=", "oss = ", "oss: ", "oss': ", "oss\": ", "oss ")
                     for v in ("nan", "NaN", "inf")] +
       ["grad_norm" + p + v for p in ("=", ": ", "': ") for v in ("nan", "inf")]),
    _r("code_error", r"Traceback \(most recent call last\)", _I, tag="traceback",
       keywords=["Traceback (most recent call last)"]),
    _r("code_error", r"CUDA error: device-side assert triggered|device-side assertion",
       keywords=["device-side assert"],
       remediation="an index out of range on the GPU (often labels >= num_classes): rerun "
                   "with CUDA_LAUNCH_BLOCKING=1 to see the line; fix the data or the model"),
    _r("code_error", r"No module named |ImportError: cannot import name",
       keywords=["No module named", "cannot import name"],
       remediation="a Python package is missing (or the wrong version) in the interpreter the "
                   "stage runs: install it there (conda activate / the venv first), pin it in "
                   "requirements, and keep the image's torch"),
    _r("code_error", r"^(SyntaxError|IndentationError|TabError): |"
       r"can't open file .*No such file or directory|: command not found$|: error: "
       r"(unrecognized arguments|the following arguments are required|argument )|"
       r"Segmentation fault",
       keywords=["SyntaxError: ", "IndentationError: ", "TabError: ", "can't open file",
                 "command not found", ": error: ", "Segmentation fault"]),
    # The generic exception line counts only after a traceback header, so a metric printed
    # as "MeanSquaredError: 0.12" or a line like "ErrorRate: 3" is never a crash.
    _r("code_error", r"^([A-Za-z_][A-Za-z0-9_]*\.)*[A-Z][A-Za-z0-9_]*(Error|Exception|"
       r"Failure)(: |:$|$)", needs_traceback=True, keywords=["Error", "Exception", "Failure"]),
]
