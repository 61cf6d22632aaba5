"""Batch schedulers' own lines in a job's output: Slurm (slurmstepd, srun), PBS and LSF.
Their words are the scheduler's verdict on the job: definitive. `fix="slurm"`: the class's
Slurm remediation (builtin_rules.SLURM_REMEDIATION: the fix is in the job's [slurm] table)."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

STEPD = "Slurm 23.11 src/slurmd/slurmstepd/req.c and step_terminate_monitor (\"*** JOB %u ON %s CANCELLED AT %s DUE TO %s ***\")"
CGMEM = "Slurm 23.11 src/plugins/cgroup/v2/cgroup_v2.c / task_cgroup_memory.c (\"Detected %lu oom_kill event%s in %ps. Some of the step tasks have been OOM Killed.\")"
CGMEM_OLD = "Slurm 21.08 src/plugins/task/cgroup/task_cgroup_memory.c (\"Detected %u oom-kill event(s) in %ps. Some of your processes may have been killed by the cgroup out-of-memory handler.\")"
ACCT = "Slurm 23.11 src/common/slurm_jobacct_gather.c (OverMemoryKill: \"Exceeded job memory limit\" / \"Exceeded step memory limit at some point\")"
SRUN = "Slurm 23.11 src/srun/launch.c (\"%s: task %s: Out Of Memory\", \"Node failure on %s\")"
PBS = "OpenPBS 23.06 src/resmom/mom_main.c (\"=>> PBS: job killed: walltime %ld exceeded limit %ld\", \"mem %lukb exceeded limit %lukb\")"
LSF = "IBM Spectrum LSF 10.1 job exit information (TERM_RUNLIMIT, TERM_MEMLIMIT)"
EXEC = ("Slurm 23.11 src/slurmd/slurmstepd/task.c exec_task (error(\"execve(): %s: %m\"), "
        "error(\"execve(): bad interpreter(%s): %m\"))")

ROWS = (
    rx("cgroup_oom", r"Detected [0-9]+ oom_kill events? in ",
       "slurmstepd: error: Detected 1 oom_kill event in StepId=1054.0. Some of the step tasks have "
       "been OOM Killed.", CGMEM, ("oom_kill event",), "slurm"),
    lit("cgroup_oom", "Some of the step tasks have been OOM Killed",
        "error: Detected 2 oom_kill events in StepId=7.0. Some of the step tasks have been OOM Killed.",
        CGMEM, "slurm"),
    rx("cgroup_oom", r"Detected [0-9]+ oom-kill event",
       "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=3302.batch. Some of your processes "
       "may have been killed by the cgroup out-of-memory handler.", CGMEM_OLD, ("oom-kill event",),
       "slurm"),
    lit("cgroup_oom", "killed by the cgroup out-of-memory handler",
        "Some of your processes may have been killed by the cgroup out-of-memory handler.",
        CGMEM_OLD, "slurm"),
    rx("cgroup_oom", r"exceeded memory limit .* being killed",
       "slurmstepd: error: Step 3302.0 exceeded memory limit (1048576 > 65536), being killed",
       ACCT, ("exceeded memory limit",), "slurm"),
    lit("cgroup_oom", "Exceeded job memory limit", "slurmstepd: error: Exceeded job memory limit",
        ACCT, "slurm"),
    lit("cgroup_oom", "Exceeded step memory limit at some point",
        "slurmstepd: error: Exceeded step memory limit at some point.", ACCT, "slurm"),
    rx("cgroup_oom", r"task [0-9]+(-[0-9]+)?: Out Of Memory", "srun: error: ana: task 0: Out Of Memory",
       SRUN, (": Out Of Memory",), "slurm"),
    rx("timeout", r"CANCELLED AT [^ ]+ DUE TO TIME LIMIT",
       "slurmstepd: error: *** JOB 48213 ON gpu-a07 CANCELLED AT 2024-05-01T09:00:00 DUE TO TIME "
       "LIMIT ***", STEPD, ("DUE TO TIME LIMIT",), "slurm")._replace(fix="slurm"),
    lit("preempted", "DUE TO PREEMPTION", "slurmstepd: error: *** JOB 77120 ON node014 CANCELLED AT "
        "2024-06-11T14:03:55 DUE TO PREEMPTION ***", STEPD, "slurm")._replace(fix="slurm"),
    lit("node_failure", "DUE TO NODE FAILURE", "slurmstepd: error: *** JOB 901 ON cn112 CANCELLED AT "
        "2024-03-02T03:14:08 DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***", STEPD, "slurm"),
    lit("node_failure", "srun: error: Node failure on", "srun: error: Node failure on gpu-b12", SRUN,
        "slurm"),
    # the task's program could not be started at all (not found, not executable, a missing
    # interpreter): the job's command line, not the node
    lit("code_error", "error: execve(): ",
        "slurmstepd: error: execve(): train.sh: Permission denied", EXEC, "slurm"),
    rx("timeout", r"PBS: job killed: walltime [0-9]+ exceeded limit",
       "=>> PBS: job killed: walltime 3623 exceeded limit 3600", PBS, ("PBS: job killed: walltime",),
       "pbs"),
    rx("cgroup_oom", r"PBS: job killed: (mem|vmem) [0-9]+kb exceeded limit",
       "=>> PBS: job killed: mem 16777300kb exceeded limit 16777216kb", PBS,
       ("PBS: job killed: mem", "PBS: job killed: vmem"), "pbs"),
    lit("timeout", "TERM_RUNLIMIT", "TERM_RUNLIMIT: job killed after reaching LSF run time limit.",
        LSF, "lsf"),
    lit("cgroup_oom", "TERM_MEMLIMIT", "TERM_MEMLIMIT: job killed after reaching LSF memory usage "
        "limit.", LSF, "lsf"),
)
