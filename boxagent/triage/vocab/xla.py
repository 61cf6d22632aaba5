"""XLA (JAX, TensorFlow) compiling kernels at run time, and the LLVM NVPTX backend inside it.

XLA runs ptxas on the PTX it generates; a ptxas that does not know the GPU's compute
capability makes XLA warn and fall back to the driver's JIT, which then fails to load the
kernels ("named symbol not found", a fatal check). The warning is the cause: the CUDA
toolchain in the environment predates the GPU. XLA also relays NCCL's result through its
own status ("NCCL operation ncclCommInitRank(...) failed: unhandled cuda error")."""
from __future__ import annotations

from boxagent.triage.vocab.gpuarch import _ARCH
from boxagent.triage.vocab.table import found_via, rx

ASM = ("XLA 2023-09 xla/stream_executor/gpu/asm_compiler.cc WarnIfBadPtxasVersion / "
       "LogPtxasTooOld (\"Falling back to the CUDA driver for PTX compilation; ptxas does not "
       "support CC %d.%d\"), xla/stream_executor/gpu/redzone_allocator.cc (\"ptxas %s too old. "
       "Falling back to the driver to compile.\"); TensorFlow 2.11 same files under "
       "tensorflow/compiler/xla/stream_executor")
NVPTX = ("LLVM 20 llvm/lib/Target/NVPTX/NVPTXSubtarget.cpp (report_fatal_error: \"PTX version "
         "{0}.{1} does not support target '{2}'. Minimum required PTX version is {3}.{4}. Either "
         "remove the PTX version to use the default, or increase it to at least {3}.{4}.\")")
XLA_NCCL = ("XLA 2023-09 xla/service/gpu/nccl_utils.cc XLA_CUDA_STATUS / ToStatus (\"NCCL operation "
            "%s failed: %s\" with ncclGetErrorString's words)")

# the same remedy as the other run-time compilers' (gpuarch.py): one rule for the class
_A = "torch_arch_mismatch"

ROWS = found_via(
    ("wave4/cases/torch_arch_mismatch/b-jax-13570-rtx4080-ptxas-no-cc89.log",
     "wave4/cases/torch_arch_mismatch/b-xla-5932-h800-ptxas-no-cc90.log"),
    rx(_A, r"ptxas does not support CC [0-9]+\.[0-9]+",
       "Falling back to the CUDA driver for PTX compilation; ptxas does not support CC 10.0",
       ASM, ("ptxas does not support CC",), "xla")._replace(fix=_ARCH),
    rx(_A, r"ptxas [^ ]* ?too old\. Falling back to the driver",
       "UNIMPLEMENTED: ptxas /usr/local/cuda/bin/ptxas too old. Falling back to the driver to "
       "compile.", ASM, ("too old. Falling back to the driver",), "xla")._replace(fix=_ARCH),
) + found_via(
    ("wave4/cases/torch_arch_mismatch/b-xla-47982-sm107a-ptx-version.log",),
    rx(_A, r"PTX version [0-9]+\.[0-9]+ does not support target 'sm_[0-9]+[af]?'",
       "LLVM ERROR: PTX version 8.4 does not support target 'sm_120a'. Minimum required PTX "
       "version is 8.7. Either remove the PTX version to use the default, or increase it to at "
       "least 8.7.", NVPTX, (" does not support target 'sm_",), "llvm")._replace(fix=_ARCH),
) + found_via(
    ("wave4/cases/nccl/b-jax-17399-pmap-nccl-comminitrank-unhandled-cuda.log",),
    rx("nccl", r"NCCL operation nccl[A-Za-z]+\(.*\) failed: (unhandled (cuda|system) error|"
       r"internal error|remote process exited or there was a network error|invalid usage)",
       "INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:297: NCCL operation "
       "ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled system error",
       XLA_NCCL, ("NCCL operation nccl",), "xla"),
)
