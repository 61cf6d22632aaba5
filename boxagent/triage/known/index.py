"""The index of known failures, and the search over it: BM25 over tokens.py's words.

The index is built from the field corpus (every case: a log people pasted into a public
tracker, or a real library's run captured here, with its class, source thread, why and fix)
and from every vocabulary row's example, by `python -m tests.triage.field.build_known`, and
ships as package data (index.json.z: zlib'd JSON). It is read on the first search of a process
and never before: a cause a rule is certain of never loads it.

Each document is the distinct tokens of a case's log (or a row's example) with their counts.
nearest(text) ranks documents by BM25 against the distinct tokens of `text`, and gives each
its similarity: its BM25 score over its score against itself, i.e. the weighted share of the
known case's words the log holds (1.0: all of them).

excluding(sources, cases) hides documents from the search (leave-one-source-out: a scored case never
finds itself, its own thread, or a vocabulary row found through its thread); the environment
variable HOLD_OUT_ENV (the vocabulary's: field cases held out for a leave-one-ecosystem-out
fold) hides those cases and the rows found through them for the whole process.
"""
from __future__ import annotations

import heapq
import json
import math
import pkgutil
import zlib
from contextlib import contextmanager
from typing import Any, Dict, FrozenSet, Iterable, Iterator, List, Optional, Set, Tuple

from boxagent.triage.known.tokens import counts

DATA = "index.json.z"
FORMAT = 1
K1, B = 1.2, 0.75


class Doc(object):
    __slots__ = ("key", "cls", "source", "url", "why", "fix", "found_via", "terms", "norm")

    def __init__(self, raw: Dict[str, Any]) -> None:
        self.key, self.cls = str(raw["k"]), str(raw["c"])
        self.source, self.url = str(raw.get("s") or ""), raw.get("u")
        self.why, self.fix = str(raw.get("w") or ""), raw.get("f")
        self.found_via = tuple(raw.get("v") or ())
        self.terms = decode_terms(str(raw.get("t") or ""))
        self.norm = 0.0


class Index(object):
    """Documents and their postings: term -> [(doc number, count)]."""

    def __init__(self, docs: List[Doc]) -> None:
        self.docs = docs
        self.postings: Dict[str, List[Tuple[int, int]]] = {}
        total = 0
        for i, d in enumerate(docs):
            total += sum(d.terms.values())
            for t, n in d.terms.items():
                self.postings.setdefault(t, []).append((i, n))
        avg = float(total) / len(docs) if docs else 1.0
        for d in docs:
            d.norm = K1 * (1 - B + B * sum(d.terms.values()) / avg)

    def hidden(self, sources: FrozenSet[str], keys: FrozenSet[str]) -> Set[int]:
        """The documents the search leaves out: cases of those sources or keys, and rows found
        through any of them."""
        cases = set(d.key for d in self.docs if d.source in sources or d.key in keys)
        return set(i for i, d in enumerate(self.docs)
                   if d.key in cases or (d.found_via and cases.intersection(d.found_via)))

    def nearest(self, text: str, k: int = 5, hide: Optional[Set[int]] = None) -> List[Tuple[Doc, float]]:
        """The k documents most like `text`, each with its similarity (0..1), best first."""
        hide = hide or set()
        live = len(self.docs) - len(hide)
        idf: Dict[str, float] = {}
        scores: Dict[int, float] = {}
        for t in counts(text):
            plist = self.postings.get(t)
            if not plist:
                continue
            if hide:
                plist = [p for p in plist if p[0] not in hide]
                if not plist:
                    continue
            w = idf[t] = math.log(1.0 + (live - len(plist) + 0.5) / (len(plist) + 0.5))
            for i, n in plist:
                scores[i] = scores.get(i, 0.0) + w * n * (K1 + 1) / (n + self.docs[i].norm)
        out = []
        for i, s in heapq.nlargest(k, scores.items(), key=lambda kv: kv[1]):
            d = self.docs[i]
            whole = sum(self._idf(t, idf, live, hide) * n * (K1 + 1) / (n + d.norm)
                        for t, n in d.terms.items())
            out.append((d, min(1.0, s / whole) if whole > 0 else 0.0))
        return out

    def _idf(self, t: str, idf: Dict[str, float], live: int, hide: Set[int]) -> float:
        if t not in idf:
            df = sum(1 for p in self.postings.get(t, ()) if p[0] not in hide)
            idf[t] = math.log(1.0 + (live - df + 0.5) / (df + 0.5))
        return idf[t]


def encode_terms(terms: Dict[str, int]) -> str:
    """"cuda memory:2 out:2" (a count of 1 unwritten), sorted: the build is reproducible."""
    return " ".join(t if n == 1 else "%s:%d" % (t, n) for t, n in sorted(terms.items()))


def decode_terms(text: str) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for item in text.split():
        t, _, n = item.partition(":")
        out[t] = int(n) if n.isdigit() else 1
    return out


# -- the process's index, read once, and what it hides
_LOADED: List[Index] = []
_EXCLUDED: List[Tuple[FrozenSet[str], FrozenSet[str]]] = []


def read_data() -> Optional[bytes]:
    """The packaged index's bytes (inside the .pyz, a wheel or the source tree), or None."""
    try:
        return pkgutil.get_data("boxagent.triage.known", DATA)
    except OSError:
        return None


def load() -> Optional[Index]:
    """The index (read on first use), or None when the package carries none or it is damaged."""
    if not _LOADED:
        raw = read_data()
        try:
            data = json.loads(zlib.decompress(raw).decode("utf-8")) if raw else None
        except (ValueError, zlib.error):
            data = None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return None
        _LOADED.append(Index([Doc(d) for d in data.get("docs") or [] if isinstance(d, dict)]))
    return _LOADED[0]


@contextmanager
def excluding(sources: Iterable[str] = (), cases: Iterable[str] = ()) -> Iterator[None]:
    """Searches inside the block never find a case of these sources (repo#N threads) or these
    case keys (paths under tests/triage/field/), nor a vocabulary row found through one: the
    scorer's leave-one-source-out, and its leave-one-ecosystem-out folds."""
    _EXCLUDED.append((frozenset(sources), frozenset(cases)))
    try:
        yield
    finally:
        _EXCLUDED.pop()


def search(text: str, k: int = 5) -> List[Tuple[Doc, float]]:
    """nearest() on the packaged index, less what is excluded now and held out (HOLD_OUT_ENV)."""
    idx = load()
    if idx is None:
        return []
    from boxagent.triage.vocab import held_out_cases
    sources = frozenset().union(*(s for s, _ in _EXCLUDED))
    keys = held_out_cases().union(*(c for _, c in _EXCLUDED))
    return idx.nearest(text, k, idx.hidden(sources, keys) if sources or keys else None)
