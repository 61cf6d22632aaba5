"""CUDA's own words: the runtime's cudaError_t and the driver's CUresult, by name and by the
message their GetErrorString functions return, and the CUDA math libraries' status codes.

An enum name is definitive wherever it appears (torch prints `Search for
`cudaErrorIllegalAddress'`, CuPy `CUDARuntimeError: cudaErrorMemoryAllocation: out of
memory`, JAX `CUDA_ERROR_OUT_OF_MEMORY: out of memory`). A bare message is only used where it
is distinctive, or behind torch's `CUDA error: ` prefix. An illegal address, a launch
failure or a kernel timeout is the job's own kernel at fault far more often than the GPU
(NVIDIA's Xid catalog lists Xid 13/31/43 as application faults): suggestive code_error.
"""
from __future__ import annotations

from boxagent.triage.vocab.table import lit

RT = "CUDA Runtime API 12.4, driver_types.h enum cudaError (cudaGetErrorString)"
DRV = "CUDA Driver API 12.4, cuda.h enum cudaError_enum / CUresult (cuGetErrorString)"
TORCH = "PyTorch 2.4 c10/cuda/CUDAException.cpp (\"CUDA error: \" + cudaGetErrorString)"
NCCL_CHECK = "NCCL 2.21 src/include/checks.h CUDACHECK (WARN \"Cuda failure '%s'\")"
CUDNN = "cuDNN 9.1 cudnn_graph.h enum cudnnStatus_t (cudnnGetErrorString gives the name)"
CUDNN8 = "cuDNN 8.9 cudnn_ops_infer.h enum cudnnStatus_t"
CUBLAS = "cuBLAS 12.4 cublas_api.h enum cublasStatus_t"
CUFFT = "cuFFT 11.2 cufft.h enum cufftResult_t"
CUSOLVER = "cuSOLVER 11.6 cusolver_common.h enum cusolverStatus_t"
CUSPARSE = "cuSPARSE 12.3 cusparse.h enum cusparseStatus_t"

_S = False     # suggestive: the same words have another common cause

