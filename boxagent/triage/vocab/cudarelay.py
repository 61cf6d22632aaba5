"""Libraries that report CUDA's own failure in their own words: CTranslate2 (faster-whisper),
Caffe's glog CHECK, TVM's and DGL's CUDA_CALL, Darknet, OpenCV's CUDA module, RAPIDS' memory manager (RMM, under cuDF,
cuML, XGBoost and Dask), Isaac Gym, and the missing CUDA user-space libraries as the loaders
that look for them say it (the dynamic loader, CTranslate2's, cuDNN 8's and 9's).

Each relays cudaGetErrorString's "out of memory" (or the allocator's own pool limit) behind
its prefix: device memory, whatever prefix. RMM raises it as a C++ std::bad_alloc that Python
shows as MemoryError; the emitters table reads the CUDA names in it as device memory, not the
host's. A CUDA library (cuBLAS, cuDNN, the runtime) that the loader cannot find or that lacks
a versioned symbol is the environment's install: the torch/CUDA wheels and the system's CUDA
disagree (install.FIX).
"""
from __future__ import annotations

from boxagent.triage.vocab.install import FIX
from boxagent.triage.vocab.table import lit, rx

CT2 = ("CTranslate2 4.3 include/ctranslate2/cuda/utils.h CUDA_CHECK (THROW_RUNTIME_ERROR(\"CUDA failed "
       "with error \" + cudaGetErrorString(status))), src/cuda/... dynamic loading (\"Library %s is "
       "not found or cannot be loaded\")")
CAFFE = ("Caffe 1.0 include/caffe/util/device_alternate.hpp CUDA_CHECK (CHECK_EQ(error, cudaSuccess) "
         "<< \" \" << cudaGetErrorString(error))")
DARKNET = "Darknet (AlexeyAB) 2023 src/dark_cuda.c check_error (\"CUDA Error: %s\")"
OPENCV = ("OpenCV 4.8 modules/core/include/opencv2/core/cuda/common.hpp cudaSafeCall "
          "(cv::Error::GpuApiCallError -217 \"Gpu API call\" with cudaGetErrorString)")
RMM = ("RMM 24.06 include/rmm/detail/error.hpp (RMM_FAIL \"RMM failure at: \", rmm::out_of_memory, "
       "RMM_CUDA_TRY \"CUDA error at: \"), include/rmm/mr/device/pool_memory_resource.hpp "
       "(\"Maximum pool size exceeded\")")
CUDNN = "cuDNN 8.9 libcudnn.so sub-library loader (\"Could not load library %s. Error: %s\")"
CUDNN9 = ("cuDNN 9.1 libcudnn.so sub-library loader (\"Unable to load any of {%s}\", \"Invalid handle. "
          "Cannot load symbol %s\")")
TVM = ("Apache TVM 0.16 src/runtime/cuda/cuda_common.h CUDA_CALL (CHECK(e == cudaSuccess || e == "
       "cudaErrorCudartUnloading) << \"CUDA: \" << cudaGetErrorString(e)); the same macro in DGL 2.1 "
       "src/runtime/cuda/cuda_common.h and BytePS")
GYM = ("NVIDIA Isaac Gym Preview 4 carb.gym.plugin (\"Gym cuda error: %s: %s: %d\" with the CUDA "
       "error's text)")
LD = ("glibc 2.35 elf/dl-load.c (\"cannot open shared object file\"), elf/dl-lookup.c (\"undefined "
      "symbol: %s, version %s\"); CUDA Toolkit 12.4 library names (libcudart, libcublas, "
      "libcublasLt, libcudnn*, libnccl, libnvrtc, libcufft, libcurand, libcusparse, libcusolver, "
      "libnvJitLink)")

_CUDALIB = r"(cudart|cublas|cublasLt|cudnn[A-Za-z_]*|nccl|nvrtc|cufft|curand|cusparse|cusolver|nvJitLink)"

