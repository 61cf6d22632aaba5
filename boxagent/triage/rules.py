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

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from boxagent.triage.builtin_rules import BUILTIN_RULES, CLASS_RANK, REMEDIATION
from boxagent.triage.text import match_text, show_match

try:  # Python >= 3.11 keeps the parser here; sre_parse warns on import there
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.8-3.10
    import sre_parse as _sre_parse  # type: ignore[no-redef]

SEVERITIES = ("info", "warning", "critical")
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
SOURCE_RANK = {"job": 0, "profile": 1, "builtin": 2}
MIN_KEYWORD = 3
TRACEBACK_WINDOW = 1000   # an exception line counts as a crash this many lines after a header


class Rule:
    __slots__ = ("cls", "pattern", "rx", "severity", "retryable", "remediation", "source",
                 "keywords", "needs_traceback", "tag", "order")

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
        self.needs_traceback = bool(spec.get("needs_traceback"))
        self.tag = spec.get("tag")
        self.order = order

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
    def __init__(self, rules: List[Rule]):
        self.rules = rules
        self.anchored = all(r.keywords for r in rules)
        self.anchors = minimal_anchors(k for r in rules for k in r.keywords)

    def __len__(self) -> int:
        return len(self.rules)

    def scan(self, block: bytes, first_line_no: int, state: ScanState) -> List[Dict[str, Any]]:
        """Hits in a block of complete lines (each ending in \\n); line numbers from first_line_no."""
        hits = []
        for line_no, raw in candidate_lines(block, self.anchors, first_line_no, not self.anchored):
            h = self.match_line(raw, line_no, state)
            if h is not None:
                hits.append(h)
        return hits

    def match_line(self, raw: bytes, line_no: int, state: ScanState) -> Optional[Dict[str, Any]]:
        text = None
        for rule in self.rules:
            if rule.keywords and not any(k in raw for k in rule.keywords):
                continue
            if text is None:
                text = match_text(raw)
            m = rule.rx.search(text)
            if m is None:
                continue
            if rule.needs_traceback and (state.traceback_line is None or
                                         line_no - state.traceback_line > TRACEBACK_WINDOW):
                continue
            if rule.tag == "traceback":
                state.traceback_line = line_no
            return rule.hit(line_no, text, m.start())
        return None

    def alternation(self) -> str:
        """All patterns as one alternation (what `grep -E` gets in the benchmark)."""
        return "|".join("(%s)" % r.pattern for r in self.rules)


def candidate_lines(block: bytes, anchors: Tuple[bytes, ...], first_line_no: int,
                    every_line: bool = False) -> Iterable[Tuple[int, bytes]]:
    """(line_no, raw line) for the lines of `block` that hold an anchor, in order.
    Cost: one bytes.find pass per anchor (C speed) plus work per candidate line only."""
    if every_line:
        lines = block.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        for i, raw in enumerate(lines):
            yield first_line_no + i, raw
        return
    found: Dict[int, int] = {}
    for a in anchors:
        i = block.find(a)
        while i >= 0:
            ls = block.rfind(b"\n", 0, i) + 1
            le = block.find(b"\n", i)
            if le < 0:
                le = len(block)
            found[ls] = le
            i = block.find(a, le)
    pos, line_no = 0, first_line_no
    for ls in sorted(found):
        line_no += block.count(b"\n", pos, ls)
        pos = ls
        yield line_no, block[ls:found[ls]]


def minimal_anchors(keywords: Iterable[bytes]) -> Tuple[bytes, ...]:
    """Drop a keyword that contains another one: the shorter finds every such line anyway."""
    ks = sorted(set(keywords), key=len)
    out: List[bytes] = []
    for k in ks:
        if not any(a in k for a in out):
            out.append(k)
    return tuple(out)


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


def _normalize(spec: Any) -> Optional[Dict[str, Any]]:
    """A usable rule dict, or None (malformed entries are dropped: the job spec and the
    profile were validated where a person could be told; the daemon must keep going)."""
    if not isinstance(spec, dict):
        return None
    cls, pattern = spec.get("class"), spec.get("pattern")
    if not (isinstance(cls, str) and cls and isinstance(pattern, str) and pattern):
        return None
    try:
        re.compile(pattern)
    except re.error:
        return None
    return spec


def build_rules(profile_rules: Optional[List[Dict[str, Any]]] = None,
                job_rules: Optional[List[Dict[str, Any]]] = None) -> RuleSet:
    merged: List[Tuple[str, Dict[str, Any]]] = []
    index: Dict[Tuple[str, str], int] = {}
    for source, specs in (("builtin", BUILTIN_RULES), ("profile", profile_rules or []),
                          ("job", job_rules or [])):
        for spec in specs:
            spec = _normalize(spec)
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


def _line_order(rule: Rule) -> Tuple[int, int, int]:
    rank = CLASS_RANK.index(rule.cls) if rule.cls in CLASS_RANK else -1
    return (SOURCE_RANK[rule.source], rank, rule.order)


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
    if spec.get("severity", "warning") not in SEVERITIES:
        return "`severity` must be one of %s" % "|".join(SEVERITIES)
    return None
