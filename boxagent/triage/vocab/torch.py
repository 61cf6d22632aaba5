"""PyTorch's own words (and its launchers'), where they name a cause: the caching allocator's
OOM, the driver and capability checks, the checkpoint writer and reader, the distributed
stack's NCCL watchdog and rendezvous errors. Older eras' wordings (THC, torch < 1.0) stay:
old images still print them."""
from __future__ import annotations

from typing import Tuple

from boxagent.triage.vocab.table import Row, found_via, lit, rx

ALLOC = "PyTorch 2.4 c10/cuda/CUDACachingAllocator.cpp (\"CUDA out of memory. Tried to allocate\")"
OOM_T = "PyTorch 2.4 torch/__init__.py torch.OutOfMemoryError (torch.cuda.OutOfMemoryError before 2.5)"
HIP = "PyTorch 2.4 ROCm build (hipified CUDACachingAllocator: \"HIP out of memory\")"
THC = "PyTorch 0.4 aten/src/THC/THCGeneral.cpp THCudaCheck (\"THCudaCheck FAIL ... error=%d : %s\")"
DRV = "PyTorch 2.4 c10/cuda/CUDAFunctions.cpp (\"The NVIDIA driver on your system is too old\")"
CAP = "PyTorch 2.4 torch/cuda/__init__.py _check_capability"
ORT = "ONNX Runtime 1.18 onnxruntime/core/providers/cuda/cuda_call.cc (\"CUDA failure %d: %s\")"
WRITER = "PyTorch 2.4 caffe2/serialize/inline_container.cc PyTorchStreamWriter"
IOS = "GCC 13 libstdc++-v3 basic_ios::clear throwing ios_base::failure (what(): \"basic_ios::clear: iostream error\")"
LEGACY = "PyTorch 2.4 torch/csrc/serialization.cpp doRead (\"unexpected EOF, expected %d more bytes\")"
PIL = "Pillow 10.4 src/PIL/ImageFile.py ImageFile.load"
PG = "PyTorch 2.4 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp and NCCLUtils.hpp"
C10D = "PyTorch 2.4 torch/distributed (DistBackendError: c10/util/Exception.h)"
RDZV = "PyTorch 2.4 torch/distributed/elastic/rendezvous/api.py"

_S = False