ROWS = (
    lit("cuda_oom", "CUDA failed with error out of memory",
        "RuntimeError: CUDA failed with error out of memory", CT2, "ctranslate2"),
    rx("cuda_oom", r"Check failed: error == cudaSuccess \(2 vs\. 0\) +out of memory",
       "F0101 00:00:00.000000  1234 syncedmem.cpp:71] Check failed: error == cudaSuccess (2 vs. 0)  "
       "out of memory", CAFFE, ("error == cudaSuccess (2 vs. 0)",), "caffe"),
    lit("cuda_oom", "CUDA Error: out of memory", "CUDA Error: out of memory", DARKNET, "darknet"),
    lit("cuda_oom", "(-217:Gpu API call) out of memory",
        "cv2.error: OpenCV(4.8.0) /io/opencv/modules/core/src/cuda/gpu_mat.cu:116: error: "
        "(-217:Gpu API call) out of memory in function 'allocate'", OPENCV, "opencv"),
    rx("cuda_oom", r"RMM failure at: ?[^ ]+: Maximum pool size exceeded|out_of_memory: CUDA error at: ",
       "MemoryError: std::bad_alloc: out_of_memory: RMM failure at:/rmm/include/rmm/mr/device/"
       "pool_memory_resource.hpp:196: Maximum pool size exceeded", RMM,
       ("Maximum pool size exceeded", "out_of_memory: CUDA error at: "), "rmm"),
    lit("cuda_oom", "cudaErrorCudartUnloading: CUDA: out of memory",
        "dgl._ffi.base.DGLError: [10:00:00] /opt/dgl/src/runtime/cuda/cuda_device_api.cc:117: Check "
        "failed: e == cudaSuccess || e == cudaErrorCudartUnloading: CUDA: out of memory", TVM,
        "dgl"),
    rx("cuda_oom", r"Gym cuda error: out of memory",
       "[Error] [carb.gym.plugin] Gym cuda error: out of memory: ../../../source/plugins/carb/gym/"
       "impl/Gym/GymPhysX.cpp: 1721", GYM, ("Gym cuda error: out of memory",), "isaacgym"),
    # the CUDA user-space libraries missing or from another release
    rx("code_error", r"Unable to load any of \{libcudnn|Invalid handle\. Cannot load symbol cudnn",
       "Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9, "
       "libcudnn_ops.so}", CUDNN9, ("Unable to load any of {libcudnn", "Cannot load symbol cudnn"),
       "cudnn")._replace(fix=FIX),
    rx("code_error", r"Library (lib)?" + _CUDALIB + r"[0-9_]*\.(so|dll)[.0-9]* is not found or "
       r"cannot be loaded",
       "RuntimeError: Library libcublas.so.12 is not found or cannot be loaded", CT2,
       (" is not found or cannot be loaded",), "ctranslate2")._replace(fix=FIX),
    rx("code_error", r"Could not load library libcudnn[A-Za-z_]*\.so",
       "Could not load library libcudnn_ops_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot open "
       "shared object file: No such file or directory", CUDNN, ("Could not load library libcudnn",),
       "cudnn")._replace(fix=FIX),
    rx("code_error", r"lib" + _CUDALIB + r"\.so(\.[0-9]+)*: cannot open shared object file",
       "ImportError: libcudart.so.11.0: cannot open shared object file: No such file or directory",
       LD, (": cannot open shared object file",), "ld.so")._replace(fix=FIX),
    rx("code_error", r"undefined symbol: [A-Za-z0-9_]+, version lib" + _CUDALIB + r"\.so",
       "OSError: /env/lib/python3.10/site-packages/torch/lib/../../nvidia/cublas/lib/libcublas.so.12: "
       "undefined symbol: cublasLtGetStatusString, version libcublasLt.so.12", LD,
       (", version lib",), "ld.so")._replace(fix=FIX),
)
