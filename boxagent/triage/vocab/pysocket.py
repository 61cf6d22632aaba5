"""CPython's socket module: a blocking socket operation that passed its timeout. Below every
HTTP client's own words (urllib3 and requests wrap it; a tail cut before their message still
holds it). A socket on the loopback can time out too: suggestive, not definitive."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, lit, rx

SOCK_OLD = ("CPython 3.9 Modules/socketmodule.c sock_call_ex (PyErr_SetString(socket_timeout, "
            "\"timed out\"); socket.timeout, an OSError subclass)")
SOCK = ("CPython 3.10+ Modules/socketmodule.c sock_call_ex (PyErr_SetString(PyExc_TimeoutError, "
        "\"timed out\"); socket.timeout is TimeoutError's alias)")

ROWS = found_via(
    ("cases/network_transient/funasr-924-modelscope-socket-timeout.log",),
    lit("network_transient", "socket.timeout: timed out", "socket.timeout: timed out", SOCK_OLD,
        "python", False),
    rx("network_transient", r"^TimeoutError: timed out$", "TimeoutError: timed out", SOCK,
       ("TimeoutError: timed out",), "python", False),
)
