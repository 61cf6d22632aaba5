"""User regexes that cannot freeze the daemon: catastrophic shapes refused at submit.

Python's `re` backtracks, and it never releases the GIL or times out: one user pattern like
`^(a+)+$` on a log line of 40 "a"s and a "!" runs for hours inside the daemon's loop, and the
heartbeat, every other run and every notification stop with it. So every pattern a job or a
profile gives (fail/success/progress patterns, wait patterns, [[rule]] patterns, metrics
patterns) is parsed at submit and refused when it has a shape that backtracks
exponentially (or with a polynomial degree >= 3) on one line:

- a repeat whose body can match the same text in more than one way per iteration: an inner
  quantifier that can also match what comes after it in the iteration, or the start of the
  next one (`(a+)+`, `(a*)*`, `(\\w+\\s?)+`, `(x+x+)+`, `(.*a){20}`, `(.*?,){11}`);
- an alternation under a repeat whose alternatives can start the same way (`(a|a)*`,
  `(a|b|ab)*`; `(a|ab)*` is fine: the parser makes it `a(?:|b)`);
- a backreference inside a repeat.

The line fed to a user pattern is capped as well (text.USER_LINE_MAX): polynomial shapes that
pass here (`.*foo.*bar`) stay bounded. The analysis over-approximates each piece by the set of
characters it can start with, over a sample of ASCII and a few non-ASCII characters.
"""
from __future__ import annotations

import re
from typing import Any, List, Optional, Tuple

try:  # Python >= 3.11 keeps the parser here; sre_parse warns on import there
    from re import _parser as P  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.8-3.10
    import sre_parse as P  # type: ignore[no-redef]

BIG_REPEAT = 3     # {3,} and more: (.*a){3} is already O(n^4) on one line

_SAMPLE = [chr(i) for i in range(128)] + ["\u00e9", "\u00df", "\u4e2d", "\u00a0", "\u0663",
                                          "\u2028", "\u2588", "\U0001f600"]
_ALL = (1 << len(_SAMPLE)) - 1


def _mask(pred: Any) -> int:
    return sum(1 << i for i, c in enumerate(_SAMPLE) if pred(c))


