"""Huawei Ascend NPUs (CANN, torch_npu, MindSpore): the NPU caching allocator, MindSpore's
device allocator, the ACL runtime's error
codes (rt_error_codes.h) that torch_npu prints by name and number, CANN's own message codes
(EL0004 ...), and HCCL, the collective library that stands where NCCL does.

Ascend GPUs rent on the Chinese platforms beside NVIDIA's. The classes map as on CUDA: the
allocator's and the runtime's "memory allocation" are device memory; a memory UCE or a
multi-bit HBM ECC error is the card (torch_npu says "UCE ERROR"); an HCCL call that fails
(init, a link error, a socket or notify-wait timeout) is the collective class. The generic
"Inner Error" codes (EZ9999, EE9999, EH9999) name no cause by themselves: no row reads them.
"""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

NPU = ("torch_npu 2.1.0 torch_npu/csrc/core/npu/NPUCachingAllocator.cpp (\"NPU out of memory. "
       "Tried to allocate \", ...)")
MS = ("MindSpore 2.3 mindspore/ccsrc/runtime/graph_scheduler/actor (\"Device(id:%d) memory isn't enough "
      "and alloc failed, kernel name: %s, alloc size: %dB.\"; the CPU device's own wording starts "
      "\"Memory isn't enough\" without \"Device\")")
RT = ("CANN 8.0 runtime include/external/runtime/rt_error_codes.h (ACL_ERROR_RT_MEMORY_ALLOCATION "
      "207001, ACL_ERROR_RT_DEVICE_MEM_ERROR 507053, ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR 507054, "
      "ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR 507055, ACL_ERROR_RT_LINK_ERROR 507056)")
CODES = ("CANN 8.0 error code reference (EL0004 \"Failed to allocate memory.\"; EI0002 notify wait "
         "timeout; EI0006 socket build timeout)")
HCCL = ("torch_npu 2.1.0 torch_npu/csrc/distributed/HCCLUtils.hpp HCCL_CHECK_ERROR (\" HCCL function "
        "error: \" << function << \", error code is \" << code); CANN 8.0 include/hccl/hccl_types.h "
        "enum HcclResult (1 PARA, 2 PTR, 5 NOT_SUPPORT, 7 UNAVAIL, 9 TIMEOUT, 11-14 TCP/RoCE "
        "connect/transfer, 19 NETWORK, 21 REMOTE, 24 OOM)")
UCE = "torch_npu 2.1.0 torch_npu/csrc/core/npu/NPUException.h (checkUceErrAndRepair: \"UCE ERROR\")"

_S = False
_HCCL_EXAMPLE = ("RuntimeError: create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:149 HCCL "
                 "function error: hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, "
                 "&(comm->hcclComm_)), error code is %s")


def _hccl(cls, codes, example_code, definitive):
    """torch_npu's HCCL_CHECK_ERROR line for the HcclResult codes `codes` (a regex)."""
    return rx(cls, r"HCCL function error: .*error code is " + codes + r"( |\.|,|$)",
              _HCCL_EXAMPLE % example_code, HCCL, ("HCCL function error: ",), "hccl", definitive)


ROWS = (
    lit("cuda_oom", "NPU out of memory",
        "RuntimeError: NPU out of memory. Tried to allocate 260.00 MiB (NPU 0; 28.50 GiB total "
        "capacity; 10.24 GiB already allocated; 149.57 MiB free)", NPU, "torch_npu"),
    rx("cuda_oom", r"Device(\(id:[0-9]+\))? memory isn't enough and alloc failed",
       "RuntimeError: Device(id:0) memory isn't enough and alloc failed, kernel name: "
       "Default/network-WithLossCell/MatMul-op0, alloc size: 2147483648B.", MS,
       ("memory isn't enough and alloc failed",), "mindspore"),
    lit("cuda_oom", "ACL_ERROR_RT_MEMORY_ALLOCATION",
        "aclrtMalloc failed, error code ACL_ERROR_RT_MEMORY_ALLOCATION (207001)", RT, "acl"),
    lit("cuda_oom", "EL0004: Failed to allocate memory",
        "EL0004: Failed to allocate memory.", CODES, "cann"),
    lit("gpu_hardware", "ACL_ERROR_RT_DEVICE_MEM_ERROR",
        "error code is 507053 ACL_ERROR_RT_DEVICE_MEM_ERROR device mem error", RT, "acl"),
    lit("gpu_hardware", "ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR",
        "error code is 507054 ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR", RT, "acl"),
    lit("gpu_hardware", "ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR",
        "error code is 507055 ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR", RT, "acl", _S),
    rx("gpu_hardware", r"(^|[^A-Za-z])UCE ERROR", "RuntimeError: synchronize:build/CMakeFiles/"
       "torch_npu.dir/compiler_depend.ts:467 NPU function error: UCE ERROR.", UCE,
       ("UCE ERROR",), "torch_npu"),
    # HCCL, the collective library
    # HCCL's HcclResult decides: a timeout or a TCP/RoCE connect/transfer/network failure is
    # the collective's transport; a parameter/pointer/unsupported error is the job's call;
    # HCCL_E_OOM is device memory; the rest (resource unavailable: often a port still bound by
    # an earlier run, runtime/driver calls) are the collective's, suggestive
    _hccl("nccl", r"(9|1[1-4]|19|21)", "11", True),
    _hccl("nccl", r"([34678]|10|1[5-8]|2[023])", "7", _S),
    _hccl("code_error", r"[125]", "1", True),
    _hccl("cuda_oom", r"24", "24", True),
    lit("nccl", "ACL_ERROR_RT_LINK_ERROR", "error code is 507056 ACL_ERROR_RT_LINK_ERROR device "
        "network link error", RT, "acl"),
    rx("nccl", r"EI000[26]:", "EI0006: Getting socket times out. Reason: 1. The remote does not "
       "initiate a connect request.", CODES, ("EI0002:", "EI0006:"), "hccl"),
)
