"""The CUDA error checks that simulation and research codes write for themselves, relaying the
runtime's or the driver's "out of memory" (cudaGetErrorString(cudaErrorMemoryAllocation = 2),
cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY)) in the few shapes they are copied in:

  - a line naming CUDA or the call that failed: SPECFEM's `CUDA error !!!!! <out of memory>
    !!!!!`, dlib's `Error while calling cudaMalloc(...) ... reason: out of memory`, PyCUDA's
    `cuMemAlloc failed: out of memory` (raised as pycuda._driver.MemoryError: emitters.py
    reads the failed CUDA call as the device's memory), the `GPUassert: out of memory file.cu
    42` of the widely copied gpuErrchk macro;
  - "CUDA by Example"'s HANDLE_ERROR, `out of memory in kernel.cu at line 42` (RELION adds
    the code): the same words from a host malloc wrapper exist, so suggestive;
  - a `CUDA Error:` header with its fields on the lines below (GPUMD: `Error code: 2`, `Error
    text: out of memory`): a CUDA error of the job's own until the fields, read with the
    header (tailread.continuation, emitters.py's "a CUDA error check's report"), say which.

A C++ CUDA error class whose what() ends in the file and goes on below (mallocMC's `CUDA::error`
then `error: out of memory`) is read the same way by tailread.py. Read after six field cases
(MD, seismic, cryo-EM, PIC and face-detection codes) ended with these and no row named them."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

CASES = "wave6/cases/cuda_oom/"
CHECKS = ("CUDA Runtime API 12.4 cudaGetErrorString(cudaErrorMemoryAllocation = 2) = \"out of "
          "memory\", cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY) = \"out of memory\", as hand-written "
          "checks print it: the gpuErrchk macro (\"GPUassert: %s %s %d\"), PyCUDA 2024.1 "
          "src/cpp/cuda.hpp error::make_message (\"%s failed: %s\"), SPECFEM3D 4.1 "
          "exit_on_cuda_error (\"CUDA error !!!!! <%s> !!!!!\"), dlib 19.24 cuda_errors.h "
          "(\"Error while calling %s ... code: %d, reason: %s\")")
HANDLE = ("\"CUDA by Example\" (Sanders & Kandrot 2010) common/book.h HandleError (\"%s in %s at line "
          "%d\" with cudaGetErrorString), as RELION 4 src/acc/cuda/cuda_settings.h HANDLE_ERROR "
          "(\"%s in %s at line %d (error-code %d)\") prints it")
HEADER = ("GPUMD 3.9 src/utilities/error.cuh CHECK (\"CUDA Error:\" then \"File:\", \"Line:\", "
          "\"Error code:\", \"Error text: %s\" with cudaGetErrorString, one per line)")

ROWS = found_via(
    (CASES + "e-specfem3d-1344-cuda-error-2402-out-of-memory-mpi-abort.log",
     CASES + "e-dlib-462-cudnn-dlibapi-cudamalloc-code-2-out-of-memory.log",
     CASES + "e-cryosparc-196-pycuda-cumemalloc-failed-out-of-memory.log"),
    rx("cuda_oom", r"(CUDA|Cuda|GPUassert|cuda[A-Z]|cu[A-Z][a-z]+[A-Z]).*[^A-Za-z]out of memory",
       "Error while calling cudaMalloc(&data, size) in file /src/dlib/cuda/gpu_data.cpp:188. code: "
       "2, reason: out of memory", CHECKS, ("out of memory",), "cuda-check"),
) + found_via(
    (CASES + "e-relion-488-acc-backprojector-out-of-memory-error-code-2.log",),
    rx("cuda_oom", r"out of memory in [^ ]+ at line [0-9]+",
       "ERROR: out of memory in /opt/relion/src/acc/acc_projector_impl.h at line 38 (error-code 2)",
       HANDLE, ("out of memory in ",), "cuda-check", False),
) + found_via(
    (CASES + "e-gpumd-725-gpu-vector-error-code-2-out-of-memory.log",),
    rx("code_error", r"^ *CUDA [Ee]rror: *$", "CUDA Error:", HEADER, ("CUDA Error:", "CUDA error:"),
       "cuda-check", False),
)