_CATEGORY = {
    "CATEGORY_DIGIT": _mask(lambda c: c.isdecimal()),
    "CATEGORY_SPACE": _mask(lambda c: c.isspace()),
    "CATEGORY_WORD": _mask(lambda c: c.isalnum() or c == "_"),
    "CATEGORY_LINEBREAK": _mask(lambda c: c == "\n"),
}
_REPEATS = tuple(getattr(P, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(P, n))
_ATOMIC = getattr(P, "ATOMIC_GROUP", None)
_POSSESSIVE = getattr(P, "POSSESSIVE_REPEAT", None)


class Unsafe(Exception):
    def __init__(self, why: str, where: str, safer: str):
        super().__init__(why)
        self.why, self.where, self.safer = why, where, safer


def unsafe_reason(pattern: str) -> Optional[str]:
    """Why `pattern` can freeze the loop (a sentence with a safer form), or None. A pattern
    that does not compile is not this function's business: None."""
    try:
        parsed = P.parse(pattern, 0)
    except Exception:  # noqa: BLE001 - re.error and friends: the caller reports them
        return None
    try:
        _walk(list(parsed), parsed.state.flags)
    except Unsafe as u:
        return ("can take exponential time on one log line (it would freeze the agent): in "
                "`%s` %s; safer: %s" % (u.where, u.why, u.safer))
    except RecursionError:
        return "is nested too deeply to check; simplify it"
    return None


# -- walking the parsed pattern
def _walk(seq: List[Any], flags: int) -> None:
    for op, av in seq:
        if op in _REPEATS:
            lo, hi, body = av
            if op is not _POSSESSIVE and (hi == P.MAXREPEAT or hi >= BIG_REPEAT) and hi > 0:
                _check_iteration(list(body), flags, (op, av))
            _walk(list(body), flags)
        elif op is P.SUBPATTERN:
            _walk(list(av[-1]), _sub_flags(flags, av))
        elif op is P.BRANCH:
            for alt in av[1]:
                _walk(list(alt), flags)
        elif op in (P.ASSERT, P.ASSERT_NOT) or op is _ATOMIC:
            _walk(list(av[-1] if op is not _ATOMIC else av), flags)
        elif op is P.GROUPREF_EXISTS:
            for part in av[1:]:
                if part is not None:
                    _walk(list(part), flags)


def _sub_flags(flags: int, av: Any) -> int:
    if len(av) == 4:                       # (group, add_flags, del_flags, pattern)
        return (flags | av[1]) & ~av[2]
    return flags


def _check_iteration(body: List[Any], flags: int, outer: Tuple[Any, Any]) -> None:
    """Raise Unsafe when one iteration of `outer` can match a text in two ways."""
    first, _ = _first(body, flags)
    _seq_follow(body, flags, first, outer)


def _seq_follow(seq: List[Any], flags: int, follow: int, outer: Tuple[Any, Any]) -> None:
    """Check each piece of `seq` against what can come right after it (`follow` after the
    last one), right to left."""
    for op, av in reversed(seq):
        _piece(op, av, flags, follow, outer)
        f, nullable = _first([(op, av)], flags)
        follow = f | (follow if nullable else 0)


def _piece(op: Any, av: Any, flags: int, follow: int, outer: Tuple[Any, Any]) -> None:
    if op is P.GROUPREF:
        raise Unsafe("a backreference is repeated", _render([outer]),
                     "match the text once, outside the repeat, or without \\%s" % av)
    if op in _REPEATS and op is not _POSSESSIVE:
        lo, hi, body = av
        inner_first, _ = _first(list(body), flags)
        if hi > lo and hi >= 2 and inner_first & follow:
            raise Unsafe("the inner `%s` can also match what follows it, so a text splits "
                         "between the iterations in many ways" % _render([(op, av)]),
                         _render([outer]), _safer(outer))
        _seq_follow(list(body), flags, inner_first | follow, outer)
    elif op is P.SUBPATTERN:
        _seq_follow(list(av[-1]), _sub_flags(flags, av), follow, outer)
    elif op is P.BRANCH:
        alts = [_first(list(a), flags) for a in av[1]]
        for i in range(len(alts)):
            for j in range(i + 1, len(alts)):
                if alts[i][0] & alts[j][0] or (alts[i][1] and alts[j][1]):
                    raise Unsafe("two alternatives can match the same text",
                                 _render([outer]), "alternatives that start differently: "
                                 "`(ab|ac)*` -> `(a[bc])*`, `(a|a)*` -> `a*`")
        for a in av[1]:
            _seq_follow(list(a), flags, follow, outer)
    elif op is P.GROUPREF_EXISTS:
        for part in av[1:]:
            if part is not None:
                _seq_follow(list(part), flags, follow, outer)


def _safer(outer: Tuple[Any, Any]) -> str:
    lo, hi, body = outer[1]
    if hi != P.MAXREPEAT:
        return "`(.*a){20}` -> `(?:[^a]*a){20}` (a class that cannot match what follows)"
    return "`(a+)+` -> `a+`, `(\\w+\\s?)+` -> `[\\w\\s]+`, `(\\d+\\.?\\d*)+` -> `[\\d.]+`"


# -- what a piece can start with: (set of characters, can it match the empty string)
def _first(seq: List[Any], flags: int) -> Tuple[int, bool]:
    mask = 0
    for op, av in seq:
        f, nullable = _first_one(op, av, flags)
        mask |= f
        if not nullable:
            return mask, False
    return mask, True


def _first_one(op: Any, av: Any, flags: int) -> Tuple[int, bool]:
    if op in (P.LITERAL, P.NOT_LITERAL, P.ANY, P.IN):
        return _chars(op, av, flags), False
    if op in (P.AT, P.ASSERT, P.ASSERT_NOT):
        return 0, True
    if op in _REPEATS:
        f, nullable = _first(list(av[2]), flags)
        return f, nullable or av[0] == 0
    if op is P.SUBPATTERN:
        return _first(list(av[-1]), _sub_flags(flags, av))
    if op is _ATOMIC:
        return _first(list(av), flags)
    if op is P.BRANCH:
        parts = [_first(list(a), flags) for a in av[1]]
        return _union(parts)
    if op is P.GROUPREF_EXISTS:
        return _union([_first(list(p), flags) if p is not None else (0, True) for p in av[1:]])
    return _ALL, True                     # a backreference, anything unknown: anything


def _union(parts: List[Tuple[int, bool]]) -> Tuple[int, bool]:
    mask, nullable = 0, False
    for f, n in parts:
        mask, nullable = mask | f, nullable or n
    return mask, nullable


def _chars(op: Any, av: Any, flags: int) -> int:
    if op is P.ANY:
        return _ALL
    if op in (P.LITERAL, P.NOT_LITERAL):
        m = _literal(av, flags)
        return m if op is P.LITERAL else _ALL & ~m
    m, negate = 0, False
    for iop, iav in av:
        if iop is P.NEGATE:
            negate = True
        elif iop is P.LITERAL:
            m |= _literal(iav, flags)
        elif iop is P.RANGE:
            m |= _mask(lambda c, r=iav: r[0] <= ord(c) <= r[1])
        elif iop is P.CATEGORY:
            m |= _category(str(iav))
        else:
            m |= _ALL                      # anything else: assume it overlaps
    return _ALL & ~m if negate else m


def _literal(code: int, flags: int) -> int:
    c = chr(code)
    chars = {c, c.lower(), c.upper()} if flags & re.IGNORECASE else {c}
    m = sum(1 << _SAMPLE.index(x) for x in chars if x in _SAMPLE)
    return m or (1 << (len(_SAMPLE) - 1))  # outside the sample: stands for "other characters"


def _category(name: str) -> int:
    base = name.replace("CATEGORY_NOT_", "CATEGORY_").replace("UNI_", "").replace("LOC_", "")
    m = _CATEGORY.get(base, _ALL)
    return _ALL & ~m if "_NOT_" in name else m


# -- showing the offending piece
def _render(seq: List[Any]) -> str:
    if len(seq) == 1 and seq[0][0] is P.BRANCH:          # a group's whole body: no extra (?:)
        out = "|".join(_render(list(a)) for a in seq[0][1][1])
    else:
        out = "".join(_render_one(op, av) for op, av in seq)
    return out if len(out) <= 60 else out[:57] + "..."


def _render_one(op: Any, av: Any) -> str:
    if op is P.LITERAL:
        return re.escape(chr(av))
    if op is P.ANY:
        return "."
    if op is P.IN:
        return "[...]" if len(av) != 1 or av[0][0] is not P.CATEGORY else _render_category(str(av[0][1]))
    if op in _REPEATS:
        lo, hi, body = av
        items = list(body)
        inner = _render(items)
        if len(items) > 1 or (items and items[0][0] is P.BRANCH):
            inner = "(?:%s)" % inner
        q = {(0, P.MAXREPEAT): "*", (1, P.MAXREPEAT): "+", (0, 1): "?"}.get((lo, hi))
        if q is None:
            q = "{%d}" % lo if lo == hi else "{%d,%s}" % (lo, "" if hi == P.MAXREPEAT else hi)
        return inner + q + ("?" if op is P.MIN_REPEAT else "")
    if op is P.SUBPATTERN:
        return "(%s)" % _render(list(av[-1]))
    if op is P.BRANCH:
        return "(?:%s)" % "|".join(_render(list(a)) for a in av[1])
    if op is P.GROUPREF:
        return "\\%d" % av
    return "..."


def _render_category(name: str) -> str:
    for key, text in (("DIGIT", "\\d"), ("SPACE", "\\s"), ("WORD", "\\w")):
        if key in name:
            return text.upper() if "_NOT_" in name else text
    return "[...]"
