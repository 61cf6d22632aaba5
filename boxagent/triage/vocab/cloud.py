"""Clouds' spot/preemption notices, where a job or its wrapper prints them (a watcher polling
the metadata service, a termination handler). RunPod and vast.ai document no interruption
text (RunPod sends SIGTERM, vast nothing): they have no row."""
from __future__ import annotations

from boxagent.triage.vocab.table import rx, lit

AWS = "AWS EC2 User Guide, Spot Instance interruption notices (instance-action IMDS item, EventBridge event), 2024"
AWS_REB = "AWS EC2 User Guide, EC2 instance rebalance recommendations, 2024"
GCP = "Google Cloud Compute Engine docs, Spot VMs / Preemptible VM instances (preemption process), 2024"
AZURE = "Azure Instance Metadata Service Scheduled Events for Linux VMs, api-version 2020-07-01"

ROWS = (
    rx("preempted", r"\"action\": ?\"(terminate|stop|hibernate)\", ?\"time\": ?\"",
       "{\"action\": \"terminate\", \"time\": \"2017-09-18T08:22:00Z\"}", AWS, ("\"action\":",),
       "aws"),
    lit("preempted", "EC2 Spot Instance Interruption Warning",
        "\"detail-type\": \"EC2 Spot Instance Interruption Warning\",", AWS, "aws"),
    lit("preempted", "EC2 Instance Rebalance Recommendation",
        "\"detail-type\": \"EC2 Instance Rebalance Recommendation\",", AWS_REB, "aws", False,
        "warning"),
    lit("preempted", "compute.instances.preempted",
        "operationType: compute.instances.preempted", GCP, "gcp"),
    lit("preempted", "Instance was preempted", "statusMessage: Instance was preempted.", GCP, "gcp"),
    rx("preempted", r"\"EventType\": ?\"Preempt\"",
       "{\"EventId\": \"A123BC45-1234-5678-AB90-ABCDEF123456\", \"EventType\": \"Preempt\", "
       "\"ResourceType\": \"VirtualMachine\"", AZURE, ("\"EventType\":",), "azure"),
)
