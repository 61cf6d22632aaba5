"""Slurm's sbatch refusing a batch script before the job exists: its own check for Windows line
endings."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, lit

SBATCH = ("Slurm 23.11 src/sbatch/sbatch.c _check_script / get_script_buffer (error(\"Batch script "
          "contains DOS line breaks (\\\\r\\\\n)\"); error(\"instead of expected UNIX line breaks "
          "(\\\\n).\"))")

ROWS = found_via(
    ("wave4/cases/crlf_script/rslurm-84-sbatch-dos-line-breaks.log",),
    lit("crlf_script", "Batch script contains DOS line breaks",
        "sbatch: error: Batch script contains DOS line breaks (\\r\\n)", SBATCH, "slurm"),
)
