"""AWS Batch's status reason for a job whose host went away, in the console's short form:
"Host EC2 Terminated" (the API's statusReason names the instance, "Host EC2 (instance i-…)
terminated.": platforms.py). On a spot compute environment it is the spot capacity being
reclaimed (the spot request history says "no more unused capacity available in this pool"):
preempted, suggestively (an on-demand host scaled in says it too). Read after a field case (a
spot GPU queue's jobs failing mid-run) pasted the console's form."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

BATCH = ("AWS Batch User Guide, job states and status reasons (\"Host EC2 (instance i-0123) "
         "terminated.\"; the console shows \"Status reason: Host EC2 Terminated\")")

ROWS = found_via(
    ("wave6/cases/preempted/e-raster-vision-aws-15-batch-host-ec2-terminated-spot.log",),
    rx("preempted", r"Host EC2 [Tt]erminated",
       "Status Reason: Host EC2 Terminated", BATCH, ("Host EC2 ",), "aws-batch", False),
)
