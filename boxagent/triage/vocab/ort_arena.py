"""ONNX Runtime's BFC arena, the allocator of its execution providers: a buffer the arena cannot
get from the device. Under the CUDA execution provider (and Triton's onnxruntime backend) that is
GPU memory; the CPU provider's arena says the same words for host memory, so the row is not
definitive and the emitter decides."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

ARENA = ("ONNX Runtime 1.17 onnxruntime/core/framework/bfc_arena.cc BFCArena::AllocateRawInternal "
         "(ORT_THROW(\"Failed to allocate memory for requested buffer of size \", rounded_bytes))")

ROWS = found_via(
    ("wave4/cases/cuda_oom/ort-20038-tritonserver-bfcarena-t4-shared.log",),
    rx("cuda_oom", r"BFCArena::AllocateRawInternal.*Failed to allocate memory for requested "
       r"buffer of size",
       "onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*, bool, "
       "onnxruntime::WaitNotificationFn) Failed to allocate memory for requested buffer of size "
       "1073741824", ARENA, ("Failed to allocate memory for requested buffer of size",),
       "onnxruntime", False),
)
