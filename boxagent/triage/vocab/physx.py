"""NVIDIA PhysX's GPU simulation (under Isaac Gym, Isaac Sim / Isaac Lab, OmniIsaacGymEnvs)
failing to allocate device memory for its buffers: its CUDA device allocator says
"PxgCudaDeviceMemoryAllocator fail to allocate memory N bytes!! Result = R" (R the CUresult,
2 = CUDA_ERROR_OUT_OF_MEMORY), with no CUDA error text of its own, before the simulation
stops. The GPU's memory, as Isaac Gym's own "Gym cuda error: out of memory" (cudarelay.py): too
many environments for the card. Read after a field case (an Isaac Gym job on a rented GPU)
ended with it and no row named it."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

PHYSX = ("NVIDIA PhysX 5.1 source/gpucommon/src/PxgCudaMemoryAllocator.cpp "
         "(PxgCudaDeviceMemoryAllocator::allocate: \"PxgCudaDeviceMemoryAllocator fail to allocate "
         "memory %d bytes!! Result = %d\")")

ROWS = found_via(
    ("wave6/cases/cuda_oom/e-isaacgymenvs-256-pxgcudadevicememoryallocator-result-2.log",),
    rx("cuda_oom", r"PxgCudaDeviceMemoryAllocator fail(ed)? to allocate memory",
       "PxgCudaDeviceMemoryAllocator fail to allocate memory 100663296 bytes!! Result = 2", PHYSX,
       ("PxgCudaDeviceMemoryAllocator fail",), "physx"),
)
