"""AMD ROCm: the HIP runtime's hipError_t, the ROCr (HSA) runtime's own fault reports, the ROCm
math libraries' status codes, PyTorch's ROCm build, RCCL, and the amdgpu kernel driver.

PyTorch's ROCm build is hipified: the words CUDA's path prints as `CUDA error: ...` come out as
`HIP error: ...` with hipGetErrorString's text, which HIP copied from cudaGetErrorString (the
bare texts, "an illegal memory access was encountered", are cuda.py's rows already). The enum
names and the ROCr runtime's lines are HIP's own. "invalid device function" on ROCm is the
build missing code objects for this GPU's gfx target (the usual HSA_OVERRIDE_GFX_VERSION
story), the same reading as CUDA's. A memory access fault by the GPU is ROCm's illegal
address: the job's kernel at fault far more often than the GPU (suggestive code_error); a GPU
hang the runtime reports, or the driver resetting the GPU, is the box's GPU until shown
otherwise (suggestive: a runaway kernel can hang it too).
"""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

HIP = ("ROCm 6.1 HIP include/hip/hip_runtime_api.h enum hipError_t, hipamd/src/hip_error.cpp "
       "hipGetErrorName / hipGetErrorString")
TORCH = ("PyTorch 2.4 ROCm build: c10/hip/HIPException (hipified c10/cuda/CUDAException.cpp, "
         "\"HIP error: \" + hipGetErrorString)")
ROCR = ("ROCm 6.1 ROCR-Runtime src/core/runtime/runtime.cpp (\"Memory access fault by GPU node-%u "
        "(Agent handle: %p) on address %p. Reason: %s.\", \"HW Exception by GPU node-%u (Agent "
        "handle: %p) reason :%s\")")
HSA = "ROCm 6.1 ROCR-Runtime inc/hsa.h enum hsa_status_t (hsa_status_string)"
ROCBLAS = "rocBLAS 4.1 library/include/internal/rocblas-types.h enum rocblas_status"
HIPBLAS = "hipBLAS 2.1 library/include/hipblas.h enum hipblasStatus_t (also hipBLASLt 0.7)"
TENSILE = ("rocBLAS 4.1 library/src/tensile_host.cpp (\"rocBLAS error: Cannot read %s: %s for GPU arch : "
           "%s\" and the list of the TensileLibrary files the build has: none for this gfx target)")
MIOPEN = "MIOpen 3.1 include/miopen/miopen.h enum miopenStatus_t"
AMDGPU = ("Linux 6.8 drivers/gpu/drm/amd/amdgpu/amdgpu_job.c amdgpu_job_timedout (\"ring %s "
          "timeout, signaled seq=%u, emitted seq=%u\"), amdgpu_device.c amdgpu_device_gpu_recover "
          "(\"GPU reset begin!\")")

_S = False     # suggestive: the same words have another common cause

ROWS = (
    # GPU memory
    lit("cuda_oom", "hipErrorOutOfMemory", "hipErrorOutOfMemory: out of memory", HIP, "hip"),
    lit("cuda_oom", "HIP error: out of memory", "RuntimeError: HIP error: out of memory", TORCH,
        "hip"),
    lit("cuda_oom", "rocblas_status_memory_error",
        "rocBLAS error: rocblas_status_memory_error from rocblas_gemm_ex", ROCBLAS, "rocblas"),
    lit("cuda_oom", "HIPBLAS_STATUS_ALLOC_FAILED",
        "RuntimeError: CUDA error: HIPBLAS_STATUS_ALLOC_FAILED when calling `hipblasCreate(handle)`",
        HIPBLAS, "hipblas"),
    lit("cuda_oom", "miopenStatusAllocFailed",
        "MIOpen Error: /long_pathname/MIOpen/src/hipoc/hipoc_program.cpp:300: miopenStatusAllocFailed",
        MIOPEN, "miopen"),
    # a build without code objects for this GPU's gfx target
    lit("torch_arch_mismatch", "hipErrorInvalidDeviceFunction",
        "hipErrorInvalidDeviceFunction: invalid device function", HIP, "hip"),
    lit("torch_arch_mismatch", "HIP error: invalid device function",
        "RuntimeError: HIP error: invalid device function", TORCH, "hip"),
    rx("torch_arch_mismatch", r"Cannot read [^ ]*TensileLibrary[^ ]*: .* for GPU arch ?: ?gfx[0-9a-f]+",
       "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or "
       "directory for GPU arch : gfx1103", TENSILE, ("for GPU arch",), "rocblas"),
    lit("torch_arch_mismatch", "HSA_STATUS_ERROR_INVALID_ISA",
        "HSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture is invalid.", HSA, "hsa"),
    lit("driver_too_old", "hipErrorInsufficientDriver",
        "hipErrorInsufficientDriver: driver version is insufficient for runtime version", HIP, "hip"),
    # the GPU itself
    lit("gpu_hardware", "hipErrorECCNotCorrectable",
        "hipErrorECCNotCorrectable: uncorrectable ECC error encountered", HIP, "hip"),
    rx("gpu_hardware", r"HW Exception by GPU node-[0-9]+ .*reason ?: ?GPU Hang",
       "HW Exception by GPU node-1 (Agent handle: 0x55cf74a379c0) reason :GPU Hang", ROCR,
       ("HW Exception by GPU node-",), "rocr", _S),
    rx("gpu_hardware", r"amdgpu.*ring [A-Za-z0-9_.]+ timeout, signaled seq=",
       "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=2061, "
       "emitted seq=2063", AMDGPU, (" timeout, signaled seq=",), "amdgpu", _S),
    rx("gpu_hardware", r"amdgpu.*GPU reset begin!",
       "amdgpu 0000:03:00.0: amdgpu: GPU reset begin!", AMDGPU, ("GPU reset begin!",), "amdgpu",
       _S),
    # the job's kernel touching memory it does not own
    lit("code_error", "hipErrorIllegalAddress",
        "hipErrorIllegalAddress: an illegal memory access was encountered", HIP, "hip", _S),
    rx("code_error", r"Memory access fault by GPU node-[0-9]+",
       "Memory access fault by GPU node-2 (Agent handle: 0x55b017570c40) on address "
       "0x7fcd499e6000. Reason: Page not present or supervisor privilege.", ROCR,
       ("Memory access fault by GPU node-",), "rocr", _S),
    lit("code_error", "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION",
        "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond "
        "the largest legal address.", HSA, "hsa", _S),
    lit("code_error", "hipErrorLaunchFailure", "hipErrorLaunchFailure: unspecified launch failure",
        HIP, "hip", _S),
)
