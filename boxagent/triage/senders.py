"""Lines in which the sender of a SIGKILL names itself and why it killed.

A SIGKILL with no readable oom_kill counter is usually the OOM killer, so exit 137 alone reads
as memory. Some senders say so in the log: the kubelet evicting a pod writes its reason into the
pod's status ("The node was low on resource: ephemeral-storage", "Pod ephemeral local storage
usage exceeds the total limit of containers") and kills the containers with no grace period
(exit 137). Such a line is who sent the signal and why: it decides, not the guess.
"""
from __future__ import annotations

import re
from typing import Any, Dict

# Kubernetes 1.30 pkg/kubelet/eviction/helpers.go (nodeLowMessageFmt, containerMessageFmt,
# podEphemeralStorageMessageFmt, containerEphemeralStorageMessageFmt, emptyDirMessageFmt,
# nodeConditionMessageFmt "The node had condition: %v. ") and
# eviction_manager.go (a hard eviction's grace period is 0: the containers get SIGKILL);
# nodeshutdown_manager_linux.go (nodeShutdownMessage).
_SENDERS = re.compile(r"The node was low on resource: |The node had condition: |ephemeral local storage usage exceeds|"
                      r"exceeded its local ephemeral storage limit|Usage of EmptyDir volume .* "
                      r"exceeds the limit|Pod was terminated in response to imminent node shutdown")


def names_sender(hit: Dict[str, Any]) -> bool:
    """Whether the hit's line is a kill's sender naming its reason."""
    return bool(_SENDERS.search(str(hit.get("line") or "")))
