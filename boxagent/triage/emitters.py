"""Who said a line: the emitter decides what its generic words mean.

"Out of memory" from the kernel's OOM killer, from numpy or from a CPU allocator is host RAM,
not GPU memory; "Connection refused" from NCCL's socket transport or from a Slurm daemon is
not a download that failed. A rule matches words; this table says whose words they are.

Two tables, both data:
  EMITTERS  a signature found in the line -> the emitter's name and its domain
            (host_memory, gpu_memory, collective, scheduler, download), with the source the
            wording comes from;
  WORDS     a family of generic words (memory, network) -> the class each domain gives them.

reread(hit) returns the hit with the class its emitter gives its words, or the hit unchanged
(same object) when the emitter is unknown or agrees. A changed hit keeps what the rule said
in `was` and names its emitter in `emitter`.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

Hit = Dict[str, Any]

# (signature, emitter, domain, source of the wording). First match wins: the more specific
# signature (a CPU device inside a TF OOM line) comes before the generic one.
EMITTERS: Tuple[Tuple[str, str, str, str], ...] = (
    # the device-memory names of the GPU APIs come first: PyOpenCL raises
    # them as `pyopencl._cl.MemoryError`, and RAPIDS' RMM a std::bad_alloc carrying CUDA's
    # cudaErrorMemoryAllocation or its pool's limit, which Python shows as MemoryError
    (r"MEM_OBJECT_ALLOCATION_FAILURE|OUT_OF_DEVICE_MEMORY|OutOfDeviceMemory|"
     r"cudaErrorMemoryAllocation|RMM failure at|out_of_memory: CUDA error at",
     "a GPU API's device allocator", "gpu_memory",
     "Khronos OpenCL 3.0 CL/cl.h CL_MEM_OBJECT_ALLOCATION_FAILURE; Vulkan 1.3 "
     "VK_ERROR_OUT_OF_DEVICE_MEMORY; Level Zero 1.9 ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY; "
     "CUDA Runtime 12.4 cudaErrorMemoryAllocation; RMM 24.06 include/rmm/detail/error.hpp"),
    # a CUDA error check naming CUDA or the call that failed: PyCUDA raises the driver's
    # CUDA_ERROR_OUT_OF_MEMORY as `pycuda._driver.MemoryError: cuMemAlloc failed: out of
    # memory`, a C++ code throws `CUDA::error`, a macro prints `CUDA Error:` and its fields
    (r"CUDA::error|CUDA [Ee]rror|Cuda [Ee]rror|GPUassert|[^A-Za-z]cu[A-Z][a-z]+[A-Z][A-Za-z0-9_]* "
     r"failed: ", "a CUDA error check's report", "gpu_memory",
     "PyCUDA 2024.1 src/cpp/cuda.hpp error::make_message (\"%s failed: %s\", MemoryError for "
     "CUDA_ERROR_OUT_OF_MEMORY); the gpuErrchk macro (\"GPUassert: %s\"); GPUMD error.cuh "
     "(\"CUDA Error:\")"),
    # host RAM
    (r"Out of memory: Kill|oom-kill:|oom_kill_process|Memory cgroup out of memory|"
     r"invoked oom-killer", "kernel OOM killer", "host_memory",
     "linux mm/oom_kill.c (dump_header, oom_kill_process messages)"),
    (r"\[Errno 12\]|[Cc]annot allocate memory|ENOMEM", "errno ENOMEM", "host_memory",
     "errno(3): ENOMEM 12 'Cannot allocate memory'"),
    (r"(^|[^A-Za-z])(numpy\.core\._exceptions\.)?_?ArrayMemoryError|Unable to allocate [0-9.]+ "
     r"[KMGTP]i?B for an array", "numpy", "host_memory",
     "numpy/core/_exceptions.py _ArrayMemoryError ('Unable to allocate %s for an array')"),
    (r"DefaultCPUAllocator|alloc_cpu\.cpp|CPUAllocator", "torch CPU allocator", "host_memory",
     "pytorch c10/core/impl/alloc_cpu.cpp ('DefaultCPUAllocator: can't allocate memory')"),
    (r"std::bad_alloc", "C++ operator new", "host_memory",
     "ISO C++ [new.badalloc]: std::bad_alloc on a failed heap allocation"),
    (r"DataLoader worker \(pid", "torch DataLoader worker", "host_memory",
     "pytorch torch/utils/data/_utils/signal_handling.py ('DataLoader worker (pid %d) is "
     "killed by signal')"),
    (r"ray\.exceptions\.OutOfMemoryError|node running low on memory|Memory on the node",
     "Ray memory monitor", "host_memory",
     "ray python/ray/exceptions.py OutOfMemoryError ('Task was killed due to the node running "
     "low on memory')"),
    (r"device:CPU:[0-9]|by allocator (cpu|mklcpu)|allocator=cpu", "TensorFlow CPU allocator",
     "host_memory", "tensorflow core/framework/allocator ('OOM when allocating tensor ... on "
     "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu')"),
    (r"insufficient shared memory \(shm\)|out of shared memory", "/dev/shm (shared memory)",
     "host_memory", "pytorch torch/csrc/DataLoader.cpp, torch/utils/data/dataloader.py"),
    (r"java\.lang\.OutOfMemoryError|JavaScript heap out of memory|cannot allocate vector of size|"
     r"memory allocation of [0-9]+ bytes failed|runtime: out of memory", "a language runtime's heap",
     "host_memory", "OpenJDK 21 java.lang.OutOfMemoryError; V8 12.4 heap limit; R 4.4 memory.c; "
     "Rust 1.79 alloc error hook; Go 1.22 runtime"),
    (r"(^|[^A-Za-z])MemoryError(:|$)", "Python MemoryError", "host_memory",
     "python docs library/exceptions.html#MemoryError"),
    # GPU memory
    (r"CUDA out of memory|cuda\.OutOfMemoryError|device:GPU:[0-9]|GPU_[0-9]+_bfc|"
     r"cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED|HIP out of memory",
     "CUDA allocator", "gpu_memory",
     "CUDA runtime API cudaErrorMemoryAllocation; pytorch c10/cuda/CUDACachingAllocator.cpp"),
    # a library checking a CUDA call's result and printing the runtime's or the driver's own
    # words for it (caffe2's `error == cudaSuccess ... out of memory`, CuPy/JAX/Julia's
    # CUDA_ERROR_OUT_OF_MEMORY, a failed cuMemAlloc/cudaMalloc): the GPU's memory, whoever
    # relays it
    # torch's caching allocator refusing past a memory fraction ("Allocation on device 0 would
    # exceed allowed memory. (out of memory)" with its "Free (according to CUDA)" table), as
    # a server relaying it quotes it
    (r"Allocation on device [0-9]+ would exceed|Free \(according to CUDA\)",
     "torch CUDA caching allocator", "gpu_memory",
     "pytorch 2.1 c10/cuda/CUDACachingAllocator.cpp (memory-fraction refusal message)"),
    (r"== ?cudaSuccess|CUDA_ERROR_OUT_OF_MEMORY|cuMemAlloc|cudaMalloc(Async|Managed)?[^A-Za-z]",
     "a CUDA call's result", "gpu_memory",
     "CUDA runtime API cudaGetErrorString(cudaErrorMemoryAllocation) = 'out of memory'; CUDA "
     "driver API CUDA_ERROR_OUT_OF_MEMORY (cuMemAlloc)"),
    # collectives (NCCL's transports, c10d, gloo)
    (r"NCCL WARN|NCCL INFO|NET/(Socket|IB|Plugin)|[^A-Za-z]socket\.cc|proxy\.cc|"
     r"ProcessGroupNCCL|ProcessGroupGloo|\[c10d\]|c10d|TCPStore|DistNetworkError|"
     r"DistStoreError|gloo/transport|torch\.distributed|rendezvous", "NCCL/c10d transport",
     "collective", "NCCL src/misc/socket.cc WARN lines; pytorch torch/csrc/distributed/c10d"),
    # Slurm's daemons and clients
    (r"^(slurmstepd|srun|sbatch|salloc|slurmd|scontrol|squeue)(-[^:]*)?: |slurm_[a-z_]+ error|"
     r"slurmctld", "Slurm", "scheduler",
     "slurm src/common/log.c ('slurmstepd: error: ...', 'srun: error: ...')"),
    # downloaders
    (r"huggingface_hub|requests\.exceptions|urllib3|httpx\.|aiohttp\.|urllib\.error|"
     r"^(pip|conda|wget|curl)[:\s]|Downloading|hf_hub_download|snapshot_download",
     "a downloader", "download",
     "requests/urllib3/httpx/aiohttp exception module names; huggingface_hub"),
)

# The classes a rule gives these words, and the class each domain gives them instead.
WORDS: Dict[str, Tuple[str, Tuple[str, ...], Dict[str, str]]] = {
    # Go and libuv print the errno words lower-case (spelling.py): both first letters
    "memory": (r"[Oo]ut of memory|OutOfMemory|[Cc]annot allocate memory|MemoryError|"
               r"can't allocate memory|not enough memory|bad_alloc|OOM when allocating|"
               r"Unable to allocate|low on memory|killed by signal: Killed",
               ("cuda_oom", "cgroup_oom", "code_error"),
               {"host_memory": "cgroup_oom", "gpu_memory": "cuda_oom"}),
    "network": (r"[Cc]onnection refused|[Cc]onnection reset|[Cc]onnection timed out|"
                r"[Nn]o route to host|[Nn]etwork is unreachable|Connection(Reset|Refused|Aborted)?Error|"
                r"Connection closed by peer|[Bb]roken pipe|timed out|i/o timeout|"
                r"[Tt]ransport endpoint is not connected",
                ("network_transient", "nccl", "code_error"),
                {"collective": "nccl", "scheduler": "node_failure",
                 "download": "network_transient"}),
}

_EMITTERS = tuple((re.compile(sig), name, domain) for sig, name, domain, _ in EMITTERS)
_WORDS = dict((fam, (re.compile(rx), classes, by_domain))
              for fam, (rx, classes, by_domain) in WORDS.items())


def emitter_of(line: str) -> Optional[Tuple[str, str]]:
    """(emitter name, domain) of a line, or None."""
    for rx, name, domain in _EMITTERS:
        if rx.search(line):
            return name, domain
    return None


def reread(h: Hit, detail: str = "") -> Hit:
    """The hit as its emitter reads it: a new dict when the class changes, else `h`.
    `detail`: the lines that continue the hit's message (TensorFlow's "Graph execution
    error:" is followed by "OOM when allocating ... on device:GPU:0"), read with it."""
    cls = h.get("class")
    if h.get("source", "builtin") != "builtin" or h.get("tag") in ("traceback", "chain",
                                                                  "ignored", "thread"):
        return h
    line = str(h.get("line") or "") + (" " + detail if detail else "")
    for fam, (rx, classes, by_domain) in _WORDS.items():
        if cls not in classes or not rx.search(line):
            continue
        who = emitter_of(line)
        if who is None or who[1] not in by_domain:
            continue
        new = by_domain[who[1]]
        if new == cls:
            return h
        out = dict(h, was=cls, emitter=who[0])
        if detail:
            out["detail"] = detail
        out["class"] = new
        out.pop("remediation", None)
        out.pop("retryable", None)
        if out.get("tag") == "crash":           # std::bad_alloc: the error, not how it died
            out.pop("tag")
        return out
    return h


def domain_words(line: str) -> Optional[str]:
    """The family of generic words a line holds (memory, network), for calibration: words
    whose meaning depends on who said them."""
    for fam, (rx, _, _) in _WORDS.items():
        if rx.search(line):
            return fam
    return None
