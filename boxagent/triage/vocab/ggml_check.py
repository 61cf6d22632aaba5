"""llama.cpp's ggml CUDA backend checking a CUDA call: its own line around cudaGetErrorString.

Older ggml (the llama-cpp-python wheels text-generation-webui and others ship) prints
`CUDA error N at FILE:LINE: <cudaGetErrorString>`; code 2's string is "out of memory", which no
Python exception wraps, so no PyTorch row reads it. Read after a field case (a llama.cpp model
load in text-generation-webui) ended with it and no row named it."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

GGML_CHECK = ("llama.cpp ggml-cuda.cu (2023-2024) CUDA_CHECK: fprintf(stderr, \"\\nCUDA error %d at "
              "%s:%d: %s\\n\", err_, __FILE__, __LINE__, cudaGetErrorString(err_)); CUDA Runtime "
              "12.4 cudaGetErrorString(cudaErrorMemoryAllocation = 2) = \"out of memory\"")

ROWS = found_via(
    ("wave5/cases/cuda_oom/textgen-webui-4890-llama-cpp-cuda-error-2-out-of-memory.log",),
    rx("cuda_oom", r"CUDA error [0-9]+ at \S+:[0-9]+: out of memory",
       "CUDA error 2 at /tmp/llama.cpp/ggml-cuda.cu:6246: out of memory", GGML_CHECK,
       ("CUDA error ",), "ggml"),
)
