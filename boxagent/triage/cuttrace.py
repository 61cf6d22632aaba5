"""A Python traceback the log ends in, cut before its exception line, read by where it stopped.

A paste or a tail often stops inside a traceback: the frames are there, the exception line is
not (the reporter cut it, the terminal scrolled, pip's "ERROR: Exception:" header and a
half-pasted stack). Python prints a traceback's frames outermost first (CPython
Lib/traceback.py, StackSummary.format), so the last frame shown is the code that was running
when it raised. When that code is the network stack itself (the socket, TLS, HTTP client
modules of the standard library, urllib3, requests' adapter, httpcore, aiohttp's connector,
pip's downloader), the failure is the network's: a read that broke off, a connect that timed
out. Where the last header has no frame under it (a chained traceback cut right after
"During handling of the above exception, another exception occurred:"), the innermost frame
of the traceback above it in the chain is the one shown.

rich's traceback (rich/traceback.py, which accelerate, kohya's scripts and typer CLIs install)
draws the same stack in a box: each frame as `│ PATH:LINE in FUNC │`, the failing source line
marked `❱`, the exception line under the box's bottom edge. A log that ends among the box's
lines is a traceback cut the same way, with its innermost frame the last one drawn.

cut_traceback(lines) -> (the innermost frame "path:line in func", the network module's role or
None for any other code) or None; network_cut(lines) keeps the network stack's only.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

_FRAME = re.compile(r'^\s*File "([^"]+)", line ([0-9]+)(?:, in (\S+))?')
_HEADER = "Traceback (most recent call last):"
_CHAIN = ("During handling of the above exception, another exception occurred:",
          "The above exception was the direct cause of the following exception:")
_RICH_EDGE = ("\u2502", "\u2570", "\u256d")         # │ ╰ ╭: rich's box, rounded
_RICH_FRAME = re.compile(r"^\u2502 (\S.*?):([0-9]+) in (\S+)\s*\u2502$")
_REACH = 60             # lines above the end: one traceback chain, not the whole log

# The network stack by module path, as its own packages lay it out ("/" or "\" separators).
#   CPython Lib/: socket.py, ssl.py, http/client.py, urllib/request.py (do_open raises URLError)
#   urllib3 1.x/2.x: connection.py, connectionpool.py, response.py, util/connection.py (also
#     vendored as pip/_vendor/urllib3)
#   requests 2.x: adapters.py (HTTPAdapter.send turns urllib3's errors into ConnectionError)
#   httpcore 0.x/1.x (httpx's transport), aiohttp 3.x connector.py / client_proto.py
#   pip: pip/download.py (pip <= 9), pip/_internal/download.py (10-19),
#     pip/_internal/network/ (20+), and its vendored cachecontrol/filewrapper.py (reads the
#     HTTP response body through the cache)
_NETWORK = (
    ("the standard library's sockets, TLS or HTTP client",
     r"(^|/)(socket|ssl)\.py$|(^|/)http/client\.py$|(^|/)urllib/request\.py$"),
    ("urllib3", r"(^|/)urllib3/"),
    ("requests' HTTP adapter", r"(^|/)requests/adapters\.py$"),
    ("httpcore", r"(^|/)httpcore/"),
    ("aiohttp's connection", r"(^|/)aiohttp/(connector|client_proto|client_reqrep)\.py$"),
    ("pip's downloader", r"(^|/)pip/(_internal/)?download\.py$|(^|/)pip/_internal/network/|"
     r"(^|/)cachecontrol/filewrapper\.py$"),
)
_NETWORK_RX = tuple((role, re.compile(rx)) for role, rx in _NETWORK)


def _is_code_line(raw: str) -> bool:
    """A frame's source line: indented under its `File` line."""
    return raw[:1] in (" ", "\t") and bool(raw.strip())


def cut_frames(lines: List[str]) -> Optional[List[str]]:
    """The frame lines of the traceback chain the log ends in, innermost last, when the last
    traceback of it has no exception line (the log stops among its frames or right under its
    header); None when the log does not end so."""
    tail = [str(x or "").rstrip("\r\n") for x in lines[-_REACH:]]
    header = None
    for i in range(len(tail) - 1, -1, -1):
        if tail[i].rstrip().endswith(_HEADER):
            header = i
            break
    if header is None:
        return None
    for raw in tail[header + 1:]:
        if raw.strip() and not (_FRAME.match(raw) or _is_code_line(raw)):
            return None            # an exception line or other output: not cut
    frames = [x for x in tail[header + 1:] if _FRAME.match(x)]
    if frames:
        return frames
    # a header with nothing under it: the chain's previous traceback, if the chain says so
    above = [x.strip() for x in tail[:header] if x.strip()]
    if not above or above[-1] not in _CHAIN:
        return None
    start = max((i for i in range(header) if tail[i].rstrip().endswith(_HEADER)), default=None)
    if start is None:
        return None
    return [x for x in tail[start:header] if _FRAME.match(x)] or None


def rich_cut_frame(lines: List[str]) -> Optional[Tuple[str, str, str]]:
    """(path, line, func) of the last frame of a rich traceback box the log ends in, or None
    when the log does not end inside one."""
    tail = [str(x or "").strip() for x in lines[-_REACH:]]
    while tail and not tail[-1]:
        tail.pop()
    if not tail or not tail[-1].startswith(_RICH_EDGE):
        return None
    for text in reversed(tail):
        if not text.startswith(_RICH_EDGE):
            return None         # out of the box without meeting a frame
        m = _RICH_FRAME.match(text)
        if m:
            return m.group(1), m.group(2), m.group(3)
    return None


def cut_traceback(lines: List[str]) -> Optional[Tuple[str, Optional[str]]]:
    """(innermost frame, the network module's role or None) when the log ends in a traceback
    cut before its exception line (Python's own format or rich's box), else None."""
    frames = cut_frames(lines)
    m = _FRAME.match(frames[-1]) if frames else None
    found = (m.group(1), m.group(2), m.group(3)) if m else rich_cut_frame(lines)
    if found is None:
        return None
    path, line, func = found
    where = "%s:%s" % (path, line) + (" in %s" % func if func else "")
    unix = path.replace("\\", "/")
    return where, next((role for role, rx in _NETWORK_RX if rx.search(unix)), None)


def network_cut(lines: List[str]) -> Optional[Tuple[str, str]]:
    """(innermost frame, the network module's role) when the log ends in a traceback cut in
    the network stack, else None."""
    found = cut_traceback(lines)
    if found is None or found[1] is None:
        return None
    return found[0], found[1]
