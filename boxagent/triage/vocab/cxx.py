"""C++ exceptions thrown out of a library into the runtime's terminate handler, and the
exception types frameworks throw across the Python boundary."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit

GXX = "GCC 13 libstdc++-v3/libsupc++/vterminate.cc (__gnu_cxx::__verbose_terminate_handler)"
NEW = "GCC 13 libstdc++-v3/libsupc++/new_op.cc (operator new throws std::bad_alloc)"
C10 = "PyTorch 2.4 c10/util/Exception.h (c10::Error, c10::OutOfMemoryError, c10::DistBackendError)"

ROWS = (
    # operator new could not get host memory: the process's own memory (or its cgroup's limit)
    lit("cgroup_oom", "std::bad_alloc", "terminate called after throwing an instance of "
        "'std::bad_alloc'", NEW, "libstdc++", False),
    lit("cuda_oom", "c10::OutOfMemoryError", "terminate called after throwing an instance of "
        "'c10::OutOfMemoryError'", C10, "torch"),
    lit("nccl", "c10::DistBackendError", "terminate called after throwing an instance of "
        "'c10::DistBackendError'", C10, "torch"),
    lit("code_error", "terminate called after throwing an instance of",
        "terminate called after throwing an instance of 'c10::Error'", GXX, "libstdc++", False),
)
