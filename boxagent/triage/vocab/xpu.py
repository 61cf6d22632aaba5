"""Intel GPUs (XPU): PyTorch's and IPEX's caching allocators, oneAPI Level Zero's ze_result_t,
the SYCL runtime's Unified Runtime (ur_result_t) and older PI codes that SYCL relays as
"Native API failed. Native API returns: <code> (<NAME>)", and oneCCL's error lines.

Level Zero and UR name device memory apart from host memory, so the enum says which. The PI
and OpenCL "out of resources" code (-5) is what older SYCL gave for a device allocation that
did not fit, but it is also other exhausted resources: suggestive. A lost device is the GPU
hung, reset or gone (the driver's words), the box's GPU until shown otherwise.
"""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

TORCH = ("PyTorch 2.5 c10/xpu/XPUCachingAllocator.cpp (TORCH_CHECK_WITH(OutOfMemoryError, false, "
         "\"XPU out of memory. Tried to allocate \", ...)); IPEX 2.1 csrc/gpu/runtime/"
         "CachingDeviceAllocator.cpp (same words)")
ZE = "oneAPI Level Zero 1.9 include/ze_api.h enum _ze_result_t"
UR = "oneAPI Unified Runtime 0.9 include/ur_api.h enum ur_result_t (SYCL 2024.1 relays it)"
PI = ("Intel oneAPI DPC++ 2023.2 sycl/include/sycl/detail/pi_error.def (PI_ERROR_OUT_OF_RESOURCES "
      "= -5), sycl/source/detail/plugin.hpp (\"Native API failed. Native API returns: \")")

CCL = ("oneCCL 2021.12 src/common/log/log.hpp LOG_ERROR (logger.error(\"|CCL_ERROR| \", file, \":\", "
       "line, ...))")

_S = False

ROWS = (
    lit("cuda_oom", "XPU out of memory",
        "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 15.11 GiB.", TORCH, "torch"),
    lit("cuda_oom", "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
        "RuntimeError: level_zero backend failed with error: 1879048195 "
        "(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)", ZE, "level-zero"),
    lit("cuda_oom", "UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
        "RuntimeError: Native API failed. Native API returns: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
        UR, "sycl"),
    rx("cuda_oom", r"-5 \((PI|CL)_(ERROR_)?OUT_OF_RESOURCES\)",
       "RuntimeError: Native API failed. Native API returns: -5 (PI_ERROR_OUT_OF_RESOURCES) -5 "
       "(PI_ERROR_OUT_OF_RESOURCES)", PI, ("OUT_OF_RESOURCES)",), "sycl", _S),
    lit("cgroup_oom", "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY",
        "level_zero backend failed with error: 1879048194 (ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)", ZE,
        "level-zero", _S),
    lit("gpu_hardware", "ZE_RESULT_ERROR_DEVICE_LOST",
        "level_zero backend failed with error: 1879048193 (ZE_RESULT_ERROR_DEVICE_LOST)", ZE,
        "level-zero", _S),
    lit("gpu_hardware", "UR_RESULT_ERROR_DEVICE_LOST",
        "RuntimeError: Native API failed. Native API returns: 20 (UR_RESULT_ERROR_DEVICE_LOST)", UR,
        "sycl", _S),
    # oneCCL, the collective library of Intel GPUs (IPEX's and vLLM's XPU DDP): its error lines
    # are the collective failing (often its setup: KVS, the ranks' environment), as NCCL WARN
    lit("nccl", "|CCL_ERROR|", "2024:01:23-00:02:21:(122510) |CCL_ERROR| atl_mpi_comm.cpp:94 "
        "init_transport: comm_create error", CCL, "oneccl", _S),
    lit("driver_too_old", "ZE_RESULT_ERROR_UNSUPPORTED_VERSION",
        "level_zero backend failed with error: 2013265922 (ZE_RESULT_ERROR_UNSUPPORTED_VERSION)", ZE,
        "level-zero"),
)
