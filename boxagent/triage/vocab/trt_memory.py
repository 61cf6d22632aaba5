"""TensorRT and TensorRT-LLM running out of GPU memory, in their own words: TensorRT's logger
while it builds or deserializes an engine, and TensorRT-LLM's CUDA check around its
allocations (cudaMalloc/cudaMallocAsync in its runtime buffers), neither of which says "CUDA out
of memory" the way torch does."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

TRT = ("TensorRT 9.1 ILogger errors (\"Error Code 2: OutOfMemory (no further information)\", "
       "\"Requested amount of GPU memory (%d bytes) could not be allocated. There may not be "
       "enough free memory for allocation to succeed.\"), TensorRT docs, \"Troubleshooting: "
       "out of memory\"")
TRTLLM = ("TensorRT-LLM 0.7 cpp/include/tensorrt_llm/common/cudaUtils.h check_cuda_error / "
          "tllmException (\"[TensorRT-LLM][ERROR] CUDA runtime error in %s: %s\" with "
          "cudaGetErrorString: \"out of memory\")")

ROWS = found_via(
    ("wave4/cases/cuda_oom/trtllm-346-llama13b-build-engine-outofmemory.log",),
    rx("cuda_oom", r"Requested amount of GPU memory \([0-9]+ bytes\) could not be allocated|"
       r"Error Code [0-9]+: OutOfMemory",
       "[TRT] [W] Requested amount of GPU memory (1073741824 bytes) could not be allocated. There "
       "may not be enough free memory for allocation to succeed.", TRT,
       ("Requested amount of GPU memory", ": OutOfMemory"), "tensorrt"),
) + found_via(
    ("wave4/cases/cuda_oom/trtllm-backend-281-model-load-cudamallocasync-oom.log",),
    rx("cuda_oom", r"CUDA runtime error in [^ ]*cuda[A-Za-z]+\(.*\): out of memory",
       "[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMalloc(ptr, n): out of memory "
       "(/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)", TRTLLM,
       ("CUDA runtime error in ",), "tensorrt-llm"),
)
