"""NCCL's result codes by name and by the message of ncclGetErrorString, the torch
ProcessGroupNCCL texts around them, and the collectives' peers in other stacks (Gloo, JAX's
coordination service)."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

RESULT = "NCCL 2.21 src/nccl.h.in enum ncclResult_t"
STRING = "NCCL 2.21 src/init.cc ncclGetErrorString"
DEBUG = "NCCL 2.21 src/include/debug.h (WARN lines: \"<host>:<pid>:<tid> [<dev>] NCCL WARN ...\")"
PG = "PyTorch 2.4 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
UTILS = "PyTorch 2.4 torch/csrc/distributed/c10d/NCCLUtils.cpp getNcclErrorDetailStr"
CHECK = ("PyTorch 1.10-2.4 torch/csrc/distributed/c10d/NCCLUtils.hpp C10D_NCCL_CHECK (\"NCCL "
         "error in: \" + __FILE__ + \":\" + __LINE__ + \", \" + ncclGetErrorWithVersion(result))")
XLA_STATUS = ("OpenXLA xla/service/gpu/nccl_utils.cc ToStatus (\"%s:%d: NCCL operation %s failed: "
              "%s.\"), TensorFlow 2.x the same without the last-warning part")
COORD = "OpenXLA xla/tsl/distributed_runtime/coordination/coordination_service.cc (jaxlib 0.4.30)"

_S = False

ROWS = (
    lit("nccl", "ncclUnhandledCudaError", "ncclUnhandledCudaError: Call to CUDA function failed.",
        RESULT, "nccl"),
    lit("nccl", "ncclSystemError",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
        "device error.", RESULT, "nccl"),
    lit("nccl", "ncclInternalError", "ncclInternalError: Internal check failed.", RESULT, "nccl"),
    lit("nccl", "ncclInvalidArgument", "ncclInvalidArgument: Invalid value for an argument.",
        RESULT, "nccl"),
    lit("nccl", "ncclInvalidUsage",
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.", RESULT, "nccl"),
    lit("nccl", "ncclRemoteError",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely.", RESULT, "nccl"),
    # ncclGetErrorString's words for the two results no other library words so: NCCL 2.12+
    # add "(run with NCCL_DEBUG=INFO for details)", NCCL 2.4-2.11 return them bare, and a
    # caller quotes them either way (nccl-tests' "NCCL failure common.cu:921 'unhandled system
    # error'", XLA's "ncclGroupEnd() failed: unhandled cuda error.")
    lit("nccl", "unhandled cuda error",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "NCCLUtils.hpp:275, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL "
        "version 2.20.5", STRING + "; NCCL 2.4-2.11 the same without the parenthesis", "nccl"),
    lit("nccl", "unhandled system error",
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error (run with "
        "NCCL_DEBUG=INFO for details), NCCL version 2.18.1",
        STRING + "; NCCL 2.4-2.11 the same without the parenthesis", "nccl"),
    lit("nccl", "internal error - please report this issue to the NCCL developers",
        "ncclInternalError: internal error - please report this issue to the NCCL developers",
        STRING, "nccl"),
    lit("nccl", "invalid argument (run with NCCL_DEBUG=WARN for details)",
        "NCCL error in: NCCLUtils.hpp:275, invalid argument (run with NCCL_DEBUG=WARN for details)",
        STRING, "nccl"),
    lit("nccl", "invalid usage (run with NCCL_DEBUG=WARN for details)",
        "NCCL error in: ProcessGroupNCCL.cpp:1191, invalid usage (run with NCCL_DEBUG=WARN for "
        "details), NCCL version 2.14.3", STRING, "nccl"),
    lit("nccl", "remote process exited or there was a network error",
        "ncclRemoteError: remote process exited or there was a network error, NCCL version 2.19.3",
        STRING, "nccl"),
    # the callers' own frames around any ncclResult_t, whatever its string in that version:
    # torch's C10D_NCCL_CHECK and XLA's ToStatus
    rx("nccl", r"NCCL error in: [^ ,]+:[0-9]+, ",
       "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1118, "
       "internal error, NCCL version 2.10.3", CHECK, ("NCCL error in: ",), "nccl"),
    rx("nccl", r"NCCL operation [A-Za-z_]+\(.*\) failed: ",
       "INTERNAL: nccl_utils.cc:297: NCCL operation ncclCommInitRank(&comm, nranks, id, rank) "
       "failed: invalid usage. Last NCCL warning(error) log entry (may be unrelated) ''.",
       XLA_STATUS, ("NCCL operation ",), "nccl"),
    # a WARN line precedes most NCCL failures, but a few are harmless: suggestive, a warning
    # the WARN prefix carries the file and line that warned (debug.cc: "[%d] %s:%d NCCL WARN ",
    # 2.23+ "(%s)" the function too); a log cut to the message keeps "] NCCL WARN "
    rx("nccl", r"\] ([^ ]+:[0-9]+ (\([^)]*\) )?)?NCCL WARN ",
       "gpu-7:2176:2291 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer "
       "10.0.0.3<55874> with error 12, opcode 0, len 0, vendor err 129",
       DEBUG + "; src/debug.cc ncclDebugLog (\"[%d] %s:%d NCCL WARN \")",
       ("NCCL WARN ",), "nccl", _S, "warning"),
    lit("nccl", "Some NCCL operations have failed or timed out",
        "[Rank 1] Some NCCL operations have failed or timed out. Due to the asynchronous nature of "
        "CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.", PG,
        "torch"),
    lit("nccl", "milliseconds before timing out",
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=51, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600017 "
        "milliseconds before timing out.", PG, "torch"),
    lit("nccl", "ncclRemoteError: A call failed possibly due to a network error",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely.", UTILS, "torch"),
    lit("nccl", "Barrier timed out",
        "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: "
        "PjRT_Client_Connect", COORD, "xla", _S),
    lit("nccl", "Gloo connectFullMesh failed",
        "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/"
        "pair.cc:144] no error", "Gloo (PyTorch 2.4 third_party/gloo) gloo/rendezvous/context.cc",
        "gloo", _S),
)
