"""Triton's run time (the kernels torch.compile/Inductor, vLLM, SGLang and unsloth launch):
its launcher relays the driver's error as "Triton Error [CUDA]: <cuGetErrorString>" (and
"[HIP]" on ROCm), and its autotuner's OutOfResources says a kernel's configuration needs more
shared memory or registers than this GPU has.

Device memory in the launcher's words is cuda_oom. OutOfResources is a kernel configuration
tuned for a bigger GPU (an A100/H100 block size on a consumer card): the job's kernel settings,
code_error, whose fix the message names (smaller blocks or num_stages).
"""
from __future__ import annotations

from boxagent.triage.vocab.table import rx

DRV = ("Triton 3.1 third_party/nvidia/backend/driver.c gpuAssert (\"Triton Error [CUDA]: \" + "
       "cuGetErrorString), third_party/amd/backend/driver.c (\"Triton Error [HIP]: \" ... "
       "hipGetErrorString)")
RES = ("Triton 3.1 python/triton/runtime/errors.py OutOfResources (\"out of resource: {name}, "
       "Required: {required}, Hardware limit: {limit}. Reducing block sizes or `num_stages` may "
       "help.\")")

ROWS = (
    rx("cuda_oom", r"Triton Error \[(CUDA|HIP)\]: +(Code: [0-9]+, Mess?sage: )?out of memory",
       "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: RuntimeError: Triton "
       "Error [CUDA]: out of memory", DRV, ("Triton Error [",), "triton"),
    rx("code_error", r"OutOfResources: out of resource: (shared memory|registers|threads)",
       "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 232448, "
       "Hardware limit: 101376. Reducing block sizes or `num_stages` may help.", RES,
       ("OutOfResources: out of resource: ",), "triton"),
)
