"""SkyPilot's managed-spot (managed jobs) controller: it polls the cluster and, when the cloud
took the spot VMs back, logs that the cluster is preempted and recovers (relaunches) it. Its
own teardown of the job on the gone cluster (SIGTERM, a failed cancel) follows from that."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

SKY = ("SkyPilot 0.2/0.4 sky/spot/controller.py SpotController._run (logger.info(\"The cluster is "
       "preempted.\"), \"Cluster is preempted (status: %s). Recovering...\"), sky/spot/"
       "recovery_strategy.py")

ROWS = found_via(
    ("wave4/cases/preempted/b-skypilot-1500-tpu-cluster-preempted-recovering.log",
     "wave4/cases/preempted/b-skypilot-804-bert-qa-cluster-preempted.log"),
    rx("preempted", r"(The cluster|Cluster) is [Pp]reempted( \(status: [A-Z_]+\))?\.",
       "I 05-04 00:52:46 controller.py:100] The cluster is preempted.", SKY,
       ("luster is preempted", "luster is Preempted"), "skypilot"),
)
