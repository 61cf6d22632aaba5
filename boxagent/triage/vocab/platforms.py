"""Time limits and stops of the platforms a job is launched from, other than Slurm: CI runners
(GitHub Actions, Azure Pipelines, GitLab), Kubernetes Jobs and node shutdowns, serverless
functions (Modal), SkyPilot's managed jobs. Each is the platform's own verdict on why the job ended; the fix is in the
platform's setting, not in the stage's `timeout`."""
from __future__ import annotations

from typing import Tuple

from boxagent.triage.vocab.table import Row, found_via, lit, rx

GHA = ("GitHub Actions runner 2.317 src/Runner.Worker/JobRunner.cs and docs \"Workflow syntax: "
       "jobs.<job_id>.timeout-minutes\" (\"The job running on runner %s has exceeded the maximum "
       "execution time of %s minutes.\", \"The runner has received a shutdown signal.\", \"The "
       "operation was canceled.\")")
AZP = ("Azure Pipelines agent 3.240 (\"The job running on agent %s ran longer than the maximum time "
       "of %s minutes.\", \"We stopped hearing from agent %s.\")")
GITLAB = "GitLab Runner 17.0 common/build.go (\"execution took longer than %v seconds\")"
K8S_JOB = ("Kubernetes 1.30 pkg/controller/job/job_controller.go (condition reason DeadlineExceeded, "
           "message \"Job was active longer than specified deadline\")")
SKY = ("SkyPilot 0.9 sky/jobs/utils.py stream_logs_by_id (\"The job cluster is preempted or "
       "failed.\" while it follows a managed job's log)")
BATCH = "AWS Batch User Guide, Job states / statusReason (\"Host EC2 (instance %s) terminated.\"), 2024"
VERTEX = ("Google Cloud Vertex AI custom training troubleshooting docs (\"The replica %s ran "
          "out-of-memory and exited with a non-zero status of 9(SIGKILL).\"), 2024")
MODAL = "Modal client 0.64 modal/exception.py (FunctionTimeoutError, SandboxTimeoutError)"

_LIMIT = ("the platform's time limit ended the job: raise it (GitHub Actions `timeout-minutes`, "
          "Azure `timeoutInMinutes`, GitLab `timeout`, Kubernetes `activeDeadlineSeconds`, Modal "
          "`timeout=`) or checkpoint and resume in several runs")

ROWS: Tuple[Row, ...] = (
    rx("timeout", r"has exceeded the maximum execution time of [0-9]+ minutes",
       "##[error]The job running on runner GitHub Actions 3 has exceeded the maximum execution "
       "time of 360 minutes.", GHA, ("has exceeded the maximum execution time",),
       "github-actions")._replace(fix=_LIMIT),
    rx("timeout", r"ran longer than the maximum time of [0-9]+ minutes",
       "##[error]The job running on agent Hosted Agent ran longer than the maximum time of 60 "
       "minutes.", AZP, ("ran longer than the maximum time of",), "azure-pipelines")._replace(fix=_LIMIT),
    rx("timeout", r"execution took longer than [0-9hms.]+ seconds",
       "ERROR: Job failed: execution took longer than 1h0m0s seconds", GITLAB,
       ("execution took longer than",), "gitlab-runner")._replace(fix=_LIMIT),
    lit("timeout", "Job was active longer than specified deadline",
        "Warning  DeadlineExceeded  job-controller  Job was active longer than specified deadline",
        K8S_JOB, "kubernetes")._replace(fix=_LIMIT),
    rx("timeout", r"(modal\.exception\.)?(FunctionTimeoutError|SandboxTimeoutError)",
       "modal.exception.FunctionTimeoutError: Task's current input in-1234 hit its timeout of 300s",
       MODAL, ("FunctionTimeoutError", "SandboxTimeoutError"), "modal")._replace(fix=_LIMIT),
    # Vertex AI / AI Platform Training's verdict on a replica the OOM killer took
    rx("cgroup_oom", r"ran out-of-memory and exited with a non-zero status",
       "The replica workerpool0-0 ran out-of-memory and exited with a non-zero status of 9(SIGKILL).",
       VERTEX, ("ran out-of-memory and exited",), "vertex-ai"),
    # AWS Batch's status reason when the (spot) instance under a job went away
    rx("preempted", r"Host EC2 \(instance i-[0-9a-f]+\) terminated",
       "statusReason: Host EC2 (instance i-0a1b2c3d4e5f67890) terminated.", BATCH,
       ("Host EC2 (instance ",), "aws-batch", False),
    # SkyPilot relays the cloud's preemption of a managed job's cluster (or its failure)
    lit("preempted", "The job cluster is preempted or failed",
        "The job cluster is preempted or failed.", SKY, "skypilot", False),
    # the runner machine went away (a spot runner reclaimed, a self-hosted runner stopped)
    lit("killed", "The runner has received a shutdown signal",
        "##[error]The runner has received a shutdown signal. This can happen when the runner "
        "service is stopped, or a manually started runner is canceled.", GHA, "github-actions",
        False),
    rx("node_failure", r"We stopped hearing from agent", "##[error]We stopped hearing from agent "
       "Azure Pipelines 5. Verify the agent machine is running and has a healthy network "
       "connection.", AZP, ("We stopped hearing from agent",), "azure-pipelines", False),
)

# The service's own limit on the free tier's hosted agents (60 minutes whatever the job's
# timeoutInMinutes), and Modal's per-input execution timeout as its server words it: both end the
# job at the platform's limit.
AZP_FREE = ("Azure DevOps docs, \"Configure and pay for parallel jobs\" (2024: a free-tier "
            "Microsoft-hosted job runs at most 60 minutes) and the service's message \"The job "
            "exceeded the maximum allowed time of %s and was stopped.\"")
MODAL_INPUT = ("Modal docs, Guide \"Timeouts\" (2024: execution timeout, default 300 s, per input; "
               "the input is cancelled with \"Task's current input %s hit its timeout of %ds\"), "
               "modal client 0.64 modal/functions.py")

ROWS += found_via(
    ("wave4/cases/timeout/b-azure-pipelines-yaml-227-free-tier-one-hour.log",),
    rx("timeout", r"The job exceeded the maximum allowed time of [0-9:]+",
       "##[error]The job exceeded the maximum allowed time of 01:00:00 and was stopped.", AZP_FREE,
       ("exceeded the maximum allowed time of",), "azure-pipelines")._replace(fix=_LIMIT),
) + found_via(
    ("wave4/cases/timeout/b-smol-developer-29-modal-inputs-hit-300s.log",
     "wave4/cases/timeout/b-kernelbot-496-modal-default-300s-cancelled.log"),
    rx("timeout", r"current input .* hit its timeout of [0-9.]+s",
       "Task's current input in-01J2ABCD hit its timeout of 300s", MODAL_INPUT,
       ("hit its timeout of ",), "modal")._replace(fix=_LIMIT),
)
