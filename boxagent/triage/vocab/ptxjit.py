"""The driver's own PTX JIT compiler refusing a PTX newer than it knows.

ptxas says "Unsupported .version X; current version is 'Y'" wherever it runs. A standalone
ptxas (Triton's, the toolkit's) names the file it read (`ptxas /tmp/x.ptx, line 5`): the
toolchain is the old side (gpuarch.py). The driver's JIT compiler (libnvidia-ptxjitcompiler),
whose log cuLinkAddData / cuModuleLoadDataEx hand back and numba, CuPy, hashcat and OptiX
programs print, calls its in-memory input `application ptx input`: there the driver is older
than the toolkit that wrote the PTX, as CUDA_ERROR_UNSUPPORTED_PTX_VERSION says. Read after a
field case (hashcat's kernel link) printed the log a few lines below the driver's message."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

PTXJIT = ("CUDA Driver API 12.9 cuLinkAddData / cuModuleLoadDataEx CU_JIT_ERROR_LOG_BUFFER (the "
          "driver's PTX JIT compiler, libnvidia-ptxjitcompiler: \"ptxas application ptx input, line "
          "N; fatal : Unsupported .version X.Y; current version is 'A.B'\")")

ROWS = found_via(
    ("wave6/cases/driver_too_old/e-hashcat-2799-culinkadddata-unsupported-toolchain-7-3.log",),
    rx("driver_too_old", r"ptxas application ptx input, line [0-9]+; fatal +: [Uu]nsupported "
       r"\.version [0-9.]+; current version is",
       "ptxas application ptx input, line 9; fatal   : Unsupported .version 7.3; current version is "
       "'7.2'", PTXJIT, ("ptxas application ptx input",), "cuda-driver"),
)
