"""torch.distributed's TCP helpers in PyTorch 1.x (c10d's Utils.hpp, under the store and gloo):
a send or receive whose socket timed out (EAGAIN/EWOULDBLOCK on a socket with a timeout set)
throws `std::runtime_error("Socket Timeout")`, which Python shows as `RuntimeError: Socket
Timeout`: the ranks stopped hearing each other (a rank that never came up, a peer that hung,
the network), the collective class, as c10dstore.py reads the store's timeouts; suggestive,
since a wrong MASTER_ADDR gives it too. Read after a field case (DGL's distributed training,
an all_reduce at start-up) ended with it and the engine called it a code error."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, lit

SYSCHECK = ("PyTorch 1.10 torch/lib/c10d/Utils.hpp SYSCHECK (errno == EAGAIN || errno == "
            "EWOULDBLOCK: throw std::runtime_error(\"Socket Timeout\")), used by tcputil::sendBytes "
            "/ recvBytes")

ROWS = found_via(
    ("wave6/cases/nccl/e-dgl-3629-dist-all-reduce-socket-timeout.log",),
    lit("nccl", "RuntimeError: Socket Timeout", "RuntimeError: Socket Timeout", SYSCHECK, "c10d",
        False),
)
