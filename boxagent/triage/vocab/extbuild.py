"""CUDA extensions built or loaded at run time: torch.utils.cpp_extension (JIT loads and
setup.py builds of flash-attn, xformers, apex, DeepSpeed ops ...), nvcc's host-compiler check,
CMake's CUDA language support, bitsandbytes' native library, and a compiled extension loaded
into a torch it was not built against.

Each is the environment the job installed, not its training code: the same pip/conda step
fails the same way on every retry, and the fix is the install's (install.FIX). An extension
`.so` that cannot resolve a symbol in torch's C++ namespaces (c10::, at::, torch::; mangled
_ZN3c10, _ZN2at, _ZN5torch) was compiled against another torch: the loader's words
(`undefined symbol:`) with torch's mangled names are read as that, whichever package it is.
"""
from __future__ import annotations

from boxagent.triage.vocab.install import FIX
from boxagent.triage.vocab.table import Row, lit, rx

EXT = ("PyTorch 2.4 torch/utils/cpp_extension.py (\"CUDA_HOME environment variable is not set. "
       "Please set it to your CUDA install root.\", \"Error compiling objects for extension\", "
       "\"Ninja is required to load C++ extensions\", _run_ninja_build: \"Error building extension '%s'\", _check_cuda_version: \"The detected CUDA "
       "version (%s) mismatches the version that was used to compile PyTorch (%s).\")")
NVCC = ("CUDA Toolkit 12.4 include/crt/host_config.h (#error -- unsupported GNU version! gcc "
        "versions later than 13 are not supported!)")
CMAKE = ("CMake 3.29 Modules/CMakeDetermineCUDACompiler.cmake (\"No CMAKE_CUDA_COMPILER could be "
         "found.\"), Modules/FindCUDAToolkit.cmake")
DS = ("DeepSpeed 0.14 op_builder/builder.py (MissingCUDAException \"CUDA_HOME does not exist, unable "
      "to compile CUDA op(s)\"), assert_no_cuda_mismatch (\"Installed CUDA version %s "
      "does not match the version torch was compiled with %s, unable to compile cuda/cpp "
      "extensions without a matching cuda version.\")")
APEX = ("NVIDIA apex 24.04 setup.py check_cuda_torch_binary_vs_bare_metal (\"Cuda extensions are "
        "being compiled with a version of Cuda that does not match the version used to compile "
        "Pytorch binaries.\")")
FA = ("flash-attention 2.5 setup.py (RuntimeError(\"FlashAttention is only supported on CUDA 11.7 "
      "and above.\"))")
PAIRS = ("torchvision 0.19 torchvision/extension.py _check_cuda_version (\"Detected that PyTorch and "
         "torchvision were compiled with different CUDA versions.\"); the same check in torchaudio "
         "2.4 torchaudio/_extension/utils.py and torch_sparse/torch_scatter 2.1 __init__.py")
HF_FA = ("transformers 4.44 src/transformers/modeling_utils.py _check_and_enable_flash_attn_2 "
         "(\"... the package flash_attn seems to be not installed.\")")
XFORMERS = ("xformers 0.0.27 xformers/ops/fmha/dispatch.py / common.py not_supported_reasons "
            "(\"xFormers wasn't build with CUDA support\")")
# (0.43's "compiled without GPU support" is a UserWarning printed by runs that go on fine: no row)
BNB = ("bitsandbytes 0.41 bitsandbytes/functional.py (lib.cadam32bit_grad_fp32 ... on the native "
       "library that failed to load: lib is None), bitsandbytes/cuda_setup/main.py (\"CUDA Setup "
       "failed despite GPU being "
       "available.\", \"CUDA SETUP: Required library version not found: %s. Maybe you need to "
       "compile it from source?\")")
LD = ("glibc 2.35 elf/dl-lookup.c _dl_lookup_symbol_x (\"undefined symbol: %s\"); Itanium C++ ABI "
      "2023 mangling of namespaces c10 (_ZN3c10), at (_ZN2at), torch (_ZN5torch)")
GCC = "GCC 12 gcc/c-family/c-opts.c / libcpp (\"fatal error: %s: No such file or directory\")"


def _b(row: Row) -> Row:
    return row._replace(cls="code_error", fix=FIX)


