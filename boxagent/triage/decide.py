"""Which line of a log decides a failure, and what it overrules: the order an engineer reads
a failed run's tail in (docs/triage.md, "How the log decides").

  1. Only the failure episode counts: the incidents after the last progress line (errors the
     run went on after are not the cause); when it holds neither an error nor a warning (a
     tqdm bar redrawn after the crash, only a launcher's report), the last error before it.
  2. A job or profile rule's error decides over the built-in ones: the user said so.
  3. The LAST error decides over earlier ones (the exception that stopped the run); but when
     a launcher reports the failure, or the errors come from several ranks, the FIRST error
     decides (the launcher's own "first observed failure"; other ranks fail because of it),
     and the rank torchrun's `Root Cause (first observed failure)` names decides first.
  4. A cause explains its consequences (precedence.py, as data): a failing GPU, a CRLF
     script, a driver too old, a full disk, a failed install decide over the later errors
     they explain, and a launcher's teardown of the other ranks is no kill from outside.
  5. A launcher's report (ChildFailedError, CalledProcessError of python) and a crash line
     (Segmentation fault) never decide over an error: they are looked through.
  6. A warning never decides over an error; with no error it decides (loss=nan, a loss scale
     collapsing); then a launcher's report alone, a crash line alone, and last the errors
     of threads the process outlived. Shutdown noise (__del__, atexit) never decides.

decide(facts) -> Decision or None. Decision.hit is the deciding hit; Decision.overruled says,
line by line, which other matches were set aside and why.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from boxagent.triage import launchers, precedence
from boxagent.triage.incidents import Hit, Incident, build, is_source, line_no
from boxagent.triage.text import clip, strip_prefixes

MAX_OVERRULED = 8
TEARDOWN_GAP = 60       # lines: a launcher tears the other ranks down right after a failure
_QUOTE = 90


class Decision:
    __slots__ = ("hit", "kind", "incident", "overruled", "how")

    def __init__(self, incident: Optional[Incident], kind: str, overruled: List[str],
                 hit: Optional[Hit] = None):
        if hit is None:
            if incident is None:        # of() names its hit; every other caller an incident
                raise TypeError("a Decision needs an incident or a hit")
            hit = incident.best or incident.hits[-1]
        self.incident = incident
        self.hit: Hit = hit
        self.kind = kind              # error | warning | wrapper | crash | noise
        self.overruled = _cap(overruled)
        self.how = ""                 # user | first | last | root_cause | precedence

    @classmethod
    def of(cls, hit: Hit) -> "Decision":
        """A decision another fact made, naming one hit (a disk_full line behind a missing
        output)."""
        return cls(None, "error", [], hit)

    @property
    def decided_by(self) -> str:
        return "log line %s: %s" % (self.hit.get("line_no"), self.hit.get("line", ""))


def hits_of(facts: Dict[str, Any]) -> List[Hit]:
    return [h for h in facts.get("hits") or [] if isinstance(h, dict)
            and isinstance(h.get("class"), str)]


def decide(facts: Dict[str, Any]) -> Optional[Decision]:
    pl = facts.get("progress_line_no")
    lines = [str(x) for x in facts.get("last_lines") or []]
    incs = build(launchers.teardown_looked_through(hits_of(facts), lines),
                 pl if isinstance(pl, int) else None)
    if not incs:
        return None
    # the episode (noise included: the notes say why it did not decide)
    scope = [i for i in incs if i.after] if any(i.after is not None for i in incs) else incs
    after = [i for i in scope if not i.noise]
    survived = [i for i in incs if i.kind == "error" and not i.noise and i not in scope]
    errors = [i for i in after if i.kind == "error"]
    rank = launchers.root_cause(lines).get("rank")
    if errors:
        return _among_errors(scope, errors, survived, pl, rank)
    warned = [i for i in after if i.kind == "warning"]
    if warned:
        return Decision(warned[-1], "warning", _went_on(survived, pl) +
                        _notes(scope, warned[-1], "last"))
    if survived:             # a bar redrawn after the crash: the last error before it
        return _among_errors(survived[-1:] + scope, survived[-1:], survived[:-1], pl, rank)
    for kind in ("warning", "wrapper", "crash"):
        found = [i for i in after if i.kind == kind] or \
            [i for i in incs if i.kind == kind and not i.noise]
        if found:
            # the latest warning; the first report or crash line that is no quoted source
            pick = found[-1] if kind == "warning" else next(
                (i for i in found if not is_source(i.best or i.hits[-1])), found[0])
            return Decision(pick, kind, _notes(scope, pick, "last"))
    threads = [i for i in incs if i.noise == "thread" and i.kind == "error"]
    return Decision(threads[-1], "noise", []) if threads else None


def _among_errors(episode: List[Incident], errors: List[Incident], before: List[Incident],
                  pl: Any, rank: Optional[int] = None) -> Decision:
    # an error incident always has a best; `or` only tells the checker so
    user = [i for i in errors if (i.best or i.hits[-1]).get("source", "builtin") != "builtin"]
    ranked = [i for i in errors if rank is not None and i.proc == str(rank)]
    if user:
        pick, how = user[-1], "user"
    else:
        if ranked:
            pick, how = ranked[0], "root_cause"
        elif _first_observed(episode, errors):
            pick, how = errors[0], "first"
        else:
            pick, how = errors[-1], "last"
        # a launcher's teardown alone after the last progress line: the error just before it
        near = [i for i in before[-1:] if pick.start - i.end <= TEARDOWN_GAP]
        pool = errors + (near if pick.cls in precedence.SIGNALS else [])
        named = pick.best or pick.hits[-1]          # an error incident always has a best
        warned = [i for i in episode if i.kind == "warning" and not i.noise]
        root, chain = precedence.root(named, [i.best for i in pool], line_no,
                                      [i.best for i in warned])
        pool = pool + warned
        if chain:
            pick = next(i for i in pool if i.best is root)
            how = "precedence"
    d = Decision(pick, "error", _went_on([i for i in before if i is not pick], pl) +
                 _notes(episode, pick, how))
    d.how = how
    return d


def _went_on(before: List[Incident], pl: Any) -> List[str]:
    return ["%s came before the last progress line (log line %s): the run went on after it"
            % (_at(i), pl) for i in before[-3:]]


def _first_observed(episode: List[Incident], errors: List[Incident]) -> bool:
    """Whether the first error is the root: a launcher reported the failure after the
    errors, or they come from more than one rank."""
    last = errors[-1].end
    if any(i.kind == "wrapper" and i.start >= last for i in episode):
        return True
    return len(set(i.proc for i in errors if i.proc is not None)) > 1


def _notes(episode: List[Incident], pick: Incident, how: str) -> List[str]:
    """Why each other incident of the episode did not decide."""
    at = line_no(pick.best or pick.hits[-1])
    out = []
    for i in episode:
        if i is pick or i.kind == "empty" or (i.kind == pick.kind and i.cls == pick.cls):
            continue                          # the same verdict again says nothing new
        because = precedence.explains(pick.best, i.best, pick.start < i.start) \
            if how != "user" and i.kind == "error" else None
        note = ("%s follows from log line %s: %s" % (_at(i), at, because)) if because \
            else _note(i, pick, how, at)
        if note:
            out.append(note)
    return out


def _note(i: Incident, pick: Incident, how: str, at: int) -> Optional[str]:
    kind = i.kind
    if i.noise == "ignored":
        return "%s is shutdown noise (a dying object's __del__, an atexit hook)" % _at(i)
    if i.noise == "thread":
        return "%s is in a thread the process outlived" % _at(i)
    if kind == "wrapper":
        return "%s is %s: looked through to log line %s" % (_at(i), _launcher(i), at)
    if kind == "crash":
        return "%s is how the process died: the error at log line %s decides" % (_at(i), at)
    if kind == "warning":
        if pick.kind == "warning":
            return None
        return "warning at log line %s (%s) ignored: an exception %s at log line %s" % (
            line_no(i.best or i.hits[-1]), _quote(i.best), "follows" if i.start < at else "precedes", at)
    if how == "user":
        return "%s overruled: a job or profile rule names log line %s" % (_at(i), at)
    if how in ("first", "root_cause", "precedence") and i.start > pick.start:
        return "%s came after the first failure (log line %s): %s" % (
            _at(i), at, "another rank failing because of it" if i.proc != pick.proc
            else "a consequence of it")
    return "%s overruled: the later error at log line %s is the one that stopped the run" % (_at(i), at)


def _launcher(i: Incident) -> str:
    text = str((i.best or {}).get("line", ""))
    if "ChildFailedError" in text:
        return "torchrun's report of a failed rank (ChildFailedError)"
    if "CalledProcessError" in text:
        return "a launcher's report of its failed child (CalledProcessError)"
    if "exitcode" in text:
        return "torchrun's report of a rank's exit code"
    return "a launcher's report of its failed child"


def _at(i: Incident) -> str:
    h = i.best or i.hits[-1]
    return "log line %s: %s" % (line_no(h), _quote(h))


def _quote(h: Optional[Hit]) -> str:
    """The overruled line's own words (without its logging prefix: the line number finds it)."""
    return clip(strip_prefixes(str((h or {}).get("line", ""))), _QUOTE)


def _cap(notes: List[str]) -> List[str]:
    if len(notes) <= MAX_OVERRULED:
        return notes
    return notes[:MAX_OVERRULED - 1] + ["... and %d more" % (len(notes) - MAX_OVERRULED + 1)]
