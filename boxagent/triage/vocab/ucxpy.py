"""UCX's endpoint errors as its Python and C++ bindings log them: ucx-py (dask-cuda, RAPIDS)
and UCXX call the endpoint's error handler and log "Error callback for endpoint <ep> called
with status <n>: <ucs_status_string>"; ucx-py raises them as UCXError / UCXConnectionReset. A
peer that is unreachable (UCS_ERR_UNREACHABLE, "Destination is unreachable") is the
interconnect failing the workers, the collective class as mpi.py reads UCX's own ERROR lines;
a reset or an endpoint timeout is often just a peer closing (UCXX logs those at debug level
for that reason): suggestive. Read after a field case (dask workers over UCX that could not
reach their scheduler) logged only the binding's form."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

UCXPY = ("ucx-py 0.39 ucp/_libs/ucx_endpoint.pyx _err_cb (\"Error callback for endpoint %s called "
         "with status %d: %s\" with ucs_status_string), ucp/_libs/exceptions.py (UCXError, "
         "UCXConnectionReset); UCXX 0.39 cpp/src/endpoint.cpp (the same message); UCX 1.16 "
         "src/ucs/type/status.c ucs_status_string (UCS_ERR_UNREACHABLE \"Destination is "
         "unreachable\", UCS_ERR_CONNECTION_RESET \"Connection reset by remote peer\", "
         "UCS_ERR_ENDPOINT_TIMEOUT \"Endpoint timeout\")")

ROWS = found_via(
    ("wave6/cases/nccl/e-dask-7000-ucx-destination-is-unreachable.log",),
    rx("nccl", r"Error callback for endpoint [^ ]+ called with status -[0-9]+: Destination is "
       r"unreachable|UCX[A-Za-z]*Error: .*Destination is unreachable",
       "[1662343868.669253] [gpu12.cluster:3241] UCXPY  DEBUG Error callback for endpoint "
       "0x2b492843d3c8 called with status -6: Destination is unreachable", UCXPY,
       ("Destination is unreachable",), "ucx-py"),
    rx("nccl", r"Error callback for endpoint [^ ]+ called with status -[0-9]+: (Connection reset "
       r"by remote peer|Endpoint timeout)|UCX(ConnectionReset|[A-Za-z]*Error): .*(Connection reset "
       r"by remote peer|Endpoint timeout)",
       "ucp._libs.exceptions.UCXError: <stream_recv>: Connection reset by remote peer", UCXPY,
       ("Connection reset by remote peer", "Endpoint timeout"), "ucx-py", False),
)
