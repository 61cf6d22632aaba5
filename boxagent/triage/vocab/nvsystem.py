"""NVIDIA's system layer around the GPUs: DCGM's health and diagnostic failures, the fabric
manager an NVSwitch box needs before CUDA can run, and NVML's own error strings.

DCGM names each failure (dcgm_errors.h, DCGM_FR_*) and prints a message for it; the ones here
are the card or its links failing (double-bit ECC, row remapping that failed or is pending,
retired pages, a GPU off the bus, NVLink down). A fabric manager whose version is not the
driver's cannot start, so CUDA on that box says "system not yet initialized" (cuda.py): the
box's driver install, not the job.
"""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

DCGM = "DCGM 3.3 dcgmlib/dcgm_errors.h (DCGM_FR_* codes and their DCGM_FR_*_MSG strings)"
FM = ("NVIDIA Fabric Manager 535 user guide, \"Fabric Manager startup failure\" (\"fabric manager "
      "NVIDIA GPU driver interface version %s don't match with driver version %s\")")
NVML = "NVML API reference 12.4 nvml.h nvmlReturn_t (nvmlErrorString)"

_S = False

ROWS = (
    rx("gpu_hardware", r"DCGM_FR_(VOLATILE_DBE_DETECTED|UNCORRECTABLE_ROW_REMAP|ROW_REMAP_FAILURE|"
       r"PENDING_ROW_REMAP|DBE_PENDING_PAGE_RETIREMENTS|RETIRED_PAGES_LIMIT|FALLEN_OFF_BUS|"
       r"NVLINK_DOWN|NVSWITCH_NVLINK_DOWN|UNCONTAINED_ERROR|GPU_RECOVERY_RESET)",
       "Error: DCGM_FR_PENDING_ROW_REMAP: GPU 3 had memory errors and row remappings are pending",
       DCGM, ("DCGM_FR_",), "dcgm"),
    rx("gpu_hardware", r"GPU [0-9]+ had (uncorrectable )?memory errors and (row remappings are "
       r"pending|[0-9]+ rows were remapped)",
       "GPU 3 had uncorrectable memory errors and 2 rows were remapped", DCGM,
       ("memory errors and ",), "dcgm"),
    rx("gpu_hardware", r"Detected [0-9]+ volatile double-bit ECC error",
       "Detected 2 volatile double-bit ECC error(s) in GPU 1.", DCGM,
       ("volatile double-bit ECC error",), "dcgm"),
    rx("gpu_hardware", r"GPU [0-9]+ requires a reset to recover from a fault",
       "GPU 3 requires a reset to recover from a fault. Recovery action: 1 (GPU_RESET).", DCGM,
       ("requires a reset to recover from a fault",), "dcgm"),
    rx("driver_too_old", r"fabric manager NVIDIA GPU driver interface version [0-9.]+ don't match",
       "fabric manager NVIDIA GPU driver interface version 535.104.05 don't match with driver "
       "version 535.129.03. Please update with matching NVIDIA driver package.", FM,
       ("driver interface version",), "nv-fabricmanager"),
    lit("gpu_hardware", "NVML_ERROR_GPU_IS_LOST", "pynvml.NVMLError_GPUIsLost: NVML_ERROR_GPU_IS_LOST",
        NVML, "nvml"),
    lit("gpu_hardware", "NVMLError_GPUIsLost", "pynvml.nvml.NVMLError_GPUIsLost: GPU is lost", NVML,
        "nvml"),
)
