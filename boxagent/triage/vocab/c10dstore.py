"""torch.distributed's rendezvous store (c10d TCPStore) in its own words: a worker that could
not reach the store, a store that waited for workers that never joined, and a store that
could not listen because its port is taken.

The first two are the ranks failing to meet over the network (the master's address or port
not reachable, a node that did not start): the collective class, as torch.py reads
RendezvousTimeoutError; often a wrong MASTER_ADDR/port too, so suggestive. A port already in
use is the job's configuration (another job on MASTER_PORT): code_error.
"""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

SOCK = ("PyTorch 2.4 torch/csrc/distributed/c10d/socket.cpp (SocketConnectOp::throwTimeoutError "
        "\"The client socket has timed out after {} while trying to connect to ({}, {}).\", "
        "SocketListenOp \"The server socket has failed to listen on any local network address.\")")
STORE = ("PyTorch 2.4 torch/csrc/distributed/c10d/TCPStore.cpp / Store (\"Timed out after {} seconds "
         "waiting for clients. {}/{} clients joined.\")")

_S = False

ROWS = (
    lit("nccl", "The client socket has timed out after",
        "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while "
        "trying to connect to (10.0.0.1, 29500).", SOCK, "c10d", _S),
    rx("nccl", r"seconds waiting for clients\. [0-9]+/[0-9]+ clients joined",
       "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 "
       "clients joined.", STORE, ("clients joined",), "c10d", _S),
    lit("code_error", "The server socket has failed to listen on any local network address",
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
        "network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address "
        "already in use", SOCK, "c10d"),
)
