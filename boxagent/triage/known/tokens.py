"""The words of a log that carry across boxes: what retrieval compares.

Two logs of the same failure differ in everything a machine writes into them: paths, numbers,
addresses, timestamps, pids, the rank prefix of each line, a user's file names. So a token is
a run of letters (camelCase and snake_case split into words, lower-cased: `OutOfMemoryError`,
`out of memory` and `OUT_OF_MEMORY` share `out`, `memory`), and these never make one:
  - numbers and digits inside words (`sm_90a` gives `sm`), hex (`0x7f3a`, `7fa3bc00`),
  - paths and URLs (`/home/alice/envs/py38/lib/...`, `C:\\Users\\...`, `https://...`),
  - rank and worker prefixes (`[rank3]:`, `[default0]:`),
  - English function words and one-letter fragments.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Dict, Tuple

# One pass over the text removes what a box writes and a person does not: paths (two or more
# components) and rank prefixes; both start with a rare character, so the pass is cheap. A
# token starts with a letter, so numbers and timestamps never make one; the digits inside a
# word and hex are dropped per distinct token (a log repeats its words: there are few).
_NOISE = re.compile(r"[\\/][\w.@+~=%-]+(?:[\\/][\w.@+~=%-]+)+|"
                    r"\[\s*(?:rank|default|worker|node)\s*[0-9]+\s*\]:?")
_RAW = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_DIGITS = re.compile(r"[0-9]+")
_HEX = re.compile(r"[xX]?[0-9a-fA-F]+")
STOP = frozenset("""a an and are as at be been but by can could did do does for from had has
have if in into is it its may might of on or our so such than that the their then there
these this those to was we were what when where which while will with would you your""".split())
MAX_TEXT = 1 << 20                   # a query reads at most the last 1 MB
_SEEN: Dict[str, Tuple[str, ...]] = {}
_SEEN_MAX = 50000


def words(raw: str) -> Tuple[str, ...]:
    """The tokens of one letters-first run (`OutOfMemoryError` -> out, memory, error)."""
    got = _SEEN.get(raw)
    if got is not None:
        return got
    w = raw
    if not raw.isalpha():
        w = "" if _HEX.fullmatch(raw) else _DIGITS.sub(" ", raw)
    out = tuple(t for t in (x.lower() for x in _WORD.findall(w)) if len(t) > 1 and t not in STOP)
    if len(_SEEN) < _SEEN_MAX:
        _SEEN[raw] = out
    return out


def counts(text: str) -> Dict[str, int]:
    """{token: how often} for a log's text."""
    if len(text) > MAX_TEXT:
        text = text[-MAX_TEXT:]
    out: Dict[str, int] = {}
    for raw, n in Counter(_RAW.findall(_NOISE.sub(" ", text))).items():
        for w in words(raw):
            out[w] = out.get(w, 0) + n
    return out
