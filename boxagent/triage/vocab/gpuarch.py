"""A GPU newer than the compiler that builds kernels for it at run time: ptxas, nvcc, NVRTC
and the compilers that call them (Triton, torch.compile/Inductor, CuPy, JAX). Each names the
architecture it does not know; the row matches every compute capability NVIDIA documents
(sm_50 ... sm_90a, sm_100/100a/100f, sm_101, sm_103, sm_110, sm_120/120a, sm_121) and any
later one, since the pattern reads the number, not a list.

A PTX the DRIVER cannot JIT (`the provided PTX was compiled with an unsupported toolchain`)
is the other direction: the driver is older than the toolkit that wrote the PTX; ptxas's
"Unsupported .version" below is a standalone ptxas (it names the file it read), while the
driver's own JIT saying it is ptxjit.py's."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

PTXAS = ("CUDA Toolkit 12.9 ptxas (\"ptxas fatal   : Value 'sm_XX' is not defined for option "
         "'gpu-name'\"); CUDA C Programming Guide 12.9, Compute Capabilities table")
NVCC = "CUDA Toolkit 12.9 nvcc (\"nvcc fatal   : Unsupported gpu architecture 'compute_XX'\")"
NVRTC = ("CUDA Toolkit 12.9 NVRTC nvrtc.h NVRTC_ERROR_INVALID_OPTION, program log \"nvrtc: error: "
         "invalid value for --gpu-architecture (-arch)\"")
PTXVER = "CUDA Toolkit 12.9 ptxas (\"Unsupported .version X.Y; current version is 'A.B'\"), PTX ISA 8.8 release notes"
TRITON = "Triton 3.3 python/triton/backends/nvidia/compiler.py (PTXASError, ptx_get_version)"
FA = ("flash-attention 2.6 csrc/flash_attn/flash_api.cpp (TORCH_CHECK(is_sm8x || is_sm90, "
      "\"FlashAttention only supports Ampere GPUs or newer.\"))")
TRITON_FP8 = ("Triton 3.0 python/triton/language/semantic.py (\"type fp8e4nv not supported in this "
              "architecture. The supported fp8 dtypes are ...\")")
HIP = ("ROCm 6.1 HIP runtime hip_code_object.cpp / hip_fatbin.cpp (\"hipErrorNoBinaryForGpu: Unable to "
       "find code object for all current devices!\")")
MPS = "PyTorch 2.4 aten/src/ATen/mps/MPSAllocator.mm (\"MPS backend out of memory (MPS allocated: %s, ...)\")"
TE = ("Transformer Engine 1.9 transformer_engine/pytorch/fp8.py check_fp8_support (\"Device compute "
      "capability 8.9 or higher required for FP8 execution.\")")
RT = "CUDA Runtime API 12.9 driver_types.h cudaErrorUnsupportedPtxVersion / CUDA_ERROR_UNSUPPORTED_PTX_VERSION"

OLD_GPU_FIX = ("this GPU is older than the kernel library needs (FlashAttention and bfloat16: Ampere "
               "sm_80+; FP8: sm_89+): rent a GPU that has it, or turn the feature off "
               "(attn_implementation=\"sdpa\", float16 / `--dtype half` instead of bfloat16 or FP8)")
_ARCH = "the CUDA toolchain that compiles kernels at run time is older than this GPU: use a " \
    "CUDA/Triton/torch build that knows its architecture (Blackwell sm_100/sm_120 need CUDA " \
    "12.8+), or point TRITON_PTXAS_PATH at a newer ptxas"

ROWS = (
    rx("torch_arch_mismatch", r"Value '(sm|compute)_[0-9]+[af]?' is not defined for option "
       r"'gpu-(name|architecture)'",
       "ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'", PTXAS,
       ("is not defined for option 'gpu-",), "ptxas")._replace(fix=_ARCH),
    rx("torch_arch_mismatch", r"[Uu]nsupported gpu architecture '(sm|compute)_[0-9]+[af]?'",
       "nvcc fatal   : Unsupported gpu architecture 'compute_121'", NVCC,
       ("nsupported gpu architecture '",), "nvcc")._replace(fix=_ARCH),
    lit("torch_arch_mismatch", "invalid value for --gpu-architecture",
        "nvrtc: error: invalid value for --gpu-architecture (-arch)", NVRTC,
        "nvrtc")._replace(fix=_ARCH),
    rx("torch_arch_mismatch", r"PTX \.version [0-9.]+ does not support \.target sm_[0-9]+[af]?",
       "ptxas /tmp/tmpx.ptx, line 5; error   : PTX .version 8.4 does not support .target sm_120a",
       PTXVER, (" does not support .target sm_",), "ptxas")._replace(fix=_ARCH),
    rx("torch_arch_mismatch", r"[Uu]nsupported \.version [0-9.]+; current version is",
       "ptxas /tmp/tmpx.ptx, line 5; fatal   : Unsupported .version 8.7; current version is '8.4'",
       PTXVER, ("nsupported .version ",), "ptxas")._replace(fix=_ARCH),
    # Apple's GPU (MPS) running out of its memory is device memory too
    lit("cuda_oom", "MPS backend out of memory",
        "RuntimeError: MPS backend out of memory (MPS allocated: 17.78 GB, other allocations: 1.06 "
        "GB, max allowed: 18.13 GB). Tried to allocate 256.00 MB on private pool.", MPS, "torch"),
    # ROCm's "no kernel image": the build has no code object for this GPU's gfx target
    lit("torch_arch_mismatch", "hipErrorNoBinaryForGpu",
        "\"hipErrorNoBinaryForGpu: Unable to find code object for all current devices!\"", HIP,
        "hip")._replace(fix=_ARCH),
    # a GPU too OLD for a kernel library's build
    rx("torch_arch_mismatch", r"[Dd]evice compute capability [0-9.]+ or higher required for FP8",
       "AssertionError: Device compute capability 8.9 or higher required for FP8 execution.", TE,
       ("compute capability ",), "transformer-engine")._replace(fix=OLD_GPU_FIX),
    lit("torch_arch_mismatch", "FlashAttention only supports Ampere GPUs or newer",
        "RuntimeError: FlashAttention only supports Ampere GPUs or newer.", FA,
        "flash-attn")._replace(fix=OLD_GPU_FIX),
    rx("torch_arch_mismatch", r"type fp8e4(nv|b15) not supported in this architecture",
       "ValueError: type fp8e4nv not supported in this architecture. The supported fp8 dtypes are "
       "('fp8e4b15', 'fp8e5')", TRITON_FP8, ("not supported in this architecture",),
       "triton")._replace(fix=OLD_GPU_FIX),
    lit("driver_too_old", "the provided PTX was compiled with an unsupported toolchain",
        "RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.",
        RT, "cuda"),
    lit("driver_too_old", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        "triton.runtime.errors: CUDA_ERROR_UNSUPPORTED_PTX_VERSION", RT, "cuda"),
    lit("driver_too_old", "cudaErrorUnsupportedPtxVersion",
        "cudaErrorUnsupportedPtxVersion: the provided PTX was compiled with an unsupported toolchain.",
        RT, "cuda"),
)
