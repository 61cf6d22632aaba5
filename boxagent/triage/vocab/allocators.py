"""Device-memory exhaustion as the allocators of frameworks other than torch's own caching
allocator say it: PaddlePaddle's (1.x and 2.x), CuPy's memory pool (also under Chainer, whose
trainer prints the message without the class name), vLLM's KV-cache sizing at engine start,
Caffe2's CUDA_ENFORCE, MXNet's pooled allocator, and PyTorch's memory_summary() table that
fairseq prints after an OOM. Each row names the field cases whose miss led to its source
(found_via); MXNet's was read without a case missing it."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, lit, rx

PADDLE2 = ("PaddlePaddle 2.x paddle/fluid/memory/allocation/cuda_allocator.cc, "
           "cuda_virtual_mem_allocator.cc, stream_safe_cuda_allocator.cc "
           "(PADDLE_THROW_BAD_ALLOC(ResourceExhausted(\"Out of memory error on GPU %d. Cannot "
           "allocate %s memory on GPU %d, ...\")))")
PADDLE1 = ("PaddlePaddle 1.x paddle/fluid/platform/gpu_info.cc GpuMaxChunkSize "
           "(PADDLE_ENFORCE_LE(allocating, available[, \"Insufficient GPU memory to allocation.\"]) "
           "rendered by platform/enforce.h as \"enforce allocating <= available failed, %d > %d\")")
CUPY_OLD = "CuPy 2.0-6.x cupy/cuda/memory.pyx OutOfMemoryError ('out of memory to allocate %d bytes (total %d bytes)')"
CUPY = "CuPy 7+ cupy/cuda/memory.pyx OutOfMemoryError ('Out of memory allocating {:,} bytes (allocated so far: {:,} bytes).')"
VLLM_V0 = "vLLM 0.6 vllm/worker/worker.py raise_if_cache_size_invalid"
VLLM_V1 = "vLLM 0.10 vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory"
CAFFE2 = ("PyTorch 1.0 caffe2/core/common_gpu.h CUDA_ENFORCE (\"Error at: %s:%d: %s\" with "
          "cudaGetErrorString) over the CUDA runtime's cudaError enum (cudaErrorMemoryAllocation = 2)")
SUMMARY = ("PyTorch 2.4 torch/cuda/memory.py memory_summary() (\"CUDA OOMs: {num_ooms:<12d} | "
           "cudaMalloc retries: ...\"); fairseq 0.12 fairseq/trainer.py _log_oom prints it")
MXNET = ("MXNet 1.x src/storage/pooled_storage_manager.h GPUPooledStorageManager::Alloc "
         "(LOG(FATAL) << \"cudaMalloc retry failed: \" / \"cudaMalloc failed: \" << cudaGetErrorString(e))")
FAIRSEQ = "fairseq 0.12 fairseq/trainer.py Trainer._log_oom (\"OOM: Ran out of memory with exception: {}\")"

_F = "cases/cuda_oom/"

ROWS = found_via(
    (_F + "paddle-26892-aistudio-zh-prefix-oom.log", _F + "paddlegan-587-one-line-oom-3090.log"),
    rx("cuda_oom", r"Out of memory error on GPU [0-9]+\. Cannot allocate",
       "ResourceExhaustedError: \n\nOut of memory error on GPU 0. Cannot allocate 3.621826GB memory "
       "on GPU 0, 21.184814GB memory has been allocated and available memory is only 2.814575GB.",
       PADDLE2, ("Out of memory error on GPU",), "paddle"),
) + found_via(
    (_F + "paddle-8992-enforce-allocating-le-available.log",),
    lit("cuda_oom", "enforce allocating <= available failed",
        "paddle.fluid.core.EnforceNotMet: enforce allocating <= available failed, 1827927622 > "
        "1359806208", PADDLE1, "paddle"),
    lit("cuda_oom", "Insufficient GPU memory to allocation",
        "paddle.fluid.core.EnforceNotMet: Insufficient GPU memory to allocation.", PADDLE1, "paddle"),
) + found_via(
    (_F + "spacenet-3-chainer-out-of-memory-to-allocate.log", _F + "see-23-windows-chainer-oom.log"),
    rx("cuda_oom", r"out of memory to allocate [0-9]+ bytes \(total [0-9]+ bytes\)",
       "cupy.cuda.memory.OutOfMemoryError: out of memory to allocate 163840000 bytes (total "
       "1673061376 bytes)", CUPY_OLD, ("out of memory to allocate",), "cupy"),
) + found_via(
    (_F + "cupy-2537-chainer-main-loop-oom.log",),
    rx("cuda_oom", r"Out of memory allocating [0-9,]+ bytes \(allocated so far: ",
       "Exception in main training loop: Out of memory allocating 25,600,000 bytes (allocated so "
       "far: 3,635,267,072 bytes).", CUPY, ("Out of memory allocating",), "cupy"),
) + found_via(
    (_F + "vllm-10439-compose-prefix-no-cache-blocks.log", _F + "vllm-27508-enginecore-kv-cache-check.log"),
    lit("cuda_oom", "No available memory for the cache blocks",
        "ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine.", VLLM_V0 + "; " + VLLM_V1, "vllm"),
    lit("cuda_oom", "is larger than the maximum number of tokens that can be stored in KV cache",
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens "
        "that can be stored in KV cache (12176). Try increasing `gpu_memory_utilization` or "
        "decreasing `max_model_len` when initializing the engine.", VLLM_V0, "vllm"),
    lit("cuda_oom", "KV cache is needed, which is larger than the available KV cache memory",
        "ValueError: To serve at least one request with the models's max seq len (65536), (7.0 GiB "
        "KV cache is needed, which is larger than the available KV cache memory (2.39 GiB).",
        VLLM_V1, "vllm"),
) + found_via(
    ("cases/cuda_oom/detectron-560-caffe2-enforce-event-gpu.log",),
    rx("cuda_oom", r"error == cudaSuccess\. 2 vs 0\.",
       "RuntimeError: [enforce fail at event_gpu.cc:17] error == cudaSuccess. 2 vs 0. Error at: "
       "/home/sd/pytorch/caffe2/core/event_gpu.cc:17: out of memory", CAFFE2,
       ("error == cudaSuccess. 2 vs 0",), "caffe2"),
) + found_via(
    (_F + "fairseq-4352-memory-summary-cuda-ooms.log",),
    # printed after an OOM the trainer may have recovered from: suggestive
    rx("cuda_oom", r"CUDA OOMs: [1-9][0-9]* +\|",
       "|            CUDA OOMs: 1            |        cudaMalloc retries: 1         |", SUMMARY,
       ("CUDA OOMs: ",), "torch", False),
    lit("cuda_oom", "OOM: Ran out of memory with exception",
        "OOM: Ran out of memory with exception: CUDA out of memory. Tried to allocate 62.00 MiB",
        FAIRSEQ, "fairseq", False),
) + (
    rx("cuda_oom", r"cudaMalloc (retry )?failed: out of memory",
       "mxnet.base.MXNetError: [23:54:01] src/storage/./pooled_storage_manager.h:161: cudaMalloc "
       "retry failed: out of memory", MXNET,
       ("cudaMalloc retry failed: out of memory", "cudaMalloc failed: out of memory"), "mxnet"),
)
