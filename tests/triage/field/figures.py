"""The field corpus's headline figures, from score.score()'s per-case results: accuracy per
ecosystem and per source repository, leave-one-ecosystem-out and leave-one-source-out,
per-class precision and recall, the confidently-wrong rate and innocent runs called failed.

Held out, here, means "never seen by whoever wrote the rules": the rules are fixed code, not
a model refitted per fold, so a fold's "trained without it" score is its score on the cases
added after the rules were frozen (index key added = "wave3"; see index.toml). Per ecosystem
and per source the wave-3 cases are reported apart from the ones the rules were developed
against (added = "wave1-2"), so a rule fitted to one case cannot lift the held-out figure.

    leave-one-ecosystem-out   accuracy on the wave-3 cases of each ecosystem; the headline is
                              the mean over ecosystems (each counts once, however many cases)
                              and, beside it, the pooled accuracy of all wave-3 cases
    leave-one-source-out      the same over wave-3 cases whose source repository has no case
                              the rules were developed against (an unseen project's wording)
    confidently wrong         failure cases whose cause says confidence "high" (a cause without
                              the field counts as high) and whose class is wrong, over all
                              failure cases (innocent runs and warning cases excluded)
    nonzero_exit, no runner-up  failure cases answered `nonzero_exit` with no runner-up, over
                              all failure cases: the answer that tells a person nothing
    decided by retrieval      failure cases whose class the known failures gave (no rule named
                              one), and how many of those are right; retrieval is scored
                              leave-one-source-out (score.triage_case)
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional

HELD_OUT = "wave3"
DEVELOPED = "wave1-2"
# Cases collected after the rules they are scored by were written: wave3's, and wave4's to
# wave6's sets from ecosystems the corpus barely had (scored blind first; rows their sources gave came after,
# and the mechanical leave-one-ecosystem-out switches those rows off in their own fold).
BLIND_WAVES = ("wave3", "wave4", "wave5", "wave6")
HIGH = "high"


def ecosystem_of(case: Dict[str, Any]) -> str:
    """The case's ecosystem; the captured torch runs predate the key and are all torch."""
    return str(case.get("ecosystem") or "pytorch")


def added_of(case: Dict[str, Any]) -> str:
    """Held out only when the index says so (wave3 to wave6): an unmarked case was in the corpus
    all along."""
    return HELD_OUT if case.get("added") in BLIND_WAVES else DEVELOPED


def repository_of(case: Dict[str, Any]) -> str:
    """owner/repo of a tracker source ("owner/repo#N"); a captured run names its library."""
    source = str(case.get("source", ""))
    return source.partition("#")[0] if "#" in source else source.partition(",")[0]


def is_failure_case(case: Dict[str, Any]) -> bool:
    """A case whose right answer is a failure cause (not an innocent run, not a warning)."""
    return case.get("class") != "none" and case.get("outcome") != "warning"


def confidently_wrong(result: Dict[str, Any]) -> bool:
    return (is_failure_case(result) and not result["right"] and result.get("got") != "none"
            and result.get("confidence", HIGH) == HIGH)


def bare_nonzero_exit(result: Dict[str, Any]) -> bool:
    """A failure answered `nonzero_exit` with no runner-up: the answer that tells a person
    nothing."""
    return result.get("got") == "nonzero_exit" and not result.get("runner_up")


