"""What the platform said before it sent SIGTERM: a job stopped from outside is `killed` only
when nothing in its tail says who stopped it and why.

A cloud, a spot controller or a scheduler that takes a machine back announces it first and
then terminates the job (SIGTERM, exit 143); the announcement is the cause, the signal its
consequence. Each platform words it its own way, but the words come from one small family,
read from the platforms' own documents and code:

  AWS EC2          "Spot Instance interruption notice" / "interruption warning", the
                   two-minute instance-action (EC2 User Guide, Spot Instance interruptions)
  Google Compute   "preemption notice" sent as an ACPI G2 Soft Off, which systemd-logind logs
                   as "Power key pressed." (systemd src/login/logind-button.c); metadata
                   `instance/preempted` = TRUE; maintenance-event TERMINATE_ON_HOST_MAINTENANCE
                   (Compute Engine docs: preemption process, host maintenance notices)
  Azure            Scheduled Events EventType "Preempt" (Spot eviction), api 2020-07-01
  Kubernetes       "Pod was terminated in response to imminent node shutdown" (kubelet
                   nodeshutdown), reason "Preempted" (scheduler preemption)
  SkyPilot         "The cluster is preempted.", "Cluster is preempted (status: ...)",
                   "The job cluster is preempted or failed." (sky/spot, sky/jobs controller)
  Slurm            "*** JOB %u ON %s CANCELLED AT %s DUE TO PREEMPTION ***", and the plain
                   "*** JOB|STEP %s ON %s CANCELLED AT %s ***" of scancel
                   (src/slurmd/slurmstepd/req.c)

So the family is read as words, not one row per platform: preempt(ed|ion), spot
interruption, an interruption or termination notice, termination "imminent", a machine that
"will be terminated/reclaimed in" a time, a spot VM reclaimed or terminated, AWS's
instance-action, host maintenance, and the soft power-off. A Slurm cancel line without a DUE TO is the user's
scancel: cancelled. This reading applies only to a job that ended by SIGTERM (or SIGINT,
SIGQUIT) with no error of its own deciding: it never turns a failure into a notice.
Resource-pressure evictions ("The node was low on resource: memory") are not notices: they
name a resource, and the vocabulary reads them.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

from boxagent.triage.text import clip

# a notice is read in the last lines only: the announcement comes just before the signal
LOOK_BACK = 60
_QUOTE = 200

PREEMPTED = re.compile(
    r"[Pp]reempt(ed|ion)\b|PREEMPT(ED|ION)\b|\"Preempt\"|"
    r"[Ss]pot (instance |VM )?interruption|[Ii]nterruption (notice|warning)|"
    r"(is going to be|will be|was) interrupted in [0-9]|"
    r"(is going to be|will be|is being) (terminated|reclaimed|stopped|shut down) in [0-9]|"
    r"\b[Ss]pot (instance |VM |node )?(is being |was |will be )?(reclaimed|terminated)|"
    r"instance-action|"
    r"[Tt]ermination (is )?imminent|imminent (node )?(shutdown|termination)|"
    r"[Tt]ermination notice|TERMINATE_ON_HOST_MAINTENANCE|[Hh]ost maintenance|"
    r"Power key pressed")
# scancel's line: slurmstepd names no reason (a reason reads "... DUE TO <reason> ***")
SLURM_CANCEL = re.compile(r"\*\*\* (JOB|STEP) [^ ]+ ON [^ ]+ CANCELLED AT [^ ]+ \*\*\*")
_RESOURCE = re.compile(r"low on resource|[Mm]emory|ephemeral-storage|[Dd]isk ?[Pp]ressure")
# a setting or a capability printed at start-up ("Compute Preemption: Supported",
# "preemptionPolicy: Never", "spot interruption handling enabled") announces nothing
_SETTING = re.compile(r"[Ss]upported|[Ee]nabled|[Dd]isabled|[Pp]olicy|[Hh]andler (installed|"
                      r"registered)|: *(true|false|yes|no|Yes|No|Never)\b")

NOTICES: Tuple[Tuple[str, "re.Pattern[str]"], ...] = (
    ("preempted", PREEMPTED),
    ("cancelled", SLURM_CANCEL),
)


def notice(lines: List[str]) -> Optional[Tuple[str, int, str]]:
    """(class, index into `lines`, the line quoted) of the platform's notice the job's last
    lines hold, the latest one; None when they hold none."""
    start = max(0, len(lines) - LOOK_BACK)
    for i in range(len(lines) - 1, start - 1, -1):
        line = lines[i]
        if _RESOURCE.search(line) or _SETTING.search(line):
            continue
        for cls, words in NOTICES:
            if words.search(line):
                return cls, i, clip(line.strip(), _QUOTE)
    return None
