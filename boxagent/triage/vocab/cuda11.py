"""CUDA's error strings as CUDA 11.x worded them where 12.x words them otherwise (the cuda
table holds the 12.x strings): cuGetErrorString / cudaGetErrorString."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, lit

CUDA11 = ("CUDA 11.x driver API cuGetErrorString(CUDA_ERROR_NVLINK_UNCORRECTABLE = 220) and runtime "
          "cudaGetErrorString(cudaErrorNvlinkUncorrectable): \"uncorrectable NVLink error detected "
          "during the execution\" (the same table as reproduced by ZLUDA/hipify-style error maps)")

ROWS = found_via(
    ("cases/gpu_hardware/pytorch-58155-uncorrectable-nvlink-terminate.log",),
    lit("gpu_hardware", "uncorrectable NVLink error detected during the execution",
        "RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution",
        CUDA11, "cuda"),
)
