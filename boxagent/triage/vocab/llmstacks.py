"""LLM serving and fine-tuning stacks' own words for the GPU memory they could not get:
SGLang's memory pool sizing, vLLM's start-up check of the memory another process holds, and
LMDeploy's TurboMind engine (C++: its CUDA check throws "[TM][ERROR] CUDA runtime error: " with
the runtime's error string; FasterTransformer, which it grew from, says "[FT][ERROR]").

Both are device memory by another name: SGLang sizes its KV pool from --mem-fraction-static
and refuses when no token fits; vLLM refuses to start when the free memory on the device is
below what gpu_memory_utilization asks for (often another process on the GPU).
"""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

SGLANG = ("SGLang 0.4 python/sglang/srt/model_executor/model_runner.py init_memory_pool "
          "(RuntimeError(\"Not enough memory. Please try to increase --mem-fraction-static.\"))")
VLLM = ("vLLM 0.9 vllm/v1/worker/gpu_worker.py init_device / vllm/utils request_memory "
        "(\"Free memory on device (%s/%s GiB) on startup is less than desired GPU memory "
        "utilization (%s, %s GiB). Decrease GPU memory utilization or reduce GPU memory used by "
        "other processes.\")")
TM = ("LMDeploy 0.6 src/turbomind/utils/cuda_utils.h check() (std::runtime_error(\"[TM][ERROR] CUDA "
      "runtime error: \" + _cudaGetErrorEnum(result) + \" \" + file + \":\" + line)); FasterTransformer 5.3 "
      "src/fastertransformer/utils/cuda_utils.h (\"[FT][ERROR] CUDA runtime error: \")")

ROWS = (
    rx("cuda_oom", r"\[(TM|FT)\]\[ERROR\] CUDA runtime error: out of memory",
       "[TM][ERROR] CUDA runtime error: out of memory /opt/lmdeploy/src/turbomind/core/allocator.cc:49",
       TM, ("][ERROR] CUDA runtime error: out of memory",), "turbomind"),
    lit("cuda_oom", "Not enough memory. Please try to increase --mem-fraction-static",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", SGLANG,
        "sglang"),
    lit("cuda_oom", "on startup is less than desired GPU memory utilization",
        "ValueError: Free memory on device (12.18/23.56 GiB) on startup is less than desired GPU "
        "memory utilization (0.92, 21.67 GiB). Decrease GPU memory utilization or reduce GPU "
        "memory used by other processes.", VLLM, "vllm"),
)
