"""The portable GPU APIs a job may run on instead of CUDA: OpenCL (PyOpenCL, hashcat-style
tools, SYCL's OpenCL backend) and Vulkan (llama.cpp's ggml-vulkan, Vulkan-Hpp programs).

Each names device memory apart: OpenCL's MEM_OBJECT_ALLOCATION_FAILURE and Vulkan's
OUT_OF_DEVICE_MEMORY are the device's memory (cuda_oom's class on any vendor); OpenCL's
OUT_OF_RESOURCES is often that too but also other exhausted resources (suggestive); a lost
Vulkan device is the GPU hung or reset (suggestive gpu_hardware, as Level Zero's).
"""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

CL = ("Khronos OpenCL 3.0 CL/cl.h (CL_MEM_OBJECT_ALLOCATION_FAILURE -4, CL_OUT_OF_RESOURCES -5); "
      "PyOpenCL 2024.1 (pyopencl._cl.MemoryError: \"... failed: MEM_OBJECT_ALLOCATION_FAILURE\")")
VK = ("Vulkan 1.3 vulkan_core.h VkResult (VK_ERROR_OUT_OF_DEVICE_MEMORY -2, VK_ERROR_DEVICE_LOST -4); "
      "Vulkan-Hpp 1.3 vulkan.hpp (vk::OutOfDeviceMemoryError \"ErrorOutOfDeviceMemory\", "
      "vk::DeviceLostError \"ErrorDeviceLost\")")
GGML = ("llama.cpp b4000 ggml/src/ggml-vulkan/ggml-vulkan.cpp (\"ggml_vulkan: Device memory allocation "
        "of size %zu failed.\")")

_S = False

ROWS = (
    lit("cuda_oom", "MEM_OBJECT_ALLOCATION_FAILURE",
        "pyopencl._cl.MemoryError: clEnqueueNDRangeKernel failed: MEM_OBJECT_ALLOCATION_FAILURE", CL,
        "opencl"),
    lit("cuda_oom", "CL_OUT_OF_RESOURCES", "clEnqueueNDRangeKernel(): CL_OUT_OF_RESOURCES", CL,
        "opencl", _S),
    rx("cuda_oom", r"VK_ERROR_OUT_OF_DEVICE_MEMORY|ErrorOutOfDeviceMemory",
       "  what():  vk::Device::allocateMemory: ErrorOutOfDeviceMemory", VK,
       ("VK_ERROR_OUT_OF_DEVICE_MEMORY", "ErrorOutOfDeviceMemory"), "vulkan"),
    rx("cuda_oom", r"ggml_vulkan: Device memory allocation of size [0-9]+ failed",
       "ggml_vulkan: Device memory allocation of size 4294967296 failed.", GGML,
       ("ggml_vulkan: Device memory allocation",), "ggml"),
    rx("gpu_hardware", r"VK_ERROR_DEVICE_LOST|ErrorDeviceLost",
       "vk::Queue::submit: ErrorDeviceLost", VK, ("VK_ERROR_DEVICE_LOST", "ErrorDeviceLost"),
       "vulkan", _S),
)