ROWS = tuple(_b(r) for r in (
    lit("", "CUDA_HOME environment variable is not set",
        "OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install "
        "root.", EXT, "cpp_extension"),
    lit("", "Error compiling objects for extension",
        "RuntimeError: Error compiling objects for extension", EXT, "cpp_extension"),
    lit("", "Error building extension '",
        "RuntimeError: Error building extension 'fused_adam'", EXT, "cpp_extension"),
    lit("", "Ninja is required to load C++ extensions",
        "RuntimeError: Ninja is required to load C++ extensions", EXT, "cpp_extension"),
    rx("", r"The detected CUDA version \([0-9.]+\) mismatches the version that was used to "
       r"compile",
       "RuntimeError: The detected CUDA version (12.4) mismatches the version that was used to "
       "compile PyTorch (11.8). Please make sure to use the same CUDA versions.", EXT,
       ("mismatches the version that was used to compile",), "cpp_extension"),
    lit("", "unsupported GNU version!",
        "/usr/local/cuda/include/crt/host_config.h:143:2: error: #error -- unsupported GNU "
        "version! gcc versions later than 13 are not supported! The nvcc flag "
        "'-allow-unsupported-compiler' can be used to override this version check", NVCC, "nvcc"),
    lit("", "No CMAKE_CUDA_COMPILER could be found",
        "CMake Error at CMakeLists.txt:3 (project): No CMAKE_CUDA_COMPILER could be found.", CMAKE,
        "cmake"),
    rx("", r"Installed CUDA version [0-9.]+ does not match the version torch was compiled with",
       "Exception: >- DeepSpeed Op Builder: Installed CUDA version 12.4 does not match the version "
       "torch was compiled with 12.1, unable to compile cuda/cpp extensions without a matching "
       "cuda version.", DS, ("does not match the version torch was compiled with",), "deepspeed"),
    lit("", "Cuda extensions are being compiled with a version of Cuda that does not match",
        "RuntimeError: Cuda extensions are being compiled with a version of Cuda that does not "
        "match the version used to compile Pytorch binaries.  Pytorch binaries were compiled with "
        "Cuda 12.1.", APEX, "apex"),
    lit("", "CUDA_HOME does not exist, unable to compile CUDA op",
        "deepspeed.ops.op_builder.builder.MissingCUDAException: CUDA_HOME does not exist, unable to "
        "compile CUDA op(s)", DS, "deepspeed"),
    rx("", r"FlashAttention is only supported on CUDA [0-9.]+ and above",
       "RuntimeError: FlashAttention is only supported on CUDA 11.7 and above.  Note: make sure nvcc "
       "has a supported version by running nvcc -V.", FA, ("FlashAttention is only supported on CUDA",),
       "flash-attn"),
    lit("", "CUDA SETUP: Required library version not found",
        "CUDA SETUP: Required library version not found: libbitsandbytes_cuda121.so. Maybe you need "
        "to compile it from source?", BNB, "bitsandbytes"),
    rx("", r"Detected that PyTorch and [A-Za-z_]+ were compiled with different CUDA versions",
       "RuntimeError: Detected that PyTorch and torch_sparse were compiled with different CUDA "
       "versions. PyTorch has CUDA version 11.8 and torch_sparse has CUDA version 12.1. Please "
       "reinstall the torch_sparse that matches your PyTorch install.", PAIRS,
       ("were compiled with different CUDA versions",), "torchvision"),
    lit("", "the package flash_attn seems to be not installed",
        "ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following "
        "error: the package flash_attn seems to be not installed. Please refer to the documentation "
        "of https://huggingface.co/docs/transformers/perf_infer_gpu_one#flashattention-2 to install "
        "Flash Attention 2.", HF_FA, "transformers"),
    lit("", "xFormers wasn't build with CUDA support",
        "        xFormers wasn't build with CUDA support", XFORMERS,
        "xformers"),
    rx("", r"'NoneType' object has no attribute 'c(adam32bit_grad_fp32|quantize_blockwise_fp(16|32)|"
       r"dequantize_blockwise_fp(16|32)|get_managed_ptr)'",
       "AttributeError: 'NoneType' object has no attribute 'cadam32bit_grad_fp32'", BNB,
       ("'NoneType' object has no attribute 'c",), "bitsandbytes"),
    lit("", "CUDA Setup failed despite GPU being available",
        "RuntimeError: CUDA Setup failed despite GPU being available. Please run the following "
        "command to get more information: python -m bitsandbytes", BNB, "bitsandbytes"),
    rx("", r"\.so: undefined symbol: _ZN(3c10|2at|5torch)",
       "ImportError: /usr/local/lib/python3.10/dist-packages/flash_attn_2_cuda.cpython-310-x86_64-"
       "linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi", LD, (".so: undefined symbol: _ZN",),
       "ld.so"),
    rx("", r"fatal error: (cuda_runtime|cuda|cublas_v2|cusparse|Python|nccl)(_api)?\.h: No such "
       r"file or directory",
       "/tmp/pip-install/csrc/ops.cu:1:10: fatal error: cuda_runtime.h: No such file or directory",
       GCC, (".h: No such file or directory",), "gcc"),
))
