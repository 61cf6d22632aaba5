"""MPI and the fabrics under collectives: Open MPI's mpirun (ORTE, and PRRTE in Open MPI 5),
UCX, the verbs completion statuses of InfiniBand/RoCE (libibverbs, mlx5), and AWS EFA's
libfabric plugin for NCCL (aws-ofi-nccl, "NET/OFI").

mpirun reports a rank killed by a signal; signal 9 nobody asked for is usually the OOM killer
(the same reading as torchrun's exitcode -9 and DeepSpeed's return code -9; the box's oom_kill
counter tells): suggestive. A lost daemon or peer, a transport retry that ran out, or an
endpoint timeout is the network between the nodes failing under the collective: the
collective class, as NCCL's own NET/IB errors are.
"""
from __future__ import annotations

from boxagent.triage.vocab.table import rx

ORTE = ("Open MPI 4.1 orte/mca/errmgr/default_hnp help-errmgr-base.txt (\"%s noticed that process "
        "rank %s with PID %s on node %s exited on signal %d (%s).\", \"ORTE has lost communication "
        "with a remote daemon.\"); Open MPI 5.0 PRRTE help-prte-errmgr-base.txt (\"PRTE has lost "
        "communication with a remote daemon.\")")
SLOTS = ("Open MPI 4.1 orte/mca/rmaps/base/help-orte-rmaps-base.txt (\"There are not enough slots "
         "available in the system to satisfy the %d slots that were requested by the application\")")
BTL = ("Open MPI 4.1 opal/mca/btl/tcp/help-mpi-btl-tcp.txt (\"An MPI communication peer process has "
       "unexpectedly disconnected.\")")
UCX = ("UCX 1.16 src/uct/ib/mlx5/ib_mlx5_log.c uct_ib_mlx5_completion_with_err (\"Transport retry "
       "count exceeded\", \"Receive-no-ready retry count exceeded\"), src/ucs/type/status.c "
       "ucs_status_string (UCS_ERR_ENDPOINT_TIMEOUT \"Endpoint timeout\")")
VERBS = ("rdma-core 50 libibverbs/verbs.c ibv_wc_status_str (IBV_WC_RETRY_EXC_ERR \"transport retry "
         "counter exceeded\", IBV_WC_RNR_RETRY_EXC_ERR \"RNR retry counter exceeded\")")
OFI = ("aws-ofi-nccl 1.9 src/nccl_ofi_rdma.c / nccl_ofi_sendrecv.c (\"NET/OFI Request %p completed "
       "with error. RC: %d. Error: %d (%s).\")")

_S = False

ROWS = (
    rx("cgroup_oom", r"noticed that process rank [0-9]+ with PID [0-9]+ on node .* exited on "
       r"signal 9( |\.|$)",
       "mpirun noticed that process rank 3 with PID 18824 on node gpu-2 exited on signal 9 (Killed).",
       ORTE, ("exited on signal 9",), "mpirun", _S),
    # more ranks than the hostfile (or the cores) give: the launch command, not the machine
    rx("code_error", r"There are not enough slots available in the system to satisfy the [0-9]+",
       "There are not enough slots available in the system to satisfy the 8 slots that were "
       "requested by the application:", SLOTS, ("not enough slots available in the system",),
       "mpirun"),
    rx("nccl", r"(ORTE|PRTE) has lost communication with a remote daemon",
       "ORTE has lost communication with a remote daemon.", ORTE,
       ("has lost communication with a remote daemon",), "mpirun"),
    rx("nccl", r"An MPI communication peer process has unexpectedly disconnected",
       "An MPI communication peer process has unexpectedly disconnected.  This usually indicates a "
       "failure in the peer process (e.g., a crash or otherwise exiting without calling "
       "MPI_FINALIZE first).", BTL, ("peer process has unexpectedly disconnected",), "mpirun", _S),
    rx("nccl", r"(Transport|Receive-no-ready) retry count exceeded",
       "[1690000000.123456] [gpu-1:2345 :0]  ib_mlx5_log.c:177  UCX  ERROR   Transport retry "
       "count exceeded on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)", UCX,
       (" retry count exceeded",), "ucx"),
    rx("nccl", r"UCX +ERROR .*(Endpoint timeout|Connection reset by remote peer|Destination is "
       r"unreachable)",
       "[1690000000.123456] [gpu-1:2345 :0]  ucp_worker.c:1783 UCX  ERROR   ep 0x7f31 failed: "
       "Endpoint timeout", UCX, ("Endpoint timeout", "Connection reset by remote peer",
                                 "Destination is unreachable"), "ucx"),
    rx("nccl", r"(transport|RNR) retry counter exceeded",
       "work completion error: transport retry counter exceeded (12)", VERBS,
       (" retry counter exceeded",), "ibverbs"),
    rx("nccl", r"NET/OFI Request .* completed with error",
       "gpu-3:77:101 [2] NCCL WARN NET/OFI Request 0x7f8a completed with error. RC: 5. Error: 70 "
       "(Input/output error). Completed length: 0", OFI, ("completed with error",), "aws-ofi-nccl"),
)
