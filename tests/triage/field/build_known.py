"""Build the index of known failures the agent ships (boxagent/triage/known/index.json.z).

    python -m tests.triage.field.build_known           write it
    python -m tests.triage.field.build_known --check   exit 1 when the committed one is stale

Its documents: every [[case]] of every index under tests/triage/field/ (index.toml, the
captured ones, and any later wave's *.toml: a .toml with [[case]] tables is an index), and
every vocabulary row's example. Each keeps its class, source, url, why and fix, and the tokens
of its text (boxagent/triage/known/tokens.py): for a case, the last 64 KB of its log (the
failure tail; the corpus's pastes are shorter). The bytes are reproducible (sorted JSON,
zlib level 9), so --check compares them; rerun this after adding cases or vocabulary rows.
"""
from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

try:
    import tomllib
except ImportError:  # Python 3.10: the dev extra installs tomli
    import tomli as tomllib  # type: ignore[no-redef]

from boxagent.triage import vocab
from boxagent.triage.known import index as K
from boxagent.triage.known.tokens import counts

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
OUT = REPO / "boxagent" / "triage" / "known" / K.DATA
TAIL = 64 << 10
WHY = 160


def case_indexes() -> List[Path]:
    """Every .toml under the field corpus that holds [[case]] tables, in a stable order."""
    out = []
    for p in sorted(HERE.rglob("*.toml")):
        with open(p, "rb") as fh:
            if isinstance(tomllib.load(fh).get("case"), list):
                out.append(p)
    return out


def _tail(path: Path) -> str:
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        fh.seek(max(0, fh.tell() - TAIL))
        return fh.read().decode("utf-8", "replace")


def case_docs() -> List[Dict[str, Any]]:
    docs = []
    for index in case_indexes():
        with open(index, "rb") as fh:
            cases = tomllib.load(fh)["case"]
        for c in cases:
            log = (index.parent / str(c["file"])).resolve()
            docs.append(_doc(str(log.relative_to(HERE)), str(c["class"]), str(c.get("source") or ""),
                             c.get("url"), str(c.get("why") or ""), None, (), _tail(log)))
    return docs


def vocab_docs() -> List[Dict[str, Any]]:
    docs = []
    for name, mod in vocab.TABLES:
        for i, row in enumerate(mod.ROWS):
            docs.append(_doc("vocab/%s/%d" % (name, i), row.cls, row.source, None,
                             "its words for it: %s" % row.example, row.fix, row.found_via, row.example))
    return docs


def _doc(key: str, cls: str, source: str, url: Any, why: str, fix: Optional[str],
         found_via: Sequence[str], text: str) -> Dict[str, Any]:
    d: Dict[str, Any] = {"k": key, "c": cls, "s": source, "w": _clip(why),
                         "t": K.encode_terms(counts(text))}
    if isinstance(url, str) and url:
        d["u"] = url
    if fix:
        d["f"] = fix
    if found_via:
        d["v"] = sorted(found_via)
    return d


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= WHY else text[:WHY - 1].rstrip() + "\u2026"


def build() -> bytes:
    docs = case_docs() + vocab_docs()
    data = json.dumps({"format": K.FORMAT, "docs": docs}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return zlib.compress(data.encode("utf-8"), 9)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    data = build()
    if args == ["--check"]:
        same = OUT.is_file() and OUT.read_bytes() == data
        if not same:
            sys.stderr.write("Error: %s is stale against the field corpus and the vocabulary\n"
                             "Hint: python -m tests.triage.field.build_known\n" % OUT.relative_to(REPO))
        return 0 if same else 1
    if args:
        sys.stderr.write("Error: unknown arguments: %s\nHint: python -m tests.triage.field.build_known "
                         "[--check]\n" % " ".join(args))
        return 2
    OUT.write_bytes(data)
    sys.stdout.write("%s: %d bytes, %d documents\n" % (OUT.relative_to(REPO), len(data),
                                                      len(json.loads(zlib.decompress(data))["docs"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
