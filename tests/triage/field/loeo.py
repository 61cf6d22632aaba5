"""Leave-one-ecosystem-out, mechanically: each ecosystem's held-out cases are scored by an
engine built without the vocabulary rows that only that ecosystem's cases led to.

A vocabulary row read from a library's source because a field case missed names that case
(Row.found_via). Such a row knows that case's wording at least; scoring the case with it on
measures the fit, not generalisation. So for ecosystem E the rows whose found_via cases all
lie in E are switched off (the vocab loader drops them when HOLD_OUT_ENV names the cases),
while rows found via another ecosystem's case, and rows read from a source without any case,
stay on. The known-failure index the agent ships (boxagent/triage/known/) holds the corpus
itself, so every fold also hides the ecosystem's own cases (and the rows found through them)
from it: otherwise a case would find its ecosystem's siblings and the figure would not be
leave-one-ecosystem-out. The engine's rules are built when boxagent.triage is imported, so a
fold with rows off runs in a fresh interpreter (`score --json --added wave3 --ecosystem E`,
whose HOLD_OUT_ENV the index reads too); a fold with none off is triaged again in-process with
the ecosystem hidden from the index.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from boxagent.triage import vocab
from boxagent.triage.known import index as known
from tests.triage.field import figures as F

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


def case_key(result: Dict[str, Any]) -> str:
    """The case's path as found_via names it: relative to tests/triage/field/."""
    try:
        return str(Path(result["path"]).relative_to(HERE))
    except ValueError:
        return str(result["path"])


def rows_off_for(cases: Iterable[str]) -> List[vocab.Row]:
    """The rows an engine leaves out while `cases` are held out."""
    held = frozenset(cases)
    return [r for _, mod in vocab.TABLES for r in mod.ROWS if vocab.is_held_out(r, held)]


def score_fold(ecosystem: str, cases: Iterable[str], indexes: Optional[List[Path]] = None) -> Dict[str, Any]:
    """{cases, right} of the ecosystem's held-out cases with `cases` held out, in a fresh
    interpreter (the rule set is built at import)."""
    env = dict(os.environ, **{vocab.HOLD_OUT_ENV: ",".join(sorted(cases))})
    argv = [sys.executable, "-m", "tests.triage.field.score", "--json", "--added", F.HELD_OUT,
            "--ecosystem", ecosystem] + [str(p) for p in indexes or []]
    proc = subprocess.run(argv, cwd=str(REPO), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, check=False)
    if proc.returncode not in (0, 1):
        raise RuntimeError("fold %s failed: %s" % (ecosystem, proc.stderr[-2000:]))
    out = json.loads(proc.stdout)
    return {"cases": out["total"]["cases"], "right": out["total"]["right"],
            "misses": [miss_of(ecosystem, m) for m in out["misses"]]}


def rescore_without(held: List[Dict[str, Any]], cases: List[str]) -> Dict[str, Any]:
    """{cases, right} of `held` triaged again with `cases` (the fold's whole ecosystem) hidden
    from the known-failure index: the engine's rules are the same, so in-process."""
    from tests.triage.field import score as S
    with known.excluding(cases=cases):
        verdicts = [dict(r, **S.judge(r, S.triage_case(r))) for r in held]
    misses = [miss_of(F.ecosystem_of(v), dict(v, file=case_key(v), expected=v["class"]))
              for v in verdicts if not v["right"]]
    return {"cases": len(held), "right": len(held) - len(misses), "misses": misses}


def miss_of(fold: str, m: Dict[str, Any]) -> Dict[str, Any]:
    """One LOEO miss as --loeo-misses lists it: the fold, the case, what a person said, what
    the fold's engine said, how sure it was, its runner-up and the line that decided."""
    return {"fold": fold, "file": m["file"], "expected": m["expected"], "got": m["got"],
            "confidence": m.get("confidence", ""), "runner_up": m.get("runner_up", ""),
            "evidence": m.get("evidence", "")}


def mechanical(results: List[Dict[str, Any]], indexes: Optional[List[Path]] = None) -> Dict[str, Any]:
    """The leave-one-ecosystem-out figure with each fold's own rows off, beside the per-fold
    detail: {groups, cases, right, mean_accuracy, pooled_accuracy, folds: {eco: {cases,
    right, rows_off, misses}}} (misses: miss_of's, one per case the fold got wrong)."""
    from tests.triage.field import score as S
    folds: Dict[str, Dict[str, Any]] = {}
    # every case of the corpus, scored here or not: a fold hides ALL of its ecosystem's cases
    # (another set's too) from the index and switches off the rows any of them led to
    scored = set(r["path"] for r in results)
    pool = list(results) + [c for c in S.load_cases() if c["path"] not in scored]
    for eco in sorted(set(F.ecosystem_of(r) for r in results)):
        mine = [r for r in results if F.ecosystem_of(r) == eco]
        held = [r for r in mine if F.added_of(r) == F.HELD_OUT]
        if not held:
            continue
        hidden = [case_key(r) for r in pool if F.ecosystem_of(r) == eco]
        off = rows_off_for(hidden)
        tally = (score_fold(eco, hidden, indexes) if off else rescore_without(held, hidden))
        folds[eco] = dict(tally, rows_off=len(off))
    cases = sum(f["cases"] for f in folds.values())
    right = sum(f["right"] for f in folds.values())
    accs = [f["right"] / f["cases"] for f in folds.values() if f["cases"]]
    return {"groups": len(folds), "cases": cases, "right": right,
            "mean_accuracy": sum(accs) / len(accs) if accs else None,
            "pooled_accuracy": right / cases if cases else None, "folds": folds}


def misses(m: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every fold's misses, fold by fold."""
    return [x for f in m["folds"].values() for x in f.get("misses", [])]


def render_misses(m: Dict[str, Any]) -> str:
    """The LOEO misses, one block each: where the next row or structure change is needed."""
    out = ["mechanical LOEO misses (%d of %d held-out cases):" % (m["cases"] - m["right"], m["cases"])]
    for x in misses(m):
        out.append("  [%s] %s" % (x["fold"], x["file"]))
        out.append("    expected %-20s got %s (%s%s)" % (
            x["expected"], x["got"], x["confidence"] or "no confidence",
            ", runner-up " + x["runner_up"] if x["runner_up"] else ""))
        out.append("    deciding line: %s" % x["evidence"])
    return "\n".join(out) + "\n"


def render(m: Dict[str, Any]) -> str:
    off = ", ".join("%s %d/%d (%d rows off)" % (e, f["right"], f["cases"], f["rows_off"])
                    for e, f in m["folds"].items() if f["rows_off"])
    return ("  mechanical LOEO            mean %s over %d ecosystems, pooled %s (%d cases); "
            "folds with rows off: %s\n" % (F._pct(m["mean_accuracy"]), m["groups"],
                                            F._pct(m["pooled_accuracy"]), m["cases"], off or "none"))
