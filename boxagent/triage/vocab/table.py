"""One row of a vocabulary: a library's own words for a failure, the class they mean, and
where they were read.

A row's pattern is a literal (the default: escaped for both Python `re` and `grep -E`) or a
regex in the subset both read the same way ([0-9], plain groups, no lookaround, no flags; see
builtin_rules). `example` is the message as the source prints it (a test matches every row
against its own example); `source` names the document, header or code and its version.
`fix` is a remediation of the row's own where the class's would mislead.
`definitive` is False where the words are suggestive only (the same words have another
common cause): the decision may then want a box fact before it trusts them.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

# ERE and Python re both read a backslash before these as the character itself; escaping
# nothing else keeps grep from warning about a "stray \" (GNU grep >= 3.8).
_SPECIAL = frozenset("\\.^$|?*+()[]{}")


class Row(NamedTuple):
    cls: str
    pattern: str
    example: str
    source: str
    emitter: Optional[str]
    definitive: bool
    literal: bool
    severity: str
    keywords: Optional[Tuple[str, ...]]
    fix: Optional[str] = None       # a remediation of its own (else the class's)
    found_via: Tuple[str, ...] = ()  # field cases whose miss led to the source (see vocab.rows)


def escape(text: str) -> str:
    """`text` as a pattern that matches it literally in Python re and in grep -E."""
    return "".join("\\" + c if c in _SPECIAL else c for c in text)


def lit(cls: str, text: str, example: str, source: str, emitter: Optional[str] = None,
        definitive: bool = True, severity: str = "critical") -> Row:
    """A row matching `text` verbatim."""
    return Row(cls, escape(text), example, source, emitter, definitive, True, severity, (text,))


def rx(cls: str, pattern: str, example: str, source: str, keywords: Tuple[str, ...],
       emitter: Optional[str] = None, definitive: bool = True, severity: str = "critical") -> Row:
    """A row matching a regex; `keywords`: literals one of which every match holds."""
    return Row(cls, pattern, example, source, emitter, definitive, False, severity,
               tuple(keywords))


def found_via(cases: Tuple[str, ...], *rows: Row) -> Tuple[Row, ...]:
    """`rows` marked with the field cases (paths under tests/triage/field/) whose miss led
    to their source: leave-one-ecosystem-out scores an ecosystem without the rows that only
    its own cases led to."""
    return tuple(r._replace(found_via=tuple(cases)) for r in rows)
