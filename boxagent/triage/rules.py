"""The rule table: built-in rules, then the profile's, then the job's `[[rule]]` entries.

CONTRACT: build_rules(profile_rules, job_rules) -> RuleSet.

A job or profile rule with the same class+pattern as an earlier one replaces it (to change its
severity, retryability or remediation); any other adds a rule. Within one line the first
matching rule wins: job rules, then profile rules, then the built-ins most specific first.

Speed: running ~20 regexes on every line of a 1 GB log is hopeless in Python, so each rule
has literal keywords (given, or derived from its pattern) and a block of lines is first
searched for those literals with bytes.find (C speed); only lines holding one are decoded and
matched. A pattern with no literal of 3+ characters (or case-insensitive) makes every line a
candidate: correct, just slower.
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Set, Tuple

from boxagent.triage.anchors import Finder, every_line, minimal_anchors, numbered, trie_pattern
from boxagent.triage.builtin_rules import BUILTIN_RULES, CLASS_RANK, REMEDIATION
from boxagent.triage.regexsafe import unsafe_reason
from boxagent.triage.text import match_text, show_match, user_text
from boxagent.triage.windows import TRACEBACK_WINDOW, window_ranges

try:  # Python >= 3.11 keeps the parser here; sre_parse warns on import there
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.8-3.10
    import sre_parse as _sre_parse  # type: ignore[no-redef]

SEVERITIES = ("info", "warning", "critical")
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
SOURCE_RANK = {"job": 0, "profile": 1, "builtin": 2}
MIN_KEYWORD = 3


class Rule:
    __slots__ = ("cls", "pattern", "rx", "severity", "retryable", "remediation", "source",
                 "keywords", "gate", "needs_traceback", "tag", "order", "vocab")

    def __init__(self, spec: Dict[str, Any], source: str, order: int):
        self.cls = str(spec["class"])
        self.pattern = str(spec["pattern"])
        self.rx = re.compile(self.pattern, re.M)
        sev = spec.get("severity")
        self.severity = sev if sev in SEVERITIES else "warning"
        self.retryable = spec.get("retryable") is True
        self.remediation = str(spec.get("remediation") or REMEDIATION.get(self.cls, ""))
        self.source = source
        kws = spec.get("keywords")
        if kws is None:
            kws = derive_keywords(self.pattern)
        self.keywords = tuple(k.encode("utf-8") for k in kws) if kws else ()
        # "one of the keywords is in the line" as one regex: ~3x faster than a loop of `in`
        self.gate = re.compile(trie_pattern(list(minimal_anchors(self.keywords)))) if kws else None
        self.needs_traceback = bool(spec.get("needs_traceback"))
        self.tag = spec.get("tag")
        self.order = order
        self.vocab = bool(spec.get("vocab"))   # folded from triage/vocab rows (each with its example)

    def hit(self, line_no: int, text: str, start: int) -> Dict[str, Any]:
        h = {"class": self.cls, "severity": self.severity, "retryable": self.retryable,
             "line_no": line_no, "line": show_match(text, start), "source": self.source,
             "remediation": self.remediation}
        if self.tag:
            h["tag"] = self.tag
        return h


class ScanState:
    """What scanning carries from one block to the next (per log, never shared)."""

    def __init__(self) -> None:
        self.traceback_line: Optional[int] = None


class RuleSet:
    """The rules, and the literals that find their candidate lines.

    A generic exception line (`needs_traceback`) only counts within TRACEBACK_WINDOW lines
    after a traceback header, so its broad literals ("Error", "Exception") are searched only
    there: a progress bar printing `val_MeanSquaredError=0.05` on every line is not a
    candidate line at all outside a traceback's window. Hits are the same as matching every
    line that holds any literal, in order."""

    def __init__(self, rules: List[Rule]):
        self.rules = rules
        self.anchored = all(r.keywords for r in rules)
        self.anchors = minimal_anchors(k for r in rules if not r.needs_traceback for k in r.keywords)
        self.window_anchors = minimal_anchors(k for r in rules if r.needs_traceback for k in r.keywords)
        self.window_rules = [r for r in rules if r.needs_traceback]
        self.finder = Finder(self.anchors)
        self.window_finder = Finder(self.window_anchors)

    def __len__(self) -> int:
        return len(self.rules)

    def scan(self, block: bytes, first_line_no: int, state: ScanState) -> List[Dict[str, Any]]:
        """Hits in a block of complete lines (each ending in \\n); line numbers from first_line_no."""
        if not self.anchored:
            return [h for h in (self.match_line(raw, n, state) for n, raw in every_line(block, first_line_no))
                    if h is not None]
        carried, hits, headers, seen = state.traceback_line, [], [], set()
        for line_no, ls, le in numbered(block, self.finder.spans(block), first_line_no):
            seen.add(line_no)
            before = state.traceback_line
            h = self.match_line(block[ls:le], line_no, state)
            if h is not None:
                hits.append(h)
            if state.traceback_line != before:
                headers.append((line_no, le))
        if self.window_finder and (carried is not None or headers):
            more = []
            for start, end, line_no in window_ranges(block, first_line_no, carried, headers):
                more += self.window_hits(block, start, end, line_no, seen)
            if more:
                hits = sorted(hits + more, key=lambda h: h["line_no"])
        return hits

    def window_hits(self, block: bytes, start: int, end: int, line_no: int,
                    seen: Set[int]) -> List[Dict[str, Any]]:
        """Hits of the lines of block[start:end] (the first is line_no, all in a traceback's
        window) holding a window literal, except the line numbers in `seen` (matched already)."""
        hits = []
        for n, ls, le in numbered(block, self.window_finder.spans(block, start, end), line_no, start):
            if n not in seen:          # no main literal in it: only the window rules can match
                h = self._match(block[ls:le], n, True, self.window_rules)[0]
                if h is not None:
                    hits.append(h)
        return hits

    def match_line(self, raw: bytes, line_no: int, state: ScanState) -> Optional[Dict[str, Any]]:
        tb = state.traceback_line
        h, header = self._match(raw, line_no, tb is not None and line_no - tb <= TRACEBACK_WINDOW)
        if header:
            state.traceback_line = line_no
        return h

    def _match(self, raw: bytes, line_no: int, in_window: bool,
               rules: Optional[List[Rule]] = None) -> Tuple[Optional[Dict[str, Any]], bool]:
        """(the first rule's hit, whether the line is a traceback header)."""
        text = None
        for rule in self.rules if rules is None else rules:
            if rule.gate is not None and rule.gate.search(raw) is None:
                continue                  # none of its keywords: it cannot match
            if rule.needs_traceback and not in_window:
                continue
            if text is None:
                text = match_text(raw)
            seen = text if rule.source == "builtin" else user_text(text)
            m = rule.rx.search(seen)
            if m is None:
                continue
            return rule.hit(line_no, seen, m.start()), rule.tag == "traceback"
        return None, False

    def alternation(self) -> str:
        """All patterns as one alternation (what `grep -E` gets in the benchmark)."""
        return "|".join("(%s)" % r.pattern for r in self.rules)


def derive_keywords(pattern: str) -> Optional[List[str]]:
    """Literals one of which every match of `pattern` contains, or None when there are none
    (case-insensitive, or a branch without a literal of MIN_KEYWORD characters)."""
    try:
        parsed = _sre_parse.parse(pattern, 0)
    except Exception:  # noqa: BLE001 - the pattern is validated elsewhere; here: no keywords
        return None
    if parsed.state.flags & re.IGNORECASE:
        return None
    return _seq_keywords(list(parsed))


def _seq_keywords(items: List[Any]) -> Optional[List[str]]:
    best: List[str] = []
    run: List[str] = []
    choices: List[List[str]] = []
    for op, av in items + [(None, None)]:
        if op is _sre_parse.LITERAL:
            run.append(chr(av))
            continue
        if len(run) > (len(best[0]) if best else 0):
            best = ["".join(run)]
        run = []
        sub = _group_keywords(op, av)
        if sub:
            choices.append(sub)
    if best and len(best[0]) >= MIN_KEYWORD:
        return best
    return min(choices, key=len) if choices else None


def _group_keywords(op: Any, av: Any) -> Optional[List[str]]:
    if op is _sre_parse.BRANCH:
        out: List[str] = []
        for branch in av[1]:
            k = _seq_keywords(list(branch))
            if not k:
                return None
            out.extend(k)
        return out
    if op is _sre_parse.SUBPATTERN:
        return _seq_keywords(list(av[-1]))
    return None


def _normalize(spec: Any, source: str) -> Optional[Dict[str, Any]]:
    """A usable rule dict, or None (malformed entries are dropped: the job spec and the
    profile were validated where a person could be told; the daemon must keep going)."""
    if not isinstance(spec, dict):
        return None
    cls, pattern = spec.get("class"), spec.get("pattern")
    if not (isinstance(cls, str) and cls and isinstance(pattern, str) and pattern):
        return None
    try:
        re.compile(pattern, re.M)         # the flags Rule compiles it with: the re cache
    except re.error:                      # serves that second compile (a rule set's start-up
        return None                       # was half spent compiling every pattern twice)
    if source != "builtin" and unsafe_reason(pattern) is not None:
        return None                       # a spec written before the submit check: never run it
    return spec


_BUILT: Dict[str, RuleSet] = {}
_BUILT_MAX = 16


def build_rules(profile_rules: Optional[List[Dict[str, Any]]] = None,
                job_rules: Optional[List[Dict[str, Any]]] = None) -> RuleSet:
    """The rule set for a profile's and a job's own rules. The same rules give the same (read-only)
    set: a sweep of 64 runs compiles its ~100 patterns once, not before each run's first stage
    (25-45 ms of the daemon's loop each, which every GPU of the box waited out)."""
    try:
        key = json.dumps([profile_rules or [], job_rules or []], sort_keys=True)
    except (TypeError, ValueError):
        return _build(profile_rules, job_rules)
    built = _BUILT.get(key)
    if built is None:
        if len(_BUILT) >= _BUILT_MAX:
            _BUILT.clear()
        built = _BUILT[key] = _build(profile_rules, job_rules)
    return built


def _build(profile_rules: Optional[List[Dict[str, Any]]], job_rules: Optional[List[Dict[str, Any]]]) -> RuleSet:
    merged: List[Tuple[str, Dict[str, Any]]] = []
    index: Dict[Tuple[str, str], int] = {}
    for source, specs in (("builtin", BUILTIN_RULES), ("profile", profile_rules or []),
                          ("job", job_rules or [])):
        for spec in specs:
            spec = _normalize(spec, source)
            if spec is None:
                continue
            key = (spec["class"], spec["pattern"])
            if key in index:
                merged[index[key]] = (source, spec)
            else:
                index[key] = len(merged)
                merged.append((source, spec))
    rules = [Rule(spec, source, i) for i, (source, spec) in enumerate(merged)]
    rules.sort(key=_line_order)
    return RuleSet(rules)


def _line_order(rule: Rule) -> Tuple[int, int, int, int]:
    rank = CLASS_RANK.index(rule.cls) if rule.cls in CLASS_RANK else -1
    # Within a class a tagged rule (crash, wrapper, traceback) keeps its line; then the
    # vocabulary rows that carry a remedy of their own come before the class's generic
    # patterns: "ImportError: …_C.so: undefined symbol: _ZN3c10…" is an extension built
    # against another torch (reinstall it), not the job's bug that the generic exception
    # line would say, and both are code_error, so only the order tells which remedy shows.
    own_fix = rule.vocab and rule.remediation != REMEDIATION.get(rule.cls, "")
    tier = 0 if rule.tag else (1 if own_fix else 2)
    return (SOURCE_RANK[rule.source], rank, tier, rule.order)


def validate_rule(spec: Any) -> Optional[str]:
    """Why a [[rule]] entry is unusable (for a person), or None."""
    if not isinstance(spec, dict):
        return "expected a table with class and pattern"
    for key in ("class", "pattern"):
        if not isinstance(spec.get(key), str) or not spec.get(key):
            return "`%s` must be a non-empty string" % key
    try:
        re.compile(spec["pattern"])
    except re.error as exc:
        return "`pattern` is not a valid regular expression: %s" % exc
    why = unsafe_reason(spec["pattern"])
    if why is not None:
        return "`pattern` %s" % why
    if spec.get("severity", "warning") not in SEVERITIES:
        return "`severity` must be one of %s" % "|".join(SEVERITIES)
    return None
