"""Score the agent's triage against the field corpus: logs that users pasted into public
issue trackers, each with the class a person gave it (index.toml), plus the captured
real-library cases (captured/index.toml: torch; captured_libs/index.toml: h5py, numpy,
requests, pip, bash, C/C++ on a CPU) when those indexes exist.

Every case goes through the agent's own triage, in-process, the way
`rgt-agent triage LOG --exit-code N --json` runs it (boxagent.triage.cli.report), so a
change to the rules or to diagnose() shows here unchanged. One difference on purpose: the
filesystems named in an ENOSPC line are not probed (probe_disks=False, as for a log read
from stdin). These logs were written on someone else's machine; the disks of the machine
that runs the scorer say nothing about them, and a nearly full disk here must not change
the score.

A failure case is right when the cause's class is the expected one. An innocent case
(class "none", exit 0) is right when triage does not call it a failure. A case with
outcome = "warning" (exit 0, and a class: a run that went wrong without failing, such as
nan losses) is right when triage calls no failure and warns.

    python -m tests.triage.field.score [--split dev|holdout] [--by ecosystem|source|class|all]
                                       [--added wave1-2|wave3] [--ecosystem NAME]
                                       [--json | --loeo-misses] [INDEX ...]

prints the per-class table and every miss with the class it got, the class expected and
the deciding evidence line; --split dev / --split holdout scores only the cases developed
against, or only the ones held out (holdout.toml). --by adds the headline figures
(figures.py: leave-one-ecosystem-out, leave-one-source-out, confidently wrong, innocent runs
called failed) and the named breakdown; --json prints every figure and every miss as one JSON
object instead; both add the mechanical leave-one-ecosystem-out (loeo.py: each ecosystem
scored without the vocabulary rows only its own cases led to). --added and --ecosystem score
only the cases of one wave or one ecosystem. --loeo-misses prints only the mechanical
leave-one-ecosystem-out's misses (fold, case, expected, got, confidence, runner-up, deciding
line) and its figure; --json has them per fold under leave_one_ecosystem_out_mechanical. Exit status: 0 when every case is right, 1 otherwise, 2 for a bad argument.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

try:
    import tomllib
except ImportError:  # Python 3.10: the dev extra installs tomli
    import tomli as tomllib  # type: ignore[no-redef]

from boxagent.triage import diagnose, success_warnings
from boxagent.triage.cli import report
from boxagent.triage.known import index as known
from tests.triage.field import figures as F
from tests.triage.field import loeo

HERE = Path(__file__).resolve().parent
INDEX = HERE / "index.toml"
HOLDOUT = HERE / "holdout.toml"
CAPTURED_INDEX = HERE / "captured" / "index.toml"
CAPTURED_LIBS_INDEX = HERE / "captured_libs" / "index.toml"   # capture/capture_libs.py, CPU
INNOCENT = "none"
WARNED = "warning"      # outcome of an exit-0 case whose class triage should warn about

# The cause classes of the design contract (cause.class), as it lists them.
DESIGN_CLASSES = (
    "cgroup_oom", "cuda_oom", "disk_full", "inodes_full", "code_error", "nccl",
    "network_transient", "gpu_hardware", "torch_arch_mismatch", "driver_too_old",
    "truncated_checkpoint", "crlf_script", "divergence", "machine_restart", "preempted",
    "killed", "hangup", "timeout", "expect_missing", "success_pattern_missing", "cancelled",
    "preflight_failed", "node_failure", "nonzero_exit")
CASE_KEYS = ("file", "class", "exit_code", "source", "url", "why")
# The later waves' folders of blind sets, each named as its cases' `added`.
WAVE_SETS = ("wave4", "wave5", "wave6")


def default_indexes() -> List[Path]:
    """The field index, the captured ones when they exist, and the later waves' sets
    (wave4/*.toml, wave5/*.toml: ecosystems the first corpus barely had)."""
    return [p for p in (INDEX, CAPTURED_INDEX, CAPTURED_LIBS_INDEX) if p.is_file()] + \
        [p for wave in WAVE_SETS for p in sorted((HERE / wave).glob("*.toml"))]


def load_cases(index_paths: Optional[Iterable[Path]] = None) -> List[Dict[str, Any]]:
    """Every [[case]] of the given indexes, with `path` (absolute) and `index` added."""
    cases: List[Dict[str, Any]] = []
    for index in (default_indexes() if index_paths is None else index_paths):
        index = Path(index)
        with open(index, "rb") as fh:
            data = tomllib.load(fh)
        for case in data.get("case", []):
            c = dict(case)
            c["index"] = str(index)
            c["path"] = str((index.parent / str(c.get("file", ""))).resolve())
            cases.append(c)
    return cases


def holdout_files() -> List[str]:
    """The cases held out while developing (paths relative to the field index)."""
    with open(HOLDOUT, "rb") as fh:
        return list(tomllib.load(fh).get("holdout", []))


def split_cases(cases: List[Dict[str, Any]], split: Optional[str]) -> List[Dict[str, Any]]:
    """All cases (split None), the held-out field cases ("holdout") or the others ("dev")."""
    if split is None:
        return cases
    held = set(str((HERE / f).resolve()) for f in holdout_files())
    return [c for c in cases if (c["path"] in held) == (split == "holdout")]


def triage_case(case: Dict[str, Any]) -> Dict[str, Any]:
    """The triage report of one case, as `rgt-agent triage LOG --exit-code N --json` has it; a
    captured case that recorded the box's own facts (the cgroup's oom_kill counter, statvfs)
    is judged with them too, as the daemon judges a stage that ends on the box.

    Leave-one-source-out for the known failures the agent ships (boxagent/triage/known/): the
    case is triaged with its own thread hidden from the index (itself, every case of the same
    `source`, and the vocabulary rows found through them), so no case retrieves itself."""
    with known.excluding([str(case.get("source") or "")]):
        return _triage_case(case)


def _triage_case(case: Dict[str, Any]) -> Dict[str, Any]:
    rep = report(case["path"], case["exit_code"], [], "auto", None, probe_disks=False)
    if "oom_kill_delta" not in case and "disk_path" not in case:
        return rep
    facts = box_facts(case, rep)
    if case["exit_code"] == 0:
        return dict(rep, cause=None, warnings=[str(w) for w in success_warnings(facts)])
    return dict(rep, cause=diagnose(facts))


def box_facts(case: Dict[str, Any], rep: Dict[str, Any]) -> Dict[str, Any]:
    """The facts the daemon would hand diagnose(): the log's, plus what the box said."""
    facts = {"exit_code": case["exit_code"], "hits": rep["hits"], "last_lines": rep["last_lines"],
             "progress_line_no": rep["progress_line_no"]}
    if "oom_kill_delta" in case:
        facts["oom_kill_delta"] = case["oom_kill_delta"]
    if "disk_path" in case:
        facts["disks"] = [{"path": case["disk_path"], "bytes_used_pct": case["disk_bytes_used_pct"],
                           "inodes_used_pct": case["disk_inodes_used_pct"]}]
    return facts


def judge(case: Dict[str, Any], rep: Dict[str, Any]) -> Dict[str, Any]:
    """{right, got, evidence, summary, warnings, confidence, runner_up, by_retrieval} for one
    case and its report (by_retrieval: the known failures, not a rule, gave the class)."""
    cause = rep.get("cause")
    warnings = list(rep.get("warnings") or [])
    got = cause["class"] if cause else INNOCENT
    if case.get("outcome") == WARNED:
        right = cause is None and bool(warnings)
    else:
        right = (cause is None) if case["class"] == INNOCENT else (got == case["class"])
    evidence = ((cause.get("evidence") or ["(no evidence)"])[0] if cause else
                "(no failure called; warned: %s)" % warnings[0] if warnings else "(no failure called)")
    return {"right": right, "got": got, "evidence": evidence,
            "summary": cause.get("summary", "") if cause else "", "warnings": warnings,
            # a cause without the field is taken at its word: high (the confidently-wrong
            # figure must not improve because an engine says nothing about its confidence)
            "confidence": str(cause.get("confidence") or "high") if cause else "",
            "runner_up": str(cause.get("runner_up") or "") if cause else "",
            "by_retrieval": bool(cause) and str(cause.get("decided_by") or "").startswith("retrieval")}


def score(index_paths: Optional[Iterable[Path]] = None, split: Optional[str] = None,
          added: Optional[str] = None, ecosystem: Optional[str] = None) -> Dict[str, Any]:
    """Run every case (only those of one `added` wave when given: "wave1-2", the cases the
    rules were developed against, or "wave3", held out); per-class results, the misses, and
    the innocent runs that warned.

    {"classes": {cls: {"cases", "right", "accuracy"}}, "total": {...}, "misses": [...],
     "innocent_called_failed": [...], "innocent_warned": [...], "results": [...]}
    """
    results = []
    for case in split_cases(load_cases(index_paths), split):
        if added is not None and F.added_of(case) != added:
            continue
        if ecosystem is not None and F.ecosystem_of(case) != ecosystem:
            continue
        verdict = judge(case, triage_case(case))
        results.append(dict(case, **verdict))
    classes: Dict[str, Dict[str, Any]] = {}
    for r in results:
        c = classes.setdefault(r["class"], {"cases": 0, "right": 0})
        c["cases"] += 1
        c["right"] += int(r["right"])
    for c in classes.values():
        c["accuracy"] = c["right"] / c["cases"]
    n, ok = len(results), sum(int(r["right"]) for r in results)
    innocent = [r for r in results if r["class"] == INNOCENT]
    return {"classes": dict(sorted(classes.items())),
            "total": {"cases": n, "right": ok, "accuracy": ok / n if n else 0.0},
            "misses": [r for r in results if not r["right"]],
            "innocent_called_failed": [r for r in innocent if not r["right"]],
            "innocent_warned": [r for r in innocent if r["right"] and r["warnings"]],
            "results": results}


def render(result: Dict[str, Any]) -> str:
    """The per-class table, then every miss, then innocent runs that drew a warning."""
    out = ["%-22s %6s %6s %9s" % ("class", "cases", "right", "accuracy")]
    for cls, c in result["classes"].items():
        out.append("%-22s %6d %6d %8.0f%%" % (cls, c["cases"], c["right"], 100 * c["accuracy"]))
    t = result["total"]
    out.append("%-22s %6d %6d %8.0f%%" % ("TOTAL", t["cases"], t["right"], 100 * t["accuracy"]))
    misses = result["misses"]
    out.append("")
    out.append("misses (%d):" % len(misses))
    for r in misses:
        out.append("  %s  (exit %s, %s)" % (_rel(r), r["exit_code"], r["source"]))
        out.append("    expected %-20s got %s" % (r["class"], r["got"]))
        out.append("    deciding evidence: %s" % r["evidence"])
    warned = result["innocent_warned"]
    if warned:
        out.append("")
        out.append("innocent runs that exited 0 but drew a warning (%d):" % len(warned))
        for r in warned:
            out.append("  %s: %s" % (_rel(r), r["warnings"][0]))
    return "\n".join(out) + "\n"


def _rel(r: Dict[str, Any]) -> str:
    try:
        return str(Path(r["path"]).relative_to(HERE))
    except ValueError:
        return r["path"]


USAGE = ("python -m tests.triage.field.score [--split dev|holdout] "
         "[--by ecosystem|source|class|all] [--added wave1-2|wave3] [--ecosystem NAME] "
         "[--json | --loeo-misses] [INDEX.toml ...]")


def parse_args(args: List[str]) -> Dict[str, Any]:
    """{split, by, json, indexes}; a bad flag or path raises ValueError with the reason."""
    opts: Dict[str, Any] = {"split": None, "by": None, "json": False, "indexes": [],
                            "added": None, "ecosystem": None, "loeo_misses": False}
    while args:
        a = args.pop(0)
        if a == "--split" and args and args[0] in ("dev", "holdout"):
            opts["split"] = args.pop(0)
        elif a == "--by" and args and args[0] in F.SECTIONS:
            opts["by"] = args.pop(0)
        elif a == "--added" and args and args[0] in (F.DEVELOPED, F.HELD_OUT):
            opts["added"] = args.pop(0)
        elif a == "--ecosystem" and args and not args[0].startswith("-"):
            opts["ecosystem"] = args.pop(0)
        elif a == "--json":
            opts["json"] = True
        elif a == "--loeo-misses":
            opts["loeo_misses"] = True
        elif a.startswith("-") or not Path(a).is_file():
            raise ValueError("not an index file or a known flag: %s" % a)
        else:
            opts["indexes"].append(Path(a))
    return opts


def as_json(result: Dict[str, Any], mechanical: Optional[Dict[str, Any]] = None) -> str:
    """Every figure plus the per-class table and the misses (file, expected, got, evidence)."""
    misses = [{"file": _rel(r), "source": r["source"], "ecosystem": F.ecosystem_of(r),
               "added": F.added_of(r), "expected": r["class"], "got": r["got"],
               "confidence": r["confidence"], "runner_up": r["runner_up"], "evidence": r["evidence"]}
              for r in result["misses"]]
    out = dict(F.figures(result["results"]), classes=result["classes"], misses=misses)
    if mechanical is not None:
        out["leave_one_ecosystem_out_mechanical"] = mechanical
    return json.dumps(out, indent=1, sort_keys=True) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        opts = parse_args(list(sys.argv[1:] if argv is None else argv))
    except ValueError as exc:
        sys.stderr.write("Error: %s\nHint: %s\n" % (exc, USAGE))
        return 2
    result = score(opts["indexes"] or None, opts["split"], opts["added"], opts["ecosystem"])
    # a fold's own run (--ecosystem) is one piece of the mechanical figure, never its whole
    folds = ((opts["json"] or opts["by"] or opts["loeo_misses"]) and opts["ecosystem"] is None and opts["added"] is None
             and opts["split"] is None)
    mech = loeo.mechanical(result["results"], opts["indexes"]) if folds else None
    if opts["loeo_misses"] and mech is None:
        sys.stderr.write("Error: --loeo-misses needs the whole corpus (no --split, --added or "
                         "--ecosystem)\nHint: %s\n" % USAGE)
        return 2
    if opts["json"]:
        sys.stdout.write(as_json(result, mech))
    elif opts["loeo_misses"]:
        sys.stdout.write(loeo.render_misses(mech) + loeo.render(mech))
        return 0 if mech["right"] == mech["cases"] else 1
    else:
        sys.stdout.write(render(result))
        if opts["by"]:
            sys.stdout.write("\n" + F.render(F.figures(result["results"]), opts["by"]))
            if mech is not None:
                sys.stdout.write(loeo.render(mech))
    return 0 if not result["misses"] else 1


if __name__ == "__main__":
    sys.exit(main())
