"""Runner-ups that mean something: when a cause is not certain, the class a person would weigh
against it, and the check that tells the two apart.

`nonzero_exit` tells a person nothing, so it is a runner-up only where nothing else is
plausible. RUNNER_UPS is the table, as data: (the class decided, the words of the deciding
line or the lines right after it that make another class plausible, that class, the check a
person runs). The first row that applies wins; a cause no row fits keeps no runner-up rather
than a meaningless one.

  a load that failed ("Error(s) in loading", "Load model from … failed", EOF)  truncated_checkpoint
  a write that failed ("cannot be opened", EIO, "Unable to create file")        disk_full
  pip's "(from versions: none)": no such package, or no index reachable          network_transient
  an exception carrying NaN/inf                                                  divergence
  CUDA version words (libcudart, "CUDA version", "compiled with CUDA")           driver_too_old
  architecture words (sm_XX, compute capability, "no kernel image")              torch_arch_mismatch
  host-memory or GPU-memory words                                                cgroup_oom / cuda_oom
  a launcher's report, a native crash or a bare exit code (nonzero_exit)        code_error
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

_LOAD = (r"[Ee]rror\(s\) in loading|[Ff]ailed to load|Load model from .* failed|[Uu]nable to "
         r"(open|read|load) (table |model |checkpoint |weights )?file|[Cc]annot load|"
         r"DataLossError|not an sstable|EOFError|[Uu]nexpected end of|invalid load key|"
         r"[Cc]orrupt|deserializ|[Ff]ailed to (read|parse)|unpickl")
_WRITE = (r"cannot be opened|[Ii]nput/output error|\[Errno 5\]|[Uu]nable to (create|write|save)|"
          r"[Ff]ailed to (write|save|create|flush)|[Ee]rror writing|write failed|short write|"
          r"[Cc]ould not (write|save|create)")
_PIP_NONE = r"from versions: none\)|No matching distribution found"
_NAN = r"(^|[^A-Za-z_])(nan|NaN|NAN|-?inf)([^A-Za-z_]|$)"
_CUDA_SKEW = (r"libcudart|libcublas|libcudnn|CUDA version|compiled with CUDA|cuda[ -]?runtime|"
              r"CUDA driver|cudaGetDeviceCount|CUDA initialization")
_ARCH = r"sm_[0-9]+|compute capability|no kernel image|CUDA arch|gpu-architecture"
_HOST_MEM = r"MemoryError|[Cc]annot allocate memory|bad_alloc|std::length_error"
_GPU_MEM = r"CUDA out of memory|cudaMalloc|CUBLAS_STATUS_ALLOC|OutOfMemory"
_REPORT = r"launcher reports its child failed"
_PLAIN = r"exited with code|the stage failed"

# (class decided, words, runner-up, tell_apart)
RUNNER_UPS: Tuple[Tuple[str, str, str, str], ...] = (
    ("code_error", _PIP_NONE, "network_transient",
     "`pip download PKG==VER --no-deps -d /tmp/x` with the same index: '(from versions: none)' "
     "for a package that exists means the index was not reachable (proxy, offline box, mirror)"),
    ("code_error", _NAN, "divergence",
     "the values it carries are NaN/inf: print the loss and the inputs a few steps before; NaN "
     "there means the run diverged, not the check"),
    ("code_error", _WRITE, "disk_full",
     "`df -h` and `df -i` on the path it wrote: 100% means the disk; free space means the path, "
     "its permissions or the file system"),
    ("code_error", _LOAD, "truncated_checkpoint",
     "`ls -l` the file against the size it should have (or `sha256sum` against the source's): "
     "shorter means a cut download or write; the same size means a format or version mismatch"),
    ("code_error", _ARCH, "torch_arch_mismatch",
     "`nvidia-smi --query-gpu=name,compute_cap --format=csv` against `python -c \"import torch; "
     "print(torch.cuda.get_arch_list())\"`: a GPU newer than the list means the build"),
    ("code_error", _CUDA_SKEW, "driver_too_old",
     "`nvidia-smi` (the CUDA version the driver supports, top right) against `python -c "
     "\"import torch; print(torch.version.cuda)\"`: a toolkit newer than the driver means the driver"),
    ("code_error", _GPU_MEM, "cuda_oom",
     "`nvidia-smi` while it runs: memory at the limit means the GPU"),
    ("code_error", _HOST_MEM, "cgroup_oom",
     "`free -g` and `dmesg -T | grep -i oom`: host RAM at its limit means memory, not the code"),
    ("nonzero_exit", r"died unexpectedly|WorkerCrashedError|ActorDiedError|RayActorError",
     "cgroup_oom", "`dmesg -T | grep -i -e oom -e killed` on the worker's node and Ray's "
     "`raylet.out` ('killed due to memory pressure'): an OOM kill there means memory"),
    ("nonzero_exit", r"crashed with SIG|native crash|access violation|0xC0000005",
     "code_error", "rerun with PYTHONFAULTHANDLER=1 (or `python -X faulthandler`) to see the frame; "
     "`dmesg -T | tail` names the library that crashed (an extension, libcuda, libnccl)"),
    ("nonzero_exit", _REPORT, "code_error",
     "the child's own error went where this log does not reach: read the failed rank's output "
     "(`torchrun --redirects 3 --tee 3`, the launcher's per-rank log files) or its stderr"),
    ("nonzero_exit", _PLAIN, "code_error",
     "read the log's last lines (`rgt-client logs`): an error in words no rule knows is most often "
     "the job's own; a log that stops without one means its stderr went elsewhere"),
)
_ROWS = tuple((c, re.compile(w), r, t) for c, w, r, t in RUNNER_UPS)
_AFTER = 3          # lines after the deciding one that still detail it


def pick(cls: str, text: str, facts: Optional[Dict[str, Any]] = None) -> Optional[Tuple[str, str]]:
    """(runner-up, tell_apart) for a cause of class `cls` decided by `text` (with the lines
    that follow it in the log), or None when no other class is plausible."""
    seen = text + "\n" + detail(text, facts)
    for c, words, runner, tell in _ROWS:
        if c == cls and words.search(seen):
            return runner, tell
    return None


def detail(text: str, facts: Optional[Dict[str, Any]]) -> str:
    """The lines right after `text` in the log's last lines ("" when it is not there)."""
    lines: List[str] = [str(x) for x in (facts or {}).get("last_lines") or []]
    target = text.rstrip()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].rstrip() == target:
            return "\n".join(lines[i + 1:i + 1 + _AFTER])
    return ""
