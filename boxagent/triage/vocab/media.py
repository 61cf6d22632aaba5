"""GPU boxes rented for rendering and video: Blender's Cycles renderer and FFmpeg's NVIDIA
encoder (NVENC) and CUDA hardware context.

Cycles reports device memory as "System is out of GPU memory" when an allocation fails and as
"Out of memory in <call>" when a CUDA call inside its queue does (any driver call: cuew's
words for CUDA_ERROR_OUT_OF_MEMORY before Cycles' " in <call>"): cuda_oom's class, as any
allocator's; cuew's words for the driver's other results are cuew.py's. FFmpeg built against
a newer NVENC SDK than the driver offers says which driver it needs: the driver is older than
the software, driver_too_old. FFmpeg's CUDA hardware
context failing at cuInit with no device is the GPU not reachable (nogpu.py's reading).
"""
from __future__ import annotations

from boxagent.triage.vocab.containers import NOT_LOADED_FIX
from boxagent.triage.vocab.table import rx

CYCLES = ("Blender 4.1 intern/cycles/device/memory.cpp / device/cuda/device_impl.cpp (set_error(\"System "
          "is out of GPU memory\"), \"System is out of GPU and shared host memory\"), "
          "device/cuda/queue.cpp (\"%s in CUDA queue enqueue (%s)\" with the CUDA error's text)")
NVENC = ("FFmpeg 7.0 libavcodec/nvenc.c nvenc_check_capabilities / nvenc_load_libraries (\"Driver does "
         "not support the required nvenc API version. Required: %d.%d Found: %d.%d\", \"The minimum "
         "required Nvidia driver for nvenc is %s or newer\")")
HWCTX = ("FFmpeg 7.0 libavutil/hwcontext_cuda.c with compat/cuda check (\"cu->cuInit(0) failed -> "
         "%s: %s\")")

ROWS = (
    rx("cuda_oom", r"System is out of GPU (and shared host )?memory|Out of memory in (CUDA queue "
       r"enqueue|cu[A-Z][A-Za-z0-9_]*)",
       "Error: Out of memory in CUDA queue enqueue (integrator_shade_surface)", CYCLES,
       ("System is out of GPU", "Out of memory in "), "cycles"),
    rx("driver_too_old", r"Driver does not support the required nvenc API version|The minimum "
       r"required Nvidia driver for nvenc is",
       "[h264_nvenc @ 0x55747eaba200] Driver does not support the required nvenc API version. "
       "Required: 12.1 Found: 12.0", NVENC,
       ("does not support the required nvenc API version", "minimum required Nvidia driver for nvenc"),
       "ffmpeg"),
    rx("driver_too_old", r"cuInit\(0\) failed -> CUDA_ERROR_NO_DEVICE",
       "[AVHWDeviceContext @ 0x5581b0] cu->cuInit(0) failed -> CUDA_ERROR_NO_DEVICE: no CUDA-capable "
       "device is detected", HWCTX, ("cuInit(0) failed -> CUDA_ERROR_NO_DEVICE",), "ffmpeg",
       False)._replace(fix=NOT_LOADED_FIX),
)
