"""Shared memory (/dev/shm) running out under DataLoader workers: a container's default
/dev/shm is 64 MB, and the workers hand batches over through it. Memory, not the code: the
fix is the container's --shm-size (or --ipc=host), not the job."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit

TORCH = ("PyTorch 2.4 torch/csrc/DataLoader.cpp (\"ERROR: Unexpected bus error encountered in worker. "
         "This might be caused by insufficient shared memory (shm).\") and torch/utils/data/"
         "dataloader.py (\"It is possible that dataloader's workers are out of shared memory. "
         "Please try to raise your shared memory limit.\")")
FIX = ("the DataLoader workers ran out of shared memory (/dev/shm; 64 MB in a default docker "
       "container): run the container with `--shm-size=16g` or `--ipc=host`, or use fewer workers")

ROWS = (
    lit("cgroup_oom", "This might be caused by insufficient shared memory (shm)",
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
        "shared memory (shm).", TORCH, "torch", False)._replace(fix=FIX),
    lit("cgroup_oom", "workers are out of shared memory",
        "RuntimeError: DataLoader worker (pid 5112) is killed by signal: Bus error. It is possible "
        "that dataloader's workers are out of shared memory. Please try to raise your shared memory "
        "limit.", TORCH, "torch", False)._replace(fix=FIX),
)
