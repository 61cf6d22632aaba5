"""A job whose process sees no GPU at all, in the words of each layer that looks: the CUDA
runtime and driver (no device), PyTorch's start-up checks and the front ends that check the
same (the Stable Diffusion web UI, Lightning, vLLM), HIP's twin, and a CPU-only torch wheel that a
requirements file put over the image's CUDA build.

On a rented box "no device" is the container started without the GPU or a driver that is not
loaded (the same reading, and remedy, as nvidia-smi's "couldn't communicate with the NVIDIA
driver" in containers.py); it can also be CUDA_VISIBLE_DEVICES set to nothing, so suggestive.
"Torch not compiled with CUDA enabled" is certain: the installed torch is a CPU build, an
install problem, not the job's code.
"""
from __future__ import annotations

from boxagent.triage.vocab.containers import NOT_LOADED_FIX
from boxagent.triage.vocab.install import FIX
from boxagent.triage.vocab.table import lit, rx

RT = "CUDA Runtime API 12.4 driver_types.h cudaErrorNoDevice = 100 (\"no CUDA-capable device is detected\")"
DRV = "CUDA Driver API 12.4 cuda.h CUDA_ERROR_NO_DEVICE = 100"
TORCH = ("PyTorch 2.4 torch/cuda/__init__.py (_check_driver: \"Found no NVIDIA driver on your "
         "system.\"; _lazy_init: \"Torch not compiled with CUDA enabled\"), "
         "c10/cuda/CUDAFunctions.cpp device_count_impl (\"No CUDA GPUs are available\")")
LINKED = ("PyTorch 2.4 c10/core/impl/DeviceGuardImplInterface.h getDeviceGuardImpl (TORCH_CHECK(p, "
          "\"PyTorch is not linked with support for \", type, \" devices\"))")
A1111 = ("AUTOMATIC1111 stable-diffusion-webui 1.9 modules/launch_utils.py prepare_environment "
         "(\"Torch is not able to use GPU; add --skip-torch-cuda-test to COMMANDLINE_ARGS variable to "
         "disable this check\")")
LIGHTNING = ("Lightning 2.2 src/lightning/pytorch/trainer/connectors/accelerator_connector.py "
             "_choose_gpu_accelerator_backend (MisconfigurationException(\"No supported gpu backend "
             "found!\"))")
VLLM = ("vLLM 0.6 vllm/config.py DeviceConfig (RuntimeError(\"Failed to infer device type\"): no "
        "platform found, the image's runtime not matching the host's GPU or none visible)")
TENSILE = ("hipBLASLt 0.7 / rocBLAS 4.1 tensile_host.cpp GetDeviceCount (\"Could not initialize Tensile "
           "host: No devices found\")")
HIP = "ROCm 6.1 HIP hip_runtime_api.h hipErrorNoDevice (\"no ROCm-capable device is detected\")"

_S = False
AMD_FIX = ("the AMD GPU is not reachable where the job runs: a container needs `--device=/dev/kfd "
           "--device=/dev/dri` and the video/render groups; check `rocm-smi` on the host, or rent "
           "another box")


def _n(text, example, source, emitter):
    return lit("driver_too_old", text, example, source, emitter, _S)._replace(fix=NOT_LOADED_FIX)


def _nx(pattern, example, source, keywords, emitter):
    return rx("driver_too_old", pattern, example, source, keywords, emitter,
              _S)._replace(fix=NOT_LOADED_FIX)


# Only the fatal forms: a CPU-only run prints the same words and goes on (TensorFlow logs
# "failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected" and runs
# on the CPU; torch warns "UserWarning: CUDA initialization: Found no NVIDIA driver on your
# system"), and a later failure of that run is not the GPU's.
ROWS = (
    lit("driver_too_old", "CUDA error: no CUDA-capable device is detected",
        "RuntimeError: CUDA error: no CUDA-capable device is detected", RT, "cuda",
        _S)._replace(fix=NOT_LOADED_FIX),
    _n("cudaErrorNoDevice", "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorNoDevice: "
       "no CUDA-capable device is detected", RT, "cuda"),
    _n("results in CUDA_ERROR_NO_DEVICE", "numba.cuda.cudadrv.error.CudaSupportError: Error at "
       "driver init: Call to cuInit results in CUDA_ERROR_NO_DEVICE (100)", DRV, "cuda"),
    _nx(r"Error: (No CUDA GPUs are available|Found no NVIDIA driver on your system)",
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA "
        "GPU and installed a driver from http://www.nvidia.com/Download/index.aspx", TORCH,
        ("No CUDA GPUs are available", "Found no NVIDIA driver on your system"), "torch"),
    _n("Torch is not able to use GPU; add --skip-torch-cuda-test",
       "RuntimeError: Torch is not able to use GPU; add --skip-torch-cuda-test to COMMANDLINE_ARGS "
       "variable to disable this check", A1111, "stable-diffusion-webui"),
    _n("No supported gpu backend found!",
       "lightning_fabric.utilities.exceptions.MisconfigurationException: No supported gpu backend "
       "found!", LIGHTNING, "lightning"),
    _n("Failed to infer device type", "RuntimeError: Failed to infer device type", VLLM, "vllm"),
    # AMD's: the container was started without the GPU's device files
    lit("driver_too_old", "HIP error: no ROCm-capable device is detected",
        "RuntimeError: HIP error: no ROCm-capable device is detected", HIP, "hip",
        _S)._replace(fix=AMD_FIX),
    lit("driver_too_old", "Could not initialize Tensile host: No devices found",
        "rocblaslt error: Could not initialize Tensile host: No devices found", TENSILE, "rocblas",
        _S)._replace(fix=AMD_FIX),
    lit("code_error", "Torch not compiled with CUDA enabled",
        "AssertionError: Torch not compiled with CUDA enabled", TORCH, "torch")._replace(fix=FIX),
    # the same for any device type the installed build lacks (a CPU wheel under IPEX, ROCm)
    rx("code_error", r"PyTorch is not linked with support for (cuda|xpu|hip|privateuseone) devices",
       "RuntimeError: PyTorch is not linked with support for xpu devices", LINKED,
       ("PyTorch is not linked with support for ",), "torch")._replace(fix=FIX),
)