ROWS = (
    # cuda_oom
    lit("cuda_oom", "cudaErrorMemoryAllocation",
        "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorMemoryAllocation: out of memory",
        RT, "cuda"),
    lit("cuda_oom", "CUDA_ERROR_OUT_OF_MEMORY",
        "XlaRuntimeError: INTERNAL: Failed to allocate 1.00GiB: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        DRV, "cuda"),
    lit("cuda_oom", "CUDA error: out of memory", "RuntimeError: CUDA error: out of memory", TORCH,
        "cuda"),
    lit("cuda_oom", "Cuda failure 'out of memory'",
        "node1:123:456 [0] NCCL WARN Cuda failure 'out of memory'", NCCL_CHECK, "nccl"),
    lit("cuda_oom", "CUDNN_STATUS_ALLOC_FAILED",
        "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED", CUDNN, "cudnn"),
    # cudnnCreate/cublasCreate fail this way on a GPU with no memory left for a handle
    lit("cuda_oom", "CUDNN_STATUS_NOT_INITIALIZED",
        "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED", CUDNN, "cudnn", _S),
    lit("cuda_oom", "Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR",
        "E tensorflow/stream_executor/cuda/cuda_dnn.cc:329] Could not create cudnn handle: "
        "CUDNN_STATUS_INTERNAL_ERROR", CUDNN8, "tensorflow", _S),
    lit("cuda_oom", "CUBLAS_STATUS_ALLOC_FAILED",
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        CUBLAS, "cublas"),
    lit("cuda_oom", "CUBLAS_STATUS_NOT_INITIALIZED",
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`",
        CUBLAS, "cublas", _S),
    lit("cuda_oom", "CUFFT_ALLOC_FAILED", "RuntimeError: cuFFT error: CUFFT_ALLOC_FAILED", CUFFT,
        "cufft"),
    lit("cuda_oom", "CUSOLVER_STATUS_ALLOC_FAILED",
        "RuntimeError: cusolver error: CUSOLVER_STATUS_ALLOC_FAILED", CUSOLVER, "cusolver"),
    lit("cuda_oom", "CUSPARSE_STATUS_ALLOC_FAILED",
        "RuntimeError: CUDA error: CUSPARSE_STATUS_ALLOC_FAILED when calling `cusparseCreate(handle)`",
        CUSPARSE, "cusparse"),
    # driver_too_old
    lit("driver_too_old", "cudaErrorInsufficientDriver",
        "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version",
        RT, "cuda"),
    lit("driver_too_old", "CUDA driver version is insufficient",
        "RuntimeError: CUDA driver version is insufficient for CUDA runtime version", RT, "cuda"),
    lit("driver_too_old", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: system has unsupported display driver / cuda driver "
        "combination", DRV, "cuda"),
    lit("driver_too_old", "cudaErrorSystemDriverMismatch",
        "cudaErrorSystemDriverMismatch: system has unsupported display driver / cuda driver "
        "combination", RT, "cuda"),
    lit("driver_too_old", "system has unsupported display driver / cuda driver combination",
        "RuntimeError: CUDA error: system has unsupported display driver / cuda driver combination",
        RT, "cuda"),
    lit("driver_too_old", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
        "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: forward compatibility was attempted on non "
        "supported HW", DRV, "cuda"),
    lit("driver_too_old", "cudaErrorCompatNotSupportedOnDevice",
        "cudaErrorCompatNotSupportedOnDevice: forward compatibility was attempted on non supported HW",
        RT, "cuda"),
    lit("driver_too_old", "cudaErrorUnsupportedPtxVersion",
        "cudaErrorUnsupportedPtxVersion: the provided PTX was compiled with an unsupported toolchain.",
        RT, "cuda"),
    lit("driver_too_old", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with an unsupported "
        "toolchain.", DRV, "cuda"),
    lit("driver_too_old", "cudaErrorCallRequiresNewerDriver",
        "cudaErrorCallRequiresNewerDriver: API call is not supported in the installed CUDA driver",
        RT, "cuda"),
    lit("driver_too_old", "API call is not supported in the installed CUDA driver",
        "RuntimeError: CUDA error: API call is not supported in the installed CUDA driver", RT,
        "cuda"),
    lit("driver_too_old", "PTX was compiled with an unsupported toolchain",
        "RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.",
        RT, "cuda"),
    lit("driver_too_old", "UNSUPPORTED_PTX_VERSION",
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with an unsupported "
        "toolchain.", DRV, "cuda"),
    lit("driver_too_old", "forward compatibility was attempted on non supported HW",
        "Error 804: forward compatibility was attempted on non supported HW", RT, "cuda"),
    lit("driver_too_old", "CUDNN_STATUS_INSUFFICIENT_DRIVER",
        "RuntimeError: cuDNN error: CUDNN_STATUS_INSUFFICIENT_DRIVER", CUDNN8, "cudnn"),
    # torch_arch_mismatch
    lit("torch_arch_mismatch", "cudaErrorNoKernelImageForDevice",
        "Search for `cudaErrorNoKernelImageForDevice' in https://docs.nvidia.com/cuda/"
        "cuda-runtime-api/group__CUDART__TYPES.html for more information.", RT, "cuda"),
    lit("torch_arch_mismatch", "CUDA_ERROR_NO_BINARY_FOR_GPU",
        "CUDA_ERROR_NO_BINARY_FOR_GPU: no kernel image is available for execution on the device",
        DRV, "cuda"),
    lit("torch_arch_mismatch", "no kernel image is available for execution",
        "RuntimeError: CUDA error: no kernel image is available for execution on the device", RT,
        "cuda"),
    lit("torch_arch_mismatch", "cudaErrorInvalidKernelImage",
        "cudaErrorInvalidKernelImage: device kernel image is invalid", RT, "cuda", _S),
    lit("torch_arch_mismatch", "CUDA_ERROR_INVALID_IMAGE",
        "CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid", DRV, "cuda", _S),
    # the pre-CUDA-11 wording of a kernel missing for this GPU's architecture
    lit("torch_arch_mismatch", "CUDA error: invalid device function",
        "RuntimeError: CUDA error: invalid device function", RT, "cuda", _S),
    lit("torch_arch_mismatch", "cudaErrorInvalidDeviceFunction",
        "cudaErrorInvalidDeviceFunction: invalid device function", RT, "cuda", _S),
    lit("torch_arch_mismatch", "CUDNN_STATUS_ARCH_MISMATCH",
        "RuntimeError: cuDNN error: CUDNN_STATUS_ARCH_MISMATCH", CUDNN8, "cudnn"),
    lit("torch_arch_mismatch", "CUBLAS_STATUS_ARCH_MISMATCH",
        "RuntimeError: CUDA error: CUBLAS_STATUS_ARCH_MISMATCH when calling `cublasGemmEx(...)`",
        CUBLAS, "cublas"),
    # gpu_hardware
    lit("gpu_hardware", "uncorrectable ECC error",
        "NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error (DBE) has been detected; "
        "uncorrectable ECC error", "NVIDIA driver 550 NVRM / CUDA Runtime API 12.4 "
        "cudaErrorECCUncorrectable", "cuda"),
    lit("gpu_hardware", "ECC_UNCORRECTABLE", "NVML_ERROR_ECC_UNCORRECTABLE",
        "CUDA Driver API 12.4 cuda.h CUDA_ERROR_ECC_UNCORRECTABLE", "cuda"),
    lit("gpu_hardware", "cudaErrorECCUncorrectable",
        "cudaErrorECCUncorrectable: uncorrectable ECC error encountered", RT, "cuda"),
    lit("gpu_hardware", "uncorrectable ECC error encountered",
        "RuntimeError: CUDA error: uncorrectable ECC error encountered", RT, "cuda"),
    lit("gpu_hardware", "CUDA_ERROR_ECC_UNCORRECTABLE",
        "CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error encountered", DRV, "cuda"),
    lit("gpu_hardware", "cudaErrorNvlinkUncorrectable",
        "cudaErrorNvlinkUncorrectable: uncorrectable NVLink error was detected during the execution",
        RT, "cuda"),
    lit("gpu_hardware", "CUDA_ERROR_NVLINK_UNCORRECTABLE",
        "CUDA_ERROR_NVLINK_UNCORRECTABLE: uncorrectable NVLink error was detected during the "
        "execution", DRV, "cuda"),
    lit("gpu_hardware", "uncorrectable NVLink error was detected",
        "RuntimeError: CUDA error: uncorrectable NVLink error was detected during the execution",
        RT, "cuda"),
    # an NVSwitch box whose fabric manager is not running: the box, not the job
    lit("gpu_hardware", "cudaErrorSystemNotReady",
        "cudaErrorSystemNotReady: system not yet initialized", RT, "cuda", _S),
    lit("gpu_hardware", "CUDA_ERROR_SYSTEM_NOT_READY",
        "CUDA_ERROR_SYSTEM_NOT_READY: system not yet initialized", DRV, "cuda", _S),
    lit("gpu_hardware", "CUDA error: system not yet initialized",
        "RuntimeError: CUDA error: system not yet initialized", RT, "cuda", _S),
    # exclusive-process compute mode with another tenant, or a GPU stuck after a fault
    lit("gpu_hardware", "cudaErrorDevicesUnavailable",
        "cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or unavailable", RT,
        "cuda", _S),
    lit("gpu_hardware", "CUDA_ERROR_DEVICE_UNAVAILABLE",
        "CUDA_ERROR_DEVICE_UNAVAILABLE: CUDA-capable device(s) is/are busy or unavailable", DRV,
        "cuda", _S),
    lit("gpu_hardware", "CUDA-capable device(s) is/are busy or unavailable",
        "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", RT, "cuda",
        _S),
    lit("gpu_hardware", "all CUDA-capable devices are busy or unavailable",
        "RuntimeError: cuda runtime error (46) : all CUDA-capable devices are busy or unavailable",
        "CUDA Runtime API 9.2, driver_types.h cudaErrorDevicesUnavailable", "cuda", _S),
    # code_error: the job's kernel at fault (suggestive: a failing GPU can say the same)
    lit("code_error", "cudaErrorIllegalAddress",
        "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
        "group__CUDART__TYPES.html for more information.", RT, "cuda", _S),
    lit("code_error", "CUDA_ERROR_ILLEGAL_ADDRESS",
        "cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal "
        "memory access was encountered", DRV, "cuda", _S),
    lit("code_error", "an illegal memory access was encountered",
        "RuntimeError: CUDA error: an illegal memory access was encountered", RT, "cuda", _S),
    lit("code_error", "cudaErrorLaunchFailure",
        "cudaErrorLaunchFailure: unspecified launch failure", RT, "cuda", _S),
    lit("code_error", "CUDA_ERROR_LAUNCH_FAILED",
        "CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure", DRV, "cuda", _S),
    lit("code_error", "unspecified launch failure",
        "RuntimeError: CUDA error: unspecified launch failure", RT, "cuda", _S),
    lit("code_error", "cudaErrorIllegalInstruction",
        "cudaErrorIllegalInstruction: an illegal instruction was encountered", RT, "cuda", _S),
    lit("code_error", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        "CUDA_ERROR_ILLEGAL_INSTRUCTION: an illegal instruction was encountered", DRV, "cuda", _S),
    lit("code_error", "an illegal instruction was encountered",
        "RuntimeError: CUDA error: an illegal instruction was encountered", RT, "cuda", _S),
    lit("code_error", "cudaErrorMisalignedAddress", "cudaErrorMisalignedAddress: misaligned address",
        RT, "cuda"),
    lit("code_error", "CUDA_ERROR_MISALIGNED_ADDRESS",
        "CUDA_ERROR_MISALIGNED_ADDRESS: misaligned address", DRV, "cuda"),
    lit("code_error", "CUDA error: misaligned address", "RuntimeError: CUDA error: misaligned address",
        RT, "cuda"),
    lit("code_error", "cudaErrorLaunchOutOfResources",
        "cudaErrorLaunchOutOfResources: too many resources requested for launch", RT, "cuda"),
    lit("code_error", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: too many resources requested for launch", DRV, "cuda"),
    lit("code_error", "too many resources requested for launch",
        "RuntimeError: CUDA error: too many resources requested for launch", RT, "cuda"),
    lit("code_error", "cudaErrorLaunchTimeout",
        "cudaErrorLaunchTimeout: the launch timed out and was terminated", RT, "cuda", _S),
    lit("code_error", "CUDA_ERROR_LAUNCH_TIMEOUT",
        "CUDA_ERROR_LAUNCH_TIMEOUT: the launch timed out and was terminated", DRV, "cuda", _S),
    lit("code_error", "the launch timed out and was terminated",
        "RuntimeError: CUDA error: the launch timed out and was terminated", RT, "cuda", _S),
    lit("code_error", "cudaErrorHardwareStackError",
        "cudaErrorHardwareStackError: hardware stack error", RT, "cuda", _S),
    lit("code_error", "CUDA_ERROR_HARDWARE_STACK_ERROR",
        "CUDA_ERROR_HARDWARE_STACK_ERROR: hardware stack error", DRV, "cuda", _S),
    lit("code_error", "cudaErrorInvalidPc", "cudaErrorInvalidPc: invalid program counter", RT,
        "cuda", _S),
    lit("code_error", "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_INVALID_PC: invalid program counter",
        DRV, "cuda", _S),
    lit("code_error", "CUDA_ERROR_ASSERT", "CUDA_ERROR_ASSERT: device-side assert triggered", DRV,
        "cuda"),
    lit("code_error", "CUDNN_STATUS_BAD_PARAM", "RuntimeError: cuDNN error: CUDNN_STATUS_BAD_PARAM",
        CUDNN, "cudnn"),
    lit("code_error", "CUDNN_STATUS_NOT_SUPPORTED",
        "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed "
        "in a non-contiguous input.", CUDNN, "cudnn"),
    lit("code_error", "CUDNN_STATUS_EXECUTION_FAILED",
        "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED", CUDNN, "cudnn", _S),
    lit("code_error", "CUDNN_STATUS_INTERNAL_ERROR",
        "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR", CUDNN, "cudnn", _S),
    lit("code_error", "CUDNN_STATUS_MAPPING_ERROR",
        "RuntimeError: cuDNN error: CUDNN_STATUS_MAPPING_ERROR", CUDNN, "cudnn", _S),
    lit("code_error", "CUDNN_STATUS_VERSION_MISMATCH",
        "RuntimeError: cuDNN error: CUDNN_STATUS_VERSION_MISMATCH", CUDNN, "cudnn"),
    lit("code_error", "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH",
        "RuntimeError: cuDNN error: CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH", CUDNN, "cudnn"),
    lit("code_error", "CUBLAS_STATUS_EXECUTION_FAILED",
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle)`",
        CUBLAS, "cublas", _S),
    lit("code_error", "CUBLAS_STATUS_INVALID_VALUE",
        "RuntimeError: CUDA error: CUBLAS_STATUS_INVALID_VALUE when calling `cublasGemmEx( handle)`",
        CUBLAS, "cublas"),
    lit("code_error", "CUBLAS_STATUS_INTERNAL_ERROR",
        "RuntimeError: CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasLtMatmul( ltHandle)`",
        CUBLAS, "cublas", _S),
    lit("code_error", "CUBLAS_STATUS_NOT_SUPPORTED",
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( handle)`",
        CUBLAS, "cublas"),
    lit("code_error", "CUBLAS_STATUS_MAPPING_ERROR",
        "RuntimeError: CUDA error: CUBLAS_STATUS_MAPPING_ERROR when calling `cublasSgemm( handle)`",
        CUBLAS, "cublas", _S),
)
