"""Causes and their consequences: which classes explain which later errors.

"The last exception decides" is right for independent errors and wrong for a cascade: a
script with CRLF line endings makes every later command "not found"; a failed `pip install`
makes every later import fail; a full disk makes every later write fail; a failing GPU makes
every later CUDA/NCCL call fail. The first failure of such a cascade is the cause.

EXPLAINS is the relation, as data: (cause class, words the cause line must hold or None,
consequence class or "*", words the consequence line must hold or None, why). A row applies
when the cause line comes BEFORE the consequence in the failure episode; `either_order` rows
(a GPU fault the kernel logged a moment after the CUDA error it caused) apply both ways.

root(pick, candidates) follows the relation back from the deciding error to the first
failure that explains it, and says which row did.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

Hit = Dict[str, Any]

_CUDA_CALL = r"CUDA|cuda|cuDNN|CUDNN|NCCL|GPU|device"
_WRITE = (r"I/O error|Input/output error|\[Errno 5\]|EIO|cannot be opened|[Uu]nable to (open|"
          r"create|write)|write failed|[Ff]ailed to (write|save|flush)|OSError|IOError|"
          r"[Ee]rror writing|short write|truncated")
_IMPORT = r"No module named|ModuleNotFoundError|ImportError|cannot import name|undefined symbol"
_INSTALL = (r"Could not find a version that satisfies|No matching distribution found|"
            r"Failed building wheel|Failed to build |ResolutionImpossible|subprocess-exited-"
            r"with-error|metadata-generation-failed|ERROR: Could not install packages|"
            r"PackagesNotFoundError|UnsatisfiableError|ResolvePackageNotFound|"
            r"pip.*(ReadTimeout|ConnectTimeout|Connection)")
_SHELL = (r"command not found|unrecognized arguments|arguments are required|No such file or "
          r"directory|invalid option|syntax error|unexpected token|not a valid identifier")
_TEARDOWN = r"closing signal|death signal|got signal: (2|15)\b|Signal 15 \(SIGTERM\)"

# (cause class, cause words, consequence class or "*", consequence words, why, either_order)
EXPLAINS: Tuple[Tuple[str, Optional[str], str, Optional[str], str, bool], ...] = (
    ("gpu_hardware", None, "*", None, "a failing GPU explains it", True),
    ("crlf_script", None, "code_error", _SHELL,
     "a script with CRLF line endings: the \\r in every line makes later commands and their "
     "arguments fail", False),
    ("driver_too_old", None, "*", _CUDA_CALL,
     "a driver too old for this CUDA makes every later CUDA call fail", False),
    ("torch_arch_mismatch", None, "*", _CUDA_CALL,
     "a torch without kernels for this GPU makes every later CUDA call fail", False),
    # TensorRT refuses an engine built for another GPU, and the code that wanted it fails on
    # the missing engine (`assert self.engine is not None`, a None deserialized)
    ("torch_arch_mismatch", r"engine plan file", "code_error", None,
     "an engine TensorRT refused to load leaves the code that uses it without one", False),
    ("disk_full", None, "truncated_checkpoint", None,
     "a write cut short by a full disk leaves the file truncated", False),
    ("disk_full", None, "code_error", _WRITE, "a full disk makes later writes fail", False),
    ("inodes_full", None, "truncated_checkpoint", None,
     "a write cut short by full inodes leaves the file truncated", False),
    ("inodes_full", None, "code_error", _WRITE, "full inodes make later writes fail", False),
    ("*", _INSTALL, "code_error", _IMPORT,
     "a dependency that failed to install cannot be imported", False),
    ("network_transient", _INSTALL, "code_error", _IMPORT,
     "a dependency whose download failed cannot be imported", False),
    ("network_transient", r"pip|conda|Downloading|Collecting", "code_error", _IMPORT,
     "a dependency whose download failed cannot be imported", False),
    # pip prints "(from versions: none)" for a name no index lists AND for an index it could
    # not reach; its own retry warnings before it (urllib3's "connection broken by
    # NewConnectionError", a read timeout) say which
    ("network_transient", r"[Rr]etrying|connection broken|NewConnectionError|ConnectTimeout|"
     r"ReadTimeout", "code_error", r"from versions: none|No matching distribution found",
     "an index pip could not reach lists no versions of anything", False),
    # NCCL relays the CUDA error it hit: "Cuda failure 2 'out of memory'" in its WARN line,
    # then "unhandled cuda error" from every collective after it; PyTorch's watchdog logs the
    # CUDA error its work check hit, then throws it on as c10::DistBackendError ("terminate
    # called after throwing an instance of 'c10::DistBackendError'", ProcessGroupNCCL.cpp)
    ("*", r"Cuda failure|cuda failure|CUDA error", "nccl", r"unhandled cuda error|"
     r"ncclUnhandledCudaError|Call to CUDA function failed|DistBackendError'?$",
     "NCCL reports the CUDA failure it hit: the CUDA error it relayed decides", False),
    # A wait on a request that cannot reach its server ends in a cancel: asyncio.wait_for
    # cancels the awaited task (CancelledError inside it) and raises TimeoutError from it
    # (CPython 3.8-3.11 Lib/asyncio/tasks.py wait_for; 3.12+ asyncio.timeouts, the same two
    # exceptions); concurrent.futures' result(timeout) raises its own TimeoutError and a
    # cancelled future CancelledError (Lib/concurrent/futures/_base.py). The network error
    # the client logged before is why nothing came back.
    ("network_transient", None, "code_error", r"\bCancelledError\b|(asyncio|futures)[\w.]*"
     r"\.TimeoutError\b", "a wait on a request that could not reach its server is cancelled "
     "when it times out", False),
    ("cgroup_oom", None, "code_error", r"DataLoader worker|exited unexpectedly|"
     r"BrokenProcessPool|terminated abruptly|Broken pipe|ConnectionResetError",
     "a worker the OOM killer took leaves its peers with a broken pipe", False),
    ("cgroup_oom", None, "network_transient", r"ConnectionResetError|Connection reset by peer|"
     r"Broken ?[Pp]ipe|EOFError", "a worker the OOM killer took leaves its peers with a broken "
     "pipe", False),
    # A launcher tears the other ranks down once one failed (torchrun's "Sending process N
    # closing signal SIGTERM", "Received 15 death signal"): a consequence, not a kill from
    # outside.
    ("*", None, "killed", _TEARDOWN,
     "the launcher's own teardown of the other ranks after the first failure", False),
    ("*", None, "hangup", r"closing signal SIGHUP|got signal: 1\b",
     "the launcher's own teardown of the other ranks after the first failure", False),
)

_ROWS = tuple((c, re.compile(cw) if cw else None, k, re.compile(kw) if kw else None, why, eo)
              for c, cw, k, kw, why, eo in EXPLAINS)
SIGNALS = ("killed", "hangup")


def explains(cause: Optional[Hit], consequence: Optional[Hit], cause_first: bool = True,
             any_cause: bool = True) -> Optional[str]:
    """Why `cause` explains `consequence`, or None. any_cause=False: only a row that names the
    cause's class (a warning explains nothing through a "*" row)."""
    if cause is None or consequence is None:
        return None
    cc, kc = cause.get("class"), consequence.get("class")
    if cause is consequence or cause.get("line_no") == consequence.get("line_no"):
        return None
    cline, kline = str(cause.get("line") or ""), str(consequence.get("line") or "")
    for c, cw, k, kw, why, either in _ROWS:
        if not cause_first and not either:
            continue
        if (c != "*" and c != cc) or (c == "*" and not any_cause):
            continue
        if c == "*" and cc in SIGNALS:
            continue                            # a teardown line explains nothing
        if k != "*" and k != kc:
            continue
        if k == "*" and kc == cc:
            continue
        if (cw and not cw.search(cline)) or (kw and not kw.search(kline)):
            continue
        return why
    return None


def root(pick: Hit, candidates: Sequence[Optional[Hit]], order: Any,
         weak: Sequence[Optional[Hit]] = ()) -> Tuple[Hit, List[Tuple[Hit, str]]]:
    """Follow EXPLAINS back from `pick` among `candidates` (the errors of the episode):
    (the root hit, [(each hit it explains, why)]). `order(h)` is a hit's place in the log.
    `weak` hits (the episode's warnings: torch's "UserWarning: … driver on your system is too
    old" before "No CUDA GPUs are available") explain only through a row naming their class."""
    weak_ids = set(id(h) for h in weak if h is not None)
    candidates = list(candidates) + [h for h in weak if h is not None]
    chain: List[Tuple[Hit, str]] = []
    cur = pick
    for _ in range(len(candidates)):
        found = None
        for cand in sorted((c for c in candidates if c is not None), key=order):
            if cand is cur:
                continue
            first = order(cand) < order(cur)
            why = explains(cand, cur, cause_first=first, any_cause=id(cand) not in weak_ids)
            if why:
                found = (cand, why)
                break
        if found is None:
            break
        chain.append((cur, found[1]))
        cur = found[0]
        if any(cur is c for c, _ in chain):
            break
    return cur, chain
