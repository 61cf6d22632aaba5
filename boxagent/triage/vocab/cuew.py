"""Blender Cycles reporting the CUDA driver's result in cuew's words (the CUDA Extension
Wrangler's cuewErrorString), in its two formats: `<words> in <call> (<file>:<line>)` from
cuda_assert (or `in CUDA queue enqueue`), and `Failed to load CUDA kernel from '<file>'
(<words>)`. Each reads as its CUresult does: "Unsupported PTX version" a driver older than the
toolkit that built the kernels, "No binary for GPU" (and Cycles' own "CUDA binary kernel for
this graphics card compute capability (X.Y) not found") no kernel for this GPU's architecture,
"Uncorrectable ECC error detected" the GPU's memory failing; "Out of memory in <call>" is
media.py's. Read after a field case (a Blender render farm on an A100 whose driver was older
than the kernels) ended with the first and no row named it."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

CUEW = ("Blender 4.1 extern/cuew/src/cuew.c cuewErrorString (CUDA_ERROR_UNSUPPORTED_PTX_VERSION "
        "\"Unsupported PTX version\", CUDA_ERROR_NO_BINARY_FOR_GPU \"No binary for GPU\", "
        "CUDA_ERROR_ECC_UNCORRECTABLE \"Uncorrectable ECC error detected\"), "
        "intern/cycles/device/cuda/device_impl.cpp (cuda_assert \"%s in %s (%s:%d)\", \"Failed to "
        "load CUDA kernel from '%s' (%s)\", \"CUDA binary kernel for this graphics card compute "
        "capability (%d.%d) not found.\")")

ROWS = found_via(
    ("wave6/cases/driver_too_old/e-objaverse-rendering-5-cycles-kernel-unsupported-ptx-version.log",),
    rx("driver_too_old", r"Unsupported PTX version in (CUDA queue enqueue|cu[A-Z])|Failed to load "
       r"CUDA kernel from .* \(Unsupported PTX version\)",
       "Failed to load CUDA kernel from '/opt/blender/4.1/scripts/addons/cycles/lib/"
       "kernel_compute_75.ptx' (Unsupported PTX version)", CUEW,
       ("Unsupported PTX version",), "cycles"),
    rx("torch_arch_mismatch", r"No binary for GPU in (CUDA queue enqueue|cu[A-Z])|Failed to load CUDA "
       r"kernel from .* \(No binary for GPU\)|CUDA binary kernel for this graphics card compute "
       r"capability \([0-9.]+\) not found",
       "CUDA binary kernel for this graphics card compute capability (3.0) not found.", CUEW,
       ("No binary for GPU", "CUDA binary kernel for this graphics card"), "cycles"),
    rx("gpu_hardware", r"Uncorrectable ECC error detected in (CUDA queue enqueue|cu[A-Z])",
       "Uncorrectable ECC error detected in cuCtxSynchronize() (intern/cycles/device/cuda/queue.cpp:"
       "97)", CUEW, ("Uncorrectable ECC error detected in ",), "cycles"),
)