def _share(hit: List[Dict[str, Any]], of: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {"cases": len(hit), "failure_cases": len(of), "rate": len(hit) / len(of) if of else None,
            "files": [r["file"] for r in hit]}


def _tally(results: Iterable[Dict[str, Any]]) -> Dict[str, Any]:
    rs = list(results)
    right = sum(int(r["right"]) for r in rs)
    return {"cases": len(rs), "right": right, "accuracy": right / len(rs) if rs else None}


def by_group(results: List[Dict[str, Any]], key) -> Dict[str, Dict[str, Any]]:
    """{group: {all, wave3, wave1-2}} each a tally (cases, right, accuracy or None)."""
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    return {g: {"all": _tally(rs), HELD_OUT: _tally(r for r in rs if added_of(r) == HELD_OUT),
                DEVELOPED: _tally(r for r in rs if added_of(r) == DEVELOPED)}
            for g, rs in sorted(groups.items())}


def _mean(values: List[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def leave_one_out(groups: Dict[str, Dict[str, Any]], only: Optional[set] = None) -> Dict[str, Any]:
    """Mean held-out accuracy over the groups that have held-out cases, and the pooled one."""
    held = {g: t[HELD_OUT] for g, t in groups.items()
            if t[HELD_OUT]["cases"] and (only is None or g in only)}
    cases = sum(t["cases"] for t in held.values())
    right = sum(t["right"] for t in held.values())
    return {"groups": len(held), "cases": cases, "right": right,
            "mean_accuracy": _mean([t["accuracy"] for t in held.values()]),
            "pooled_accuracy": right / cases if cases else None,
            "worst": sorted((t["accuracy"], g) for g, t in held.items())[:3]}


def unseen_sources(results: List[Dict[str, Any]]) -> set:
    """Repositories none of whose cases the rules were developed against."""
    seen = set(repository_of(r) for r in results if added_of(r) == DEVELOPED)
    return set(repository_of(r) for r in results) - seen


def precision_recall(results: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Per class (innocent runs as class "none"): precision = right calls of the class over all
    calls of it, recall = right calls over the cases that are of it. Warning cases are left
    out: their right answer is "no failure, and a warning", not a class."""
    rs = [r for r in results if r.get("outcome") != "warning"]
    classes = sorted(set(r["class"] for r in rs) | set(r["got"] for r in rs))
    out = {}
    for c in classes:
        called = [r for r in rs if r["got"] == c]
        actual = [r for r in rs if r["class"] == c]
        tp = sum(1 for r in actual if r["got"] == c)
        out[c] = {"cases": len(actual), "called": len(called), "right": tp,
                  "precision": tp / len(called) if called else None,
                  "recall": tp / len(actual) if actual else None}
    return out


def figures(results: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Every headline figure, JSON-ready."""
    eco = by_group(results, ecosystem_of)
    src = by_group(results, repository_of)
    failures = [r for r in results if is_failure_case(r)]
    wrong_high = [r for r in failures if confidently_wrong(r)]
    innocent = [r for r in results if r["class"] == "none"]
    return {
        "total": _tally(results),
        "by_added": {a: _tally(r for r in results if added_of(r) == a) for a in (DEVELOPED, HELD_OUT)},
        "leave_one_ecosystem_out": leave_one_out(eco),
        "leave_one_source_out": leave_one_out(src, unseen_sources(results)),
        "confidently_wrong": {"cases": len(wrong_high), "failure_cases": len(failures),
                              "rate": len(wrong_high) / len(failures) if failures else None,
                              "files": [r["file"] for r in wrong_high]},
        "innocent_called_failed": {"cases": sum(1 for r in innocent if not r["right"]),
                                   "innocent_cases": len(innocent)},
        "bare_nonzero_exit": _share([r for r in failures if bare_nonzero_exit(r)], failures),
        "decided_by_retrieval": {"cases": sum(1 for r in failures if r.get("by_retrieval")),
                                 "right": sum(1 for r in failures if r.get("by_retrieval") and r["right"])},
        "by_ecosystem": eco,
        "by_source": src,
        "by_class": precision_recall(results),
    }


def _pct(x: Optional[float]) -> str:
    return "   -" if x is None else "%3.0f%%" % (100 * x)


def _row(name: str, t: Dict[str, Any]) -> str:
    cells = []
    for k in ("all", HELD_OUT, DEVELOPED):
        cells.append("%4d %4d %s" % (t[k]["cases"], t[k]["right"], _pct(t[k]["accuracy"])))
    return "%-28s %s" % (name[:28], "   ".join(cells))


def render_groups(title: str, groups: Dict[str, Dict[str, Any]]) -> List[str]:
    out = ["%s (cases right accuracy: all | wave3, held out | wave1-2, developed against)" % title,
           "%-28s %s" % ("", "   ".join(["  all          ", "  wave3        ", "  wave1-2"]))]
    out += [_row(g, t) for g, t in groups.items()]
    return out + [""]


def render_classes(pr: Dict[str, Dict[str, Any]]) -> List[str]:
    out = ["per class (none = innocent runs)", "%-22s %6s %6s %6s %9s %7s" % (
        "class", "cases", "called", "right", "precision", "recall")]
    for c, t in pr.items():
        out.append("%-22s %6d %6d %6d %9s %7s" % (c, t["cases"], t["called"], t["right"],
                                                 _pct(t["precision"]), _pct(t["recall"])))
    return out + [""]


def render_headline(f: Dict[str, Any]) -> List[str]:
    loeo, loso, cw = f["leave_one_ecosystem_out"], f["leave_one_source_out"], f["confidently_wrong"]
    ba = f["by_added"]
    return [
        "headline",
        "  all cases                  %4d  %s" % (f["total"]["cases"], _pct(f["total"]["accuracy"])),
        "  developed against (wave1-2) %3d  %s" % (ba[DEVELOPED]["cases"], _pct(ba[DEVELOPED]["accuracy"])),
        "  held out (wave3..wave6)    %4d  %s" % (ba[HELD_OUT]["cases"], _pct(ba[HELD_OUT]["accuracy"])),
        "  leave-one-ecosystem-out    mean %s over %d ecosystems, pooled %s (%d cases)" % (
            _pct(loeo["mean_accuracy"]), loeo["groups"], _pct(loeo["pooled_accuracy"]), loeo["cases"]),
        "  leave-one-source-out       mean %s over %d unseen repositories, pooled %s (%d cases)" % (
            _pct(loso["mean_accuracy"]), loso["groups"], _pct(loso["pooled_accuracy"]), loso["cases"]),
        "  confidently wrong          %d of %d failure cases (%s)" % (
            cw["cases"], cw["failure_cases"], _pct(cw["rate"])),
        "  innocent runs called failed %d of %d" % (
            f["innocent_called_failed"]["cases"], f["innocent_called_failed"]["innocent_cases"]),
        "  nonzero_exit, no runner-up %d of %d failure cases (%s)" % (
            f["bare_nonzero_exit"]["cases"], f["bare_nonzero_exit"]["failure_cases"],
            _pct(f["bare_nonzero_exit"]["rate"])),
        "  decided by retrieval       %d failure cases, %d right (known failures, leave-one-source-out)" % (
            f["decided_by_retrieval"]["cases"], f["decided_by_retrieval"]["right"]),
        ""]


SECTIONS = ("ecosystem", "source", "class", "all")


def render(f: Dict[str, Any], by: str) -> str:
    out = render_headline(f)
    if by in ("ecosystem", "all"):
        out += render_groups("per ecosystem", f["by_ecosystem"])
    if by in ("source", "all"):
        out += render_groups("per source repository", f["by_source"])
    if by in ("class", "all"):
        out += render_classes(f["by_class"])
    return "\n".join(out) + "\n"
