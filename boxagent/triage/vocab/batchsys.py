"""Batch systems other than Slurm, PBS and LSF that GPU jobs run under: HTCondor (university
pools, the OSPool) and Amazon SageMaker training jobs.

HTCondor's starter holds a job that went over its cgroup's memory limit and says so in the
hold reason; the pool's periodic hold on run time says "exceeded allowed execute duration".
SageMaker ends a training job that ran past MaxRuntimeInSeconds with the secondary status
MaxRuntimeExceeded. The first is the container's memory limit (cgroup_oom), the others the
platform's time limit (timeout, with the platforms' remedy).
"""
from __future__ import annotations

from boxagent.triage.vocab.platforms import _LIMIT
from boxagent.triage.vocab.table import lit, rx

CONDOR_MEM = ("HTCondor 23.0 src/condor_starter.V6.1/vanilla_proc.cpp outOfMemoryEvent (\"Job has gone "
              "over cgroup memory limit of %lld megabytes. Last measured usage: %lld megabytes.  "
              "Consider resubmitting with a higher request_memory.\", \"Job has encountered an "
              "out-of-memory event.\")")
CONDOR_TIME = ("HTCondor 23.0 src/condor_utils/user_job_policy.cpp (\"The job exceeded allowed execute "
               "duration of %s\")")
SAGEMAKER = ("Amazon SageMaker API reference 2017-07-24 DescribeTrainingJob SecondaryStatus "
             "(MaxRuntimeExceeded: the job stopped because it exceeded the maximum allowed runtime)")

ROWS = (
    rx("cgroup_oom", r"Job has gone over (cgroup )?memory limit of [0-9]+ megabytes",
       "Error from slot1_1@gpu-20.novalocal: Job has gone over cgroup memory limit of 10624 "
       "megabytes. Last measured usage: 10630 megabytes.  Consider resubmitting with a higher "
       "request_memory.", CONDOR_MEM, ("memory limit of ",), "htcondor"),
    lit("cgroup_oom", "Job has encountered an out-of-memory event",
        "Job has encountered an out-of-memory event.", CONDOR_MEM, "htcondor"),
    lit("timeout", "The job exceeded allowed execute duration of",
        "The job exceeded allowed execute duration of 20:00:00", CONDOR_TIME,
        "htcondor")._replace(fix=_LIMIT),
    lit("timeout", "MaxRuntimeExceeded",
        "sagemaker.exceptions.UnexpectedStatusException: Error for Training job llm-ft-2024: "
        "Stopped. Reason: MaxRuntimeExceeded", SAGEMAKER, "sagemaker")._replace(fix=_LIMIT),
)
