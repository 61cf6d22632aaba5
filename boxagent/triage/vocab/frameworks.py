"""Device memory and runtime status in frameworks other than torch: XLA/absl status codes
(JAX), TensorFlow's allocator, CuPy's memory pool, and host memory as numpy and CPython say it.

absl's status codes are generic (`INTERNAL`, `UNAVAILABLE`): a code alone is never a class;
only the status with its message (`RESOURCE_EXHAUSTED: Out of memory while trying to
allocate`) or the code behind JAX's runtime exception is."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

ABSL = "Abseil LTS 2024-01-16 absl/status/status.h absl::StatusCode (\"CODE: message\")"
XLA = "OpenXLA xla/tsl/framework/bfc_allocator.cc and xla/pjrt/gpu (jaxlib 0.4.30)"
TPU = "OpenXLA / libtpu (jaxlib 0.4.30) TPU compiler: \"Ran out of memory in memory space hbm\""
JAX = "JAX 0.4.30 jax/_src/lib (jaxlib.xla_extension.XlaRuntimeError; 0.6+ jax.errors.JaxRuntimeError)"
TF_BFC = "TensorFlow 2.16 tsl/framework/bfc_allocator.cc BFCAllocator::AllocateRawInternal"
TF_OP = "TensorFlow 2.16 tensorflow/core/framework/op_kernel.cc / tf.errors.ResourceExhaustedError"
CUPY = "CuPy 13 cupy/cuda/memory.pyx OutOfMemoryError"
NUMPY = "NumPy 1.26 numpy/core/src/multiarray/ctors.c (_ArrayMemoryError)"
CPY = "CPython 3.12 Objects/exceptions.c MemoryError"

_S = False

ROWS = (
    lit("cuda_oom", "RESOURCE_EXHAUSTED: Out of memory",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
        "allocate 1073741824 bytes.", ABSL + "; " + XLA, "xla"),
    lit("cuda_oom", "Out of memory while trying to allocate",
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
        "17179869184 bytes with allocator GPU_0_bfc", XLA, "xla"),
    rx("cuda_oom", r"(XlaRuntimeError|JaxRuntimeError): RESOURCE_EXHAUSTED",
       "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for "
       "2.00GiB (2147483648B) on device ordinal 0", JAX, ("XlaRuntimeError: RESOURCE_EXHAUSTED",
                                                         "JaxRuntimeError: RESOURCE_EXHAUSTED"),
       "xla"),
    lit("cuda_oom", "Ran out of memory in memory space hbm",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent "
        "error. Ran out of memory in memory space hbm. Used 17.92G of 15.48G hbm.", TPU, "xla"),
    rx("cuda_oom", r"OOM when allocating tensor with shape.*device:GPU",
       "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor "
       "with shape[64,256,56,56] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by "
       "allocator GPU_0_bfc", TF_OP, ("OOM when allocating tensor",), "tensorflow"),
    lit("cuda_oom", "OOM when allocating tensor",
        "(0) RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[8,1024,1024] and type float",
        TF_OP, "tensorflow", _S),
    lit("cuda_oom", "ResourceExhaustedError",
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: Graph execution error:",
        TF_OP, "tensorflow", _S),
    # the BFC allocator logs this at W level and retries: a warning, the OOM comes after
    rx("cuda_oom", r"Allocator \(GPU_[0-9]+_bfc\) ran out of memory trying to allocate",
       "W tensorflow/core/common_runtime/bfc_allocator.cc:290] Allocator (GPU_0_bfc) ran out of "
       "memory trying to allocate 1.25GiB with freed_by_count=0.", TF_BFC,
       ("_bfc) ran out of memory",), "tensorflow", _S, "warning"),
    rx("cuda_oom", r"OutOfMemoryError: Out of memory allocating [0-9,]+ bytes",
       "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 8,589,934,592 bytes "
       "(allocated so far: 0 bytes).", CUPY, ("OutOfMemoryError: Out of memory allocating",),
       "cupy"),
    # host memory, said by the process itself (no OOM killer involved yet)
    lit("cgroup_oom", "_ArrayMemoryError",
        "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 74.5 GiB for an array with "
        "shape (100000, 100000) and data type float64", NUMPY, "numpy", _S),
    rx("cgroup_oom", r"Unable to allocate [0-9.]+ [KMGTP]?i?B for an array with shape",
       "numpy.core._exceptions.MemoryError: Unable to allocate 3.73 GiB for an array with shape "
       "(500000, 1000) and data type float64", NUMPY, ("for an array with shape",), "numpy", _S),
    rx("cgroup_oom", r"^MemoryError$|^MemoryError: ",
       "MemoryError: Unable to allocate output buffer.", CPY, ("MemoryError",), "python", _S),
)
