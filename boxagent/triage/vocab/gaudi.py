"""Intel Gaudi (HPU) accelerators under PyTorch (habana_frameworks, optimum-habana, vLLM's
Gaudi fork): the device allocator's fatal error and the Synapse runtime failing to acquire a
card.

"PT_DEVMEM Allocation failed" is device memory (cuda_oom's class on any vendor). "Device
acquire failed" is a card another process holds (Gaudi has no per-job isolation of
/dev/accel*) or a card that is down: the box, not the job, as CUDA's "busy or unavailable"
is (suggestive).
"""
from __future__ import annotations

from boxagent.triage.vocab.table import lit

PT = ("Intel Gaudi software 1.17 habana_frameworks PyTorch bridge, device memory module PT_DEVMEM "
      "(\"FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::%d (%d)MB\"), documented in "
      "the Gaudi vLLM fork README 1.17")
SYN = ("Intel Gaudi software 1.17 Synapse API synDeviceAcquireByDeviceType, PyTorch bridge "
       "synapse_helpers (synapse_error{\"Device acquire failed.\", status})")

ROWS = (
    lit("cuda_oom", "MODULE:PT_DEVMEM Allocation failed",
        "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for "
        "size::939524096 (896)MB", PT, "habana"),
    lit("gpu_hardware", "Device acquire failed",
        "RuntimeError: synStatus=8 [Device not found] Device acquire failed.", SYN, "habana", False),
)
