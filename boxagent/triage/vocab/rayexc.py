"""Ray's exception types, read from ray/exceptions.py: the ones that name a cause. Ray's
wrappers (RayTaskError(X) around a task's own exception, the actor or worker that "died
unexpectedly") are launchers' reports (launchers.py): the inner error decides."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

EXC = "Ray 2.35 python/ray/exceptions.py"
GCS = ("Ray 2.35 src/ray/gcs/gcs_server/gcs_health_check_manager.cc / gcs_node_manager.cc (\"has "
       "been marked dead because the detector has missed too many heartbeats from it\")")

ROWS = (
    lit("cgroup_oom", "ray.exceptions.OutOfMemoryError",
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        EXC + " OutOfMemoryError (the raylet's memory monitor)", "ray"),
    lit("node_failure", "ray.exceptions.NodeDiedError",
        "ray.exceptions.NodeDiedError: Task failed due to the node dying.", EXC + " NodeDiedError",
        "ray"),
    lit("node_failure", "because the detector has missed too many heartbeats from it",
        "The node with node id: 8c5e and address: 10.0.0.3 and node name: 10.0.0.3 has been marked "
        "dead because the detector has missed too many heartbeats from it. This can happen when a "
        "\t(1) raylet crashes unexpectedly (OOM, etc.)", GCS, "ray", False),
    rx("node_failure", r"have been lost due to node failure",
       "All copies of 00ffffffffffffff have been lost due to node failure. Check cluster logs "
       "(`/tmp/ray/session_latest/logs`) for more information about the failure.",
       EXC + " ObjectLostError", ("lost due to node failure",), "ray", False),
    lit("disk_full", "ray.exceptions.OutOfDiskError",
        "ray.exceptions.OutOfDiskError: Failed to create object. The object cannot be created "
        "because the local object store is full and the local disk's utilization is over capacity "
        "(95% by default).", EXC + " OutOfDiskError", "ray"),
    lit("cgroup_oom", "ray.exceptions.ObjectStoreFullError",
        "ray.exceptions.ObjectStoreFullError: Failed to put object. The local object store is full "
        "of objects that are still in scope and cannot be evicted.", EXC + " ObjectStoreFullError",
        "ray", False),
)
