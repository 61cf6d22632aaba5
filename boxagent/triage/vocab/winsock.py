"""Winsock's error numbers as CPython prints them on Windows: a socket call that failed raises
OSError with winerror set, and str() of it is `[WinError 10060] <FormatMessage text>`, the
text in the user's language (a Chinese Windows words it in Chinese), so
the English strerror rows (errno.py) miss it and only the number is stable. CPython maps the
Winsock numbers to the same subclasses as their errnos (TimeoutError for WSAETIMEDOUT,
ConnectionRefusedError, ConnectionResetError, ...); their repr in a wrapped error
(`ConnectionResetError(10054, '...', None, 10054, None)`) carries the number first too. A
connect that timed out, was refused, reset or aborted, or found no route: the network, as the
errno rows say. Read after a field case (Fooocus downloading its models on a Chinese Windows:
`TimeoutError: [WinError 10060] ...`) was called a code error."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

WSA = ("Windows SDK 10.0.22621 winerror.h (WSAENETUNREACH 10051, WSAECONNABORTED 10053, "
       "WSAECONNRESET 10054, WSAETIMEDOUT 10060, WSAECONNREFUSED 10061, WSAEHOSTUNREACH 10065); "
       "CPython 3.12 Python/errors.c PyErr_SetExcFromWindowsErrWithFilenameObjects "
       "(\"[WinError %d] %s\" with FormatMessageW's text), Objects/exceptions.c winerror_to_errno")

# the network's Winsock numbers: unreachable (51), aborted (53), reset (54), timed out (60),
# refused (61), no route to host (65)
_NUM = r"100(5[134]|6[015])"

ROWS = found_via(
    ("wave6/cases/network_transient/f-fooocus-2874-model-download-winerror-10060.log",),
    rx("network_transient", r"\[WinError " + _NUM + r"\]",
       "TimeoutError: [WinError 10060] A connection attempt failed because the connected party "
       "did not properly respond after a period of time", WSA, ("[WinError 100",), "python"),
    rx("network_transient", r"(Timeout|Connection(Reset|Refused|Aborted))Error\(" + _NUM + ", ",
       "ConnectionResetError(10054, 'An existing connection was forcibly closed by the remote "
       "host', None, 10054, None)", WSA,
       ("Error(100",), "python"),
)
