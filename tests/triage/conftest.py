"""Triage fixtures: the corpus of real-looking log tails, a StageWatch driven over a file,
and (for the end-to-end tests) the shared real-daemon `box` (tests/conftest.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from boxagent.triage import StageWatch

CORPUS = Path(__file__).resolve().parent / "corpus"


def watch_file(path: Path, **kw: Any) -> StageWatch:
    """A StageWatch that has read `path` to its end (as the daemon would, tick by tick)."""
    w = StageWatch(str(path), **kw)
    for i in range(10000):
        before = w.tailer.offset
        w.poll(float(i))
        if w.tailer.offset == before:
            break
    w.finish(10001.0)
    return w


def corpus_facts(name: str, **extra: Any) -> Dict[str, Any]:
    w = watch_file(CORPUS / name)
    facts = w.facts()
    facts.update(extra)
    return facts
