"""`rgt-agent triage LOG [--exit-code N] [--json]`: the daemon's rules and diagnosis on a log
the user already has (a run rgt did not launch, a pulled log). `rgt-client triage` runs the
same functions locally (report() and render_text() below).

Exit codes: 0 no failure found (or exit 0: warnings only), 4 the log/exit code shows a
failure (the cause is printed), 2 bad input (no such file, bad --rules), 1 other errors.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional

from boxagent.base.errors import EXIT_OK, EXIT_RUN_FAILED, AgentError, UsageError
from boxagent.triage import evidence as E
from boxagent.triage.confidence import confidence_words
from boxagent.triage.diagnose import diagnose
from boxagent.triage.rules import build_rules, validate_rule
from boxagent.triage.scanfile import ScanError, scan_file
from boxagent.triage.success import success_warnings
from boxagent.base.units import format_bytes

SCHEMA = "rgt.triage/1"


def register(sub) -> None:
    p = sub.add_parser("triage", help="classes found in a log (with line numbers) and the cause",
                       description="Run rgt's failure rules and diagnosis on a log file.")
    p.add_argument("log", help="the log file, or - for stdin")
    p.add_argument("--exit-code", type=int, default=None,
                   help="the command's exit code, if known (137 = SIGKILL, ...)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--rules", default=None,
                   help="extra [[rule]] entries: a JSON list (or a TOML file with [[rule]])")
    p.add_argument("--progress-pattern", default=None,
                   help="regex with named groups done/total for progress lines")
    p.add_argument("--engine", choices=("auto", "grep", "python"), default="auto",
                   help="candidate-line search: grep -F for big files (auto), or pure python")
    p.add_argument("--workdir", default=None,
                   help="the job's working directory: its filesystem is checked (bytes and inodes)")
    p.add_argument("--path", action="append", default=[], metavar="P",
                   help="also check the filesystem of P (repeatable): tells a full disk from "
                        "full inodes")
    p.set_defaults(func=_cmd)


def _cmd(args) -> int:
    rep = report(args.log, args.exit_code, load_rules(args.rules), args.engine,
                 args.progress_pattern, probe_disks=True, workdir=args.workdir,
                 check_paths=args.path, cgroup_version=_cgroup_version())
    sys.stdout.write(json.dumps(rep, indent=2, sort_keys=True) + "\n" if args.json
                     else render_text(rep))
    return EXIT_RUN_FAILED if rep["cause"] is not None else EXIT_OK


def _cgroup_version() -> Optional[str]:
    """This box's cgroup version (health finds it), for the remediation's words."""
    from boxagent.base.roots import Roots
    from boxagent.health.cgroup import find_cgroup
    roots = Roots.from_env()
    try:
        version = find_cgroup(roots.proc, roots.cgroup).version
    except OSError:
        return None
    return version if version in ("v1", "v2") else None


def checked_disks(paths: List[str]) -> List[Dict[str, Any]]:
    """statvfs of each path a person named (--path, --workdir); a missing one is bad input."""
    out = []
    for p in paths:
        if not os.path.exists(p):
            raise UsageError("no such file or directory: %s" % p,
                             "--path and --workdir name a directory on the filesystem to check")
        d = E.probe_disk(p)
        if d is not None:
            out.append(dict(d, role="given"))
    return out


def load_rules(path: Optional[str]) -> List[Dict[str, Any]]:
    """Job-style [[rule]] entries from a JSON list/object or a TOML file."""
    if not path:
        return []
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise UsageError("cannot read --rules %s: %s" % (path, exc.strerror or exc),
                         "give a JSON list of {class, pattern, ...} or a TOML file with [[rule]]")
    data = _parse_rules(path, raw)
    rules = data.get("rule", []) if isinstance(data, dict) else data
    if not isinstance(rules, list):
        raise UsageError("--rules %s holds no list of rules" % path,
                         'e.g. [{"class": "dataset_missing", "pattern": "FileNotFoundError"}]')
    for i, r in enumerate(rules):
        why = validate_rule(r)
        if why:
            raise UsageError("--rules %s: rule %d: %s" % (path, i, why),
                             "each rule needs class and pattern (a valid regex)")
    return rules


def _parse_rules(path: str, raw: bytes) -> Any:
    if path.endswith(".toml"):
        try:
            import tomllib  # type: ignore[import-not-found]  # novermin (guarded: Python >= 3.11)
        except ImportError:
            raise UsageError("TOML rules need Python >= 3.11 on this machine",
                             "give the rules as JSON instead")
        try:
            return tomllib.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise UsageError("--rules %s is not valid TOML: %s" % (path, exc))
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError("--rules %s is not valid JSON: %s" % (path, exc),
                         "or name it *.toml with [[rule]] tables")


def report(path: str, exit_code: Optional[int] = None, job_rules: Optional[List[Dict[str, Any]]] = None,
           engine: str = "auto", progress_pattern: Optional[str] = None,
           probe_disks: bool = False, workdir: Optional[str] = None,
           check_paths: Optional[List[str]] = None, cgroup_version: Optional[str] = None) -> Dict[str, Any]:
    """The triage report of one log file (what --json prints); "-" reads stdin. Offline:
    nothing but the log is known, except the filesystems of `workdir` and `check_paths`
    (statvfs here), the paths named in ENOSPC lines when `probe_disks`, and the box's
    `cgroup_version` when the caller knows it."""
    if path == "-":
        return _report_stdin(exit_code, job_rules, engine, progress_pattern, workdir,
                             check_paths, cgroup_version)
    if not os.path.isfile(path):
        raise UsageError("no such log file: %s" % path, "give the path of a log file")
    disks = checked_disks(([workdir] if workdir else []) + list(check_paths or []))
    try:
        rs = build_rules(None, job_rules or [])
        scan = scan_file(path, rs, engine, progress_pattern)
    except ScanError as exc:
        raise AgentError(str(exc), "check the file's permissions")
    except ValueError as exc:                     # a bad --progress-pattern
        raise UsageError(str(exc))
    facts = {"exit_code": exit_code, "hits": scan["hits"], "last_lines": scan["last_lines"],
             "progress_line_no": scan["progress_line_no"], "probe_disks": probe_disks,
             "workdir": workdir or os.path.dirname(os.path.abspath(path)), "log": path,
             "disks": disks, "offline": True, "cgroup_version": cgroup_version}
    cause, warnings = None, []
    if exit_code is None:
        top = E.top_hit(facts)
        if top is not None and top.get("severity") == "critical":
            cause = diagnose(dict(facts, assume_failed=True))
    elif exit_code == 0:
        warnings = success_warnings(facts)
    else:
        cause = diagnose(facts)
    rep = dict(scan, schema=SCHEMA, exit_code=exit_code, cause=cause, warnings=warnings)
    rep["verdict"] = "failed" if cause else ("ok" if exit_code == 0 else "no_failure_found")
    return rep


def _report_stdin(exit_code: Optional[int], job_rules: Optional[List[Dict[str, Any]]], engine: str,
                  progress_pattern: Optional[str], workdir: Optional[str],
                  check_paths: Optional[List[str]], cgroup_version: Optional[str]) -> Dict[str, Any]:
    """`kubectl logs POD | rgt-client triage -`: spooled to a temp file, then the same scan."""
    with tempfile.NamedTemporaryFile(prefix="rgt-triage-stdin-") as tmp:
        shutil.copyfileobj(getattr(sys.stdin, "buffer", sys.stdin), tmp, 1 << 20)
        tmp.flush()
        rep = report(tmp.name, exit_code, job_rules, engine, progress_pattern, probe_disks=False,
                     workdir=workdir, check_paths=check_paths, cgroup_version=cgroup_version)
    rep["log"] = "-"
    return rep


def render_text(rep: Dict[str, Any]) -> str:
    out = ["log: %s (%s lines, %s, scanned with %s)" % (
        rep["log"], "{:,}".format(rep["lines"]), format_bytes(rep["bytes"]), rep["engine"])]
    out += _render_classes(rep)
    p = rep.get("progress")
    if p:
        frac = " (%.0f%%)" % (100 * p["fraction"]) if p.get("fraction") is not None else ""
        out.append("progress: %s/%s%s at line %s" % (p["done"], p["total"] or "?", frac,
                                                    rep.get("progress_line_no")))
    out += _render_outcome(rep)
    return "\n".join(out) + "\n"


def _render_classes(rep: Dict[str, Any]) -> List[str]:
    classes = rep.get("classes") or {}
    if not classes:
        return ["classes found: none"]
    out = ["classes found:"]
    for cls, c in sorted(classes.items(), key=lambda kv: (kv[1]["first_line"] or 0)):
        lines = ("line %s" % c["first_line"] if c["count"] == 1 else
                 "lines %s..%s" % (c["first_line"], c["last_line"]))
        out.append("  %-22s %-8s %6d x  %s" % (cls, c["severity"], c["count"], lines))
    shown = [h for h in rep.get("hits") or [] if h.get("severity") != "info"][-10:]
    if shown:
        out.append("hits (last %d):" % len(shown))
        out += ["  line %-8s %-20s %s" % (h["line_no"], h["class"], h["line"]) for h in shown]
    return out


def _render_outcome(rep: Dict[str, Any]) -> List[str]:
    cause = rep.get("cause")
    out = []
    if cause:
        out.append("cause: %s - %s" % (cause["class"], cause["summary"]))
        if cause.get("confidence"):
            out.append("  confidence: %s" % confidence_words(cause))
        if cause.get("decided_by"):
            out.append("  decided by: %s" % cause["decided_by"])
        if cause.get("decided_by_fact") and cause["decided_by_fact"] != cause.get("decided_by"):
            out.append("  decided by the box's fact: %s" % cause["decided_by_fact"])
        if cause.get("overruled"):
            out.append("  overruled:")
            out += ["    - %s" % o for o in cause["overruled"]]
        out.append("  retryable: %s" % ("yes" if cause["retryable"] else "no"))
        out.append("  remediation: %s" % cause["remediation"])
        if cause.get("evidence"):
            out.append("  evidence:")
            out += ["    - %s" % e for e in cause["evidence"]]
        if cause.get("similar"):
            out.append("  like these known failures (a hint, not a verdict):")
            out += ["    - %s (%s, similarity %.2f): %s%s" % (
                n["source"], n["class"], n["score"], n["why"], "; fixed by: %s" % n["fix"]
                if n.get("fix") else "") + ("  <%s>" % n["url"] if n.get("url") else "")
                for n in cause["similar"]]
    elif rep.get("exit_code") == 0:
        out.append("outcome: exit 0" + ("" if rep.get("warnings") else ", no warnings"))
    else:
        out.append("cause: none found in the log (give --exit-code N to diagnose a failed run)")
    for w in rep.get("warnings") or []:
        out.append("warning: %s" % w)
    return out
