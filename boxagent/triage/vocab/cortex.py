"""Cortex (Jan's local model server) checking the CUDA version before it runs a TensorRT-LLM
engine. The version it checks is the one `nvidia-smi` reports: the driver's, so a refusal means
the driver is too old for the engine's CUDA, whatever toolkit is installed."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

CORTEX = ("janhq/cortex (cortex-js) 0.5 src/utils/model-check.ts checkModelCompatibility (\"CUDA "
          "version ${version} is not compatible with TensorRT-LLM models. Required version: "
          "${MIN_CUDA_VERSION}\"), the version read by src/utils/cuda.ts getCudaVersion from "
          "nvidia-smi")

ROWS = found_via(
    ("wave4/cases/driver_too_old/cortex-1019-trtllm-cuda-12-3-not-compatible-required-12-4.log",),
    rx("driver_too_old", r"CUDA version [0-9.]+ is not compatible with TensorRT-LLM models",
       "CUDA version 12.2 is not compatible with TensorRT-LLM models. Required version: 12.4",
       CORTEX, ("is not compatible with TensorRT-LLM models",), "cortex"),
)
