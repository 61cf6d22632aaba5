"""NVIDIA PhysX's GPU simulation (under Isaac Gym, Isaac Sim / Isaac Lab, OmniIsaacGymEnvs)
failing to allocate device memory for its buffers: its CUDA device allocator says
"PxgCudaDeviceMemoryAllocator fail to allocate memory N bytes!! Result = R" (R the CUresult,
2 = CUDA_ERROR_OUT_OF_MEMORY), with no CUDA error text of its own, before the simulation
stops. The GPU's memory, as Isaac Gym's own "Gym cuda error: out of memory" (cudarelay.py): too
many environments for the card. Read after a field case (an Isaac Gym job on a rented GPU)
ended with it and no row named it.

PhysX's default error callback prints every error as "<file> (<line>) : <code> : <message>";
an "internal error" (PxErrorCode::eINTERNAL_ERROR: the GPU pipeline's own CUDA calls failing,
`SynchronizeStreams cuEventRecord failed`, `memcpy failed fail! 700`, an illegal address) is
the simulation failing on what it was given (too many environments for its
buffers, a bad asset): the job's, code_error, suggestively. Read after a field case (an Isaac
Gym mimic task at 2048 environments, fixed in the task's code) ended with them and a segfault."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

PHYSX = ("NVIDIA PhysX 5.1 source/gpucommon/src/PxgCudaMemoryAllocator.cpp "
         "(PxgCudaDeviceMemoryAllocator::allocate: \"PxgCudaDeviceMemoryAllocator fail to allocate "
         "memory %d bytes!! Result = %d\")")

PXERR = ("NVIDIA PhysX 5.1 source/foundation PxDefaultErrorCallback::reportError (\"%s (%d) : %s : "
         "%s\" with PxErrorCode's name: \"internal error\" for eINTERNAL_ERROR)")

ROWS = found_via(
    ("wave6/cases/cuda_oom/e-isaacgymenvs-256-pxgcudadevicememoryallocator-result-2.log",),
    rx("cuda_oom", r"PxgCudaDeviceMemoryAllocator fail(ed)? to allocate memory",
       "PxgCudaDeviceMemoryAllocator fail to allocate memory 100663296 bytes!! Result = 2", PHYSX,
       ("PxgCudaDeviceMemoryAllocator fail",), "physx"),
) + found_via(
    ("wave6/cases/code_error/e-protomotions-222-physx-memcpy-700-segfault-2048-envs.log",),
    rx("code_error", r"\([0-9]+\) : internal error : ",
       "/buildAgent/work/99bede84aa0a52c2/source/gpucommon/include/PxgCudaUtils.h (54) : internal "
       "error : SynchronizeStreams cuEventRecord failed", PXERR, (") : internal error : ",), "physx",
       False),
)