ROWS: Tuple[Row, ...] = (
    lit("cuda_oom", "CUDA out of memory", "torch.OutOfMemoryError: CUDA out of memory. Tried to "
        "allocate 20.00 MiB", ALLOC, "torch"),
    lit("cuda_oom", "OutOfMemoryError", "torch.cuda.OutOfMemoryError: CUDA out of memory.", OOM_T,
        "torch"),
    lit("cuda_oom", "HIP out of memory", "torch.OutOfMemoryError: HIP out of memory. Tried to "
        "allocate 2.00 GiB", HIP, "torch"),
    lit("cuda_oom", "error=2 : out of memory", "THCudaCheck FAIL file=/pytorch/aten/src/THC/"
        "generic/THCStorage.cu line=58 error=2 : out of memory", THC, "torch"),
    lit("cuda_oom", "cuda runtime error (2)", "RuntimeError: cuda runtime error (2) : out of "
        "memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510", THC, "torch"),
    lit("driver_too_old", "driver on your system is too old", "CUDA initialization: The NVIDIA "
        "driver on your system is too old (found version 11040).", DRV, "torch"),
    rx("driver_too_old", r"[Pp]lease update your (GPU |NVIDIA )?driver",
       "Please update your GPU driver by downloading and installing a new version from the URL: "
       "http://www.nvidia.com/Download/index.aspx", DRV, ("lease update your",), "torch"),
    lit("driver_too_old", "CUDA failure 804", "CUDA failure 804: forward compatibility was "
        "attempted on non supported HW ; GPU=0 ; hostname=x ; expr=cudaSetDevice(0);", ORT,
        "onnxruntime"),
    lit("torch_arch_mismatch", "is not compatible with the current PyTorch installation",
        "NVIDIA H100 80GB HBM3 with CUDA capability sm_90 is not compatible with the current "
        "PyTorch installation.", CAP, "torch"),
    rx("disk_full", r"unexpected pos [0-9]+ vs [0-9]+", "RuntimeError: [enforce fail at "
       "inline_container.cc:595] . unexpected pos 1839285248 vs 1839285136", WRITER,
       ("unexpected pos",), "torch"),
    lit("disk_full", "PytorchStreamWriter failed writing file", "RuntimeError: [enforce fail at "
        "inline_container.cc:778] . PytorchStreamWriter failed writing file data/176: file write "
        "failed", WRITER, "torch"),
    lit("disk_full", "basic_ios::clear: iostream error", "terminate called after throwing an "
        "instance of 'std::ios_base::failure' what():  basic_ios::clear: iostream error", IOS,
        "libstdc++", _S),
    rx("truncated_checkpoint", r"unexpected EOF, expected [0-9]+ more bytes", "RuntimeError: "
       "unexpected EOF, expected 3 more bytes. The file might be corrupted.", LEGACY,
       ("unexpected EOF",), "torch"),
    lit("truncated_checkpoint", "image file is truncated", "OSError: image file is truncated (48 "
        "bytes not processed)", PIL, "pillow"),
    rx("nccl", r"NCCL [Ee]rror", "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/"
       "ProcessGroupNCCL.cpp:1275, unhandled system error", PG, ("NCCL error", "NCCL Error"),
       "torch"),
    lit("nccl", "Watchdog caught collective operation timeout", "[Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=51, OpType=ALLREDUCE) ran for 600017 "
        "milliseconds before timing out.", PG, "torch"),
    lit("nccl", "NCCL communicator was aborted", "RuntimeError: NCCL communicator was aborted on "
        "rank 1.", PG, "torch"),
    # the watchdog relays what its work check threw; a CUDA error it relays (`NCCL watchdog
    # thread terminated with exception: CUDA error: an illegal memory access was encountered`,
    # ProcessGroupNCCL::ncclCommWatchdog catching c10_cuda_check's error) is that error's,
    # read by the CUDA rows on the same line, not the collective's (POSIX ERE: grep reads
    # these rows too, so no look-ahead; `C[^U]` keeps NCCL's own `Cuda failure`)
    rx("nccl", r"NCCL timeout|NCCL watchdog( timeout| thread terminated with exception: "
       r"([^C]|C[^U]))", "[E ProcessGroupNCCL.cpp:475] NCCL watchdog thread terminated with "
       "exception: [Rank 0] Watchdog caught collective operation timeout", PG,
       ("NCCL timeout", "NCCL watchdog"), "torch"),
    rx("nccl", r"ProcessGroupNCCL.*([Tt]imeout|timed out)", "[E ProcessGroupNCCL.cpp:828] [Rank "
       "3] Some NCCL operations have failed or timed out.", PG, ("ProcessGroupNCCL",), "torch"),
    lit("nccl", "DistBackendError", "torch.distributed.DistBackendError: NCCL error in: "
        "ProcessGroupNCCL.cpp:1970, unhandled cuda error", C10D, "torch"),
    lit("nccl", "RendezvousTimeoutError", "torch.distributed.elastic.rendezvous.api."
        "RendezvousTimeoutError", RDZV, "torch"),
    lit("nccl", "RendezvousConnectionError", "torch.distributed.elastic.rendezvous.api."
        "RendezvousConnectionError: The connection to the C10d store has failed.", RDZV, "torch"),
)

# The caching allocator's refusal under a per-process memory fraction
# (torch.cuda.set_per_process_memory_fraction, which serving runtimes such as TGI set): its
# own words, without "CUDA out of memory".
ALLOC_FRACTION = ("PyTorch 2.0 c10/cuda/CUDACachingAllocator.cpp malloc (\"Allocation on device %d "
                  "would exceed allowed memory. (out of memory)\\nCurrently allocated     : %s\")")

ROWS += found_via(
    ("wave4/cases/cuda_oom/tgi-563-router-panic-unable-to-warmup-out-of-memory.log",),
    rx("cuda_oom", r"Allocation on device [0-9]+ would exceed allowed memory",
       "torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. (out of "
       "memory)", ALLOC_FRACTION, ("would exceed allowed memory",), "torch"),
)
