"""One library reporting another's failure: the words of the failure it relays decide, not the
reporter. NCCL relays the CUDA runtime's errors in its WARN lines (`Cuda failure 2 'out of
memory'`: GPU memory, whatever NCCL call hit it) and its own allocations failing; Horovod and
TensorFlow relay NCCL's result under their own exception types (`HorovodInternalError:
ncclAllReduce failed: unhandled system error`, `UnknownError: ... ncclUnhandledCudaError`)."""
from __future__ import annotations

from boxagent.triage.vocab.table import rx

NCCL_CHECK = ("NCCL 2.23 src/include/checks.h CUDACHECK (WARN \"Cuda failure %d '%s'\") and "
              "src/include/alloc.h ncclCudaCalloc (WARN \"Failed to CUDA calloc %ld bytes\")")
HVD = ("Horovod 0.28 horovod/common/ops/nccl_operations.cc (\"<op> failed: \" + ncclGetErrorString); "
       "NCCL 2.23 ncclGetErrorString texts")
TF = "TensorFlow 2.16 tensorflow/core/nccl/nccl_manager.cc (errors::Internal(ncclGetErrorString))"

ROWS = (
    rx("cuda_oom", r"Cuda failure ([0-9]+ )?'out of memory'",
       "node1:123:456 [0] include/alloc.h:103 NCCL WARN Cuda failure 2 'out of memory'", NCCL_CHECK,
       ("Cuda failure ",), "nccl"),
    rx("cuda_oom", r"NCCL WARN Failed to CUDA (calloc|malloc|host alloc)",
       "node1:123:456 [0] include/alloc.h:112 NCCL WARN Failed to CUDA calloc 6291456 bytes",
       NCCL_CHECK, ("NCCL WARN Failed to CUDA",), "nccl"),
    rx("nccl", r"nccl[A-Z][A-Za-z]+ failed: (unhandled (system|cuda) error|internal error|invalid "
       r"usage|remote process exited or there was a network error)",
       "horovod.common.exceptions.HorovodInternalError: ncclAllReduce failed: unhandled system error",
       HVD, (" failed: ",), "horovod"),
    rx("nccl", r"nccl(UnhandledCudaError|SystemError|InternalError|RemoteError)",
       "tensorflow.python.framework.errors_impl.UnknownError: ncclSystemError: System call "
       "(e.g. socket, malloc) or external library call failed or device error.", TF,
       ("ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError", "ncclRemoteError"),
       "tensorflow"),
)
