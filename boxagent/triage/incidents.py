"""A log's rule hits grouped into incidents: what an engineer sees when reading the tail.

An incident is one error as the log tells it: a traceback from its header to its exception
line (a chained traceback - "During handling of the above exception" - stays one incident),
with the lines that detail that exception right after it (NCCL's "Last error: … Connection
reset by peer", a message wrapped by the console); or a lone failure line (`Killed`, an
NCCL watchdog line) with its details. Kinds:

  error    it holds a root failure line (any critical hit that is not a launcher's report
           or a crash line); `best` is its most specific one (CLASS_RANK), first of them
  wrapper  a launcher reporting that its child failed (ChildFailedError, CalledProcessError
           of python, mp.spawn's "terminated with exit code"): the child's error is elsewhere
  crash    how a process died (Segmentation fault, terminate called, core dumped)
  warning  only warning hits (loss=nan in a progress line, a loss scale collapsing)
  empty    a traceback whose exception line is not in the log (a cut paste)

`noise` marks an incident the process outlived: the traceback of a dying object's __del__
("Exception ignored in: …", shutdown noise) or of a thread ("Exception in thread …").
`proc` is the rank prefix of its lines (`[rank5]:`), when the log has one.

Some lines count for less than their rule says: a line Python's warnings module wrote
(`x.py:46: UserWarning: [Errno 28] …`) and a line announcing a retry (`wandb: Network error
(ReadTimeout), entering retry loop`: the program handles it; wandb prints it while a crashed
run shuts down) are warnings whatever their words, and a source line a traceback quotes
(`raise ChildFailedError(`) never names the error when the exception line itself is there.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from boxagent.triage import precedence
from boxagent.triage.builtin_rules import CLASS_RANK
from boxagent.triage.text import strip_prefixes

DETAIL_GAP = 3          # lines: a failure line this close after an incident details it
MARKER_GAP = 3          # lines: a traceback header this close after a noise marker is its
_PROC = re.compile(r"^\[(?:rank|default|Rank ?)?([0-9]+)\]")
_WARNING_LINE = re.compile(r"(^|:[0-9]+: )[A-Z][A-Za-z]*Warning: |retry loop|[Rr]etrying\b")
_SOURCE_LINE = re.compile(r"^[\s\u2502\u2503|\u2771>0-9]*raise [A-Za-z_][A-Za-z0-9_.]*(\(|$)")
Hit = Dict[str, Any]


class Incident:
    __slots__ = ("hits", "start", "end", "noise", "proc", "open_tb", "chained", "after", "_best")

    def __init__(self, start: int, noise: Optional[str] = None, proc: Optional[str] = None):
        self.hits: List[Hit] = []
        self.start = self.end = start
        self.noise = noise            # "ignored" | "thread" | None
        self.proc = proc
        self.open_tb = False          # a traceback header is waiting for its exception line
        self.chained = False          # a chain marker is waiting for the next traceback
        self.after: Optional[bool] = None   # after the last progress line
        self._best: Any = ()

    def add(self, h: Hit) -> None:
        self._best = ()
        self.hits.append(h)
        self.end = max(self.end, line_no(h))

    @property
    def roots(self) -> List[Hit]:
        return [h for h in self.hits if severity(h) == "critical"
                and h.get("tag") not in ("wrapper", "crash")]

    @property
    def kind(self) -> str:
        if self.roots:
            return "error"
        tags = set(h.get("tag") for h in self.hits)
        for kind in ("wrapper", "crash"):
            if kind in tags:
                return kind
        if any(severity(h) == "warning" for h in self.hits):
            return "warning"
        return "empty"

    @property
    def best(self) -> Optional[Hit]:
        """The hit that names this incident: the most specific root (job and profile rules
        first), else its first wrapper / crash / warning line."""
        if self._best == ():
            self._best = self._name()
        return self._best

    def _name(self) -> Optional[Hit]:
        roots = self.roots
        if roots:
            # a line another root of the incident explains (a launcher's teardown right after
            # the error) never names it
            causes = [r for r in roots if not any(
                precedence.explains(o, r, line_no(o) < line_no(r)) for o in roots if o is not r)]
            return min(causes or roots, key=_specificity)
        for tag in ("wrapper", "crash"):
            tagged = [h for h in self.hits if h.get("tag") == tag]
            if tagged:
                return min(tagged, key=lambda h: (is_source(h), -line_no(h)))
        warned = [h for h in self.hits if severity(h) == "warning"]
        return warned[0] if warned else None

    @property
    def cls(self) -> Optional[str]:
        b = self.best
        return b.get("class") if b else None


def line_no(h: Hit) -> int:
    try:
        return int(h.get("line_no") or 0)
    except (TypeError, ValueError):
        return 0


def _specificity(h: Hit) -> tuple:
    cls = h.get("class", "")
    rank = CLASS_RANK.index(cls) if cls in CLASS_RANK else -1
    return (0 if h.get("source", "builtin") != "builtin" else 1, rank, is_source(h), line_no(h))


def severity(h: Hit) -> Optional[str]:
    """The hit's severity, but "warning" for a line the warnings module wrote or one that
    announces a retry."""
    sev = h.get("severity")
    if sev == "critical" and _WARNING_LINE.search(strip_prefixes(str(h.get("line") or ""))):
        return "warning"
    return sev


def is_source(h: Hit) -> bool:
    """A source line a traceback quotes (`raise X(`), not a message."""
    return bool(_SOURCE_LINE.match(strip_prefixes(str(h.get("line") or ""))))


def proc_of(h: Hit) -> Optional[str]:
    m = _PROC.match(str(h.get("line") or ""))
    return m.group(1) if m else None


def build(hits: List[Hit], progress_line_no: Optional[int] = None) -> List[Incident]:
    """The incidents of `hits` (any order), in log order."""
    out: List[Incident] = []
    cur: Optional[Incident] = None
    for h in sorted(hits, key=line_no):
        cur = _step(out, cur, h)
    for inc in out:
        # the line that names it counts, not a header glued to the last progress bar
        named = inc.best or (inc.hits[-1] if inc.hits else None)
        flag = named.get("after_progress") if named is not None else None
        if flag is None and progress_line_no is not None and named is not None:
            flag = line_no(named) > progress_line_no
        inc.after = flag
    return [i for i in out if i.hits]


def _step(out: List[Incident], cur: Optional[Incident], h: Hit) -> Optional[Incident]:
    """Place one hit; returns the incident now open."""
    tag, n, proc = h.get("tag"), line_no(h), proc_of(h)
    if tag in ("ignored", "thread"):
        return _open(out, Incident(n, noise=tag, proc=proc), h, open_tb=False)
    if tag == "chain":
        if cur is not None:
            cur.chained = True
            cur.end = n
        return cur
    if tag == "traceback":
        if cur is not None and (cur.chained or (cur.noise and not cur.roots and not cur.open_tb
                                                and n - cur.end <= MARKER_GAP)):
            cur.chained, cur.open_tb = False, True
            cur.add(h)
            return cur
        return _open(out, Incident(n, proc=proc), h, open_tb=True)
    if severity(h) not in ("critical", "warning"):
        return cur
    if cur is not None and _joins(cur, h, n, proc):
        cur.add(h)
        if severity(h) == "critical" and not is_source(h):
            cur.open_tb = False
        return cur
    return _open(out, Incident(n, proc=proc), h, open_tb=False)


def _joins(cur: Incident, h: Hit, n: int, proc: Optional[str]) -> bool:
    """Whether failure line `h` belongs to the incident `cur` (its exception line or one of
    the lines detailing it)."""
    if cur.proc is not None and proc is not None and cur.proc != proc:
        return False
    warning = severity(h) == "warning"
    if cur.open_tb:
        return not warning
    if cur.noise and not cur.roots:       # a noise marker's exception line, without a header
        return not warning and n - cur.end <= MARKER_GAP
    if n - cur.end > DETAIL_GAP:
        return False
    if warning != (cur.kind == "warning"):
        return False              # a warning never details an error, nor the reverse
    # a launcher's report and a crash line are incidents of their own, and never detailed
    # (a report's source line and its exception line are one)
    tag, kind = h.get("tag"), cur.kind
    if tag in ("wrapper", "crash") or kind in ("wrapper", "crash"):
        return tag == kind
    return True


def _open(out: List[Incident], inc: Incident, h: Hit, open_tb: bool) -> Incident:
    out.append(inc)
    inc.open_tb = open_tb
    inc.add(h)
    return inc
