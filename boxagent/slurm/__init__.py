"""The Slurm backend's pure parts: the job's [slurm] table (spec), the sbatch argv and batch
script (submit), reading squeue/scontrol/sacct (follow), Slurm end states as rgt causes (states)
and what the submit host has (probe). stdlib only; every Slurm command bounded by a timeout."""
