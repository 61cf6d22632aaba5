"""Words that end a job from outside the process: Slurm's client lines the sched table does not
hold (salloc's node failure), and the spot and preemption notices of cloud metadata services as
the wrappers that poll them log them.

slurmstepd's plain "*** JOB %u ON %s CANCELLED AT %s ***" (scancel, Slurm 23.11 req.c) has no
row: it also follows a step the scheduler ended for a cause of its own (an OOM-killed task),
and a cancel line outranks every class today, so it would hide that cause."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, lit, rx

SALLOC = "Slurm 23.11 src/salloc/salloc.c (error(\"Node failure on %s\", msg->nodelist))"
AWS = ("AWS EC2 User Guide, Spot Instance interruption notices (instance-action: "
       "{\"action\": \"terminate\", \"time\": \"...\"}), 2024, as a JSON string inside a JSON log line")
TC = ("Taskcluster worker-runner provider/aws/aws.go and provider/google/google.go "
      "checkTerminationTime (\"EC2|GCP Metadata Service says termination is imminent\")")

ROWS = found_via(
    ("cases/node_failure/soperator-854-salloc-node-failure.log",),
    lit("node_failure", "salloc: error: Node failure on", "salloc: error: Node failure on worker-1",
        SALLOC, "slurm"),
) + found_via(
    ("cases/preempted/runs-on-277-spot-interruption-payload.log",),
    rx("preempted", r"\\\"action\\\": ?\\\"(terminate|stop|hibernate)\\\", ?\\\"time\\\": ?\\\"",
       "\"message\":\"Spot interruption payload received: {\\\"action\\\":\\\"terminate\\\",\\\"time\\\":"
       "\\\"2025-03-31T16:34:24Z\\\"}\"", AWS, ("\\\"action\\\":",), "aws"),
) + found_via(
    ("cases/preempted/translations-964-gcp-termination-imminent-power-key.log",),
    rx("preempted", r"(EC2|GCP) Metadata Service says termination is imminent",
       "start-worker 2024/12/17 16:03:58 GCP Metadata Service says termination is imminent", TC,
       ("Metadata Service says termination is imminent",), "cloud"),
)
