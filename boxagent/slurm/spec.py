"""The job's `backend` and `[slurm]` table, and a stage's `[stage.slurm]`: validated, normalised, merged.

Called from boxagent.engine.jobspec with its problem collector, so a Slurm problem is reported
with its exact path (`stage[1].slurm.time: ...`) among all the job's other problems. The
normalised table validates to itself (the daemon re-checks what is on disk):
  time -> "HH:MM:SS" or "D-HH:MM:SS"   mem -> "<MiB>M" or "all"   counts -> int   extra -> [str]
`backend` is kept only when the job names it (absent = "local"), so the identity of existing local
jobs (spec_sha256) does not change.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Dict, List, Optional

from boxagent.base.units import parse_duration, parse_size

TOP_KEYS = ("backend", "slurm", "ray")
STAGE_KEYS = ("slurm",)
BACKENDS = ("local", "slurm", "ray")
RAY_KEYS = ("address", "files")
RAY_FILES = ("shared", "node")
_RAY_ADDRESS = re.compile(r"^https?://[A-Za-z0-9._:\[\]-]+(:[0-9]{1,5})?/?$")
TABLE_KEYS = ("partition", "gres", "time", "mem", "cpus_per_task", "nodes", "account", "qos", "extra")

Bad = Callable[[str, str], None]

_NAME_LIST = re.compile(r"^[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*$")
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_GRES_ONE = r"[A-Za-z][A-Za-z0-9_]*(:[A-Za-z0-9_.-]+){0,2}"
_GRES = re.compile(r"^%s(,%s)*$" % (_GRES_ONE, _GRES_ONE))
_SLURM_TIME = re.compile(r"^(?:(?P<d>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
                         r"|(?P<a>\d+):(?P<b>\d+)(?::(?P<c>\d+))?)$")
_OPTION = re.compile(r"^--(?P<name>[A-Za-z][A-Za-z0-9-]*)(?:=(?P<value>.*))?$", re.S)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# Options rgt sets itself on every stage's sbatch: overriding one would break the chain
# (dependency, kill-on-invalid-dep), the log (output, error, open-mode), re-adoption (job-name,
# parsable), or run an attempt twice (requeue: a requeued batch job finds the attempt's claim).
RGT_OPTIONS = ("dependency", "kill-on-invalid-dep", "job-name", "output", "error", "open-mode", "chdir",
               "parsable", "requeue", "no-requeue", "wrap", "array", "wait", "test-only", "hold")
# Options that have their own key in the table: one place to set each.
TABLE_OPTIONS = {"partition": "partition", "gres": "gres", "time": "time", "mem": "mem",
                 "cpus-per-task": "cpus_per_task", "nodes": "nodes", "account": "account", "qos": "qos"}


def backend(spec: Dict[str, Any]) -> str:
    """The job's backend ("local" when the job does not name one)."""
    return spec.get("backend") or "local"


def merge(job_table: Optional[Dict[str, Any]], stage_table: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The options one stage is submitted with: the stage's keys win; `extra` is the job's list
    then the stage's (sbatch takes the last of a repeated option, so a stage can still override)."""
    out = dict(job_table or {})
    for key, value in (stage_table or {}).items():
        out[key] = list(out.get("extra", [])) + list(value) if key == "extra" else value
    return out


def check_job(job: Dict[str, Any], bad: Bad) -> Dict[str, Any]:
    """The normalised `backend`/`slurm` entries of the spec; problems go to `bad(path, what)`.
    Also refuses `[stage.slurm]` tables where they cannot apply (their content is checked by
    `table`, called from the stage validator)."""
    out: Dict[str, Any] = {}
    name = job.get("backend", "local")
    if name not in BACKENDS:
        bad("backend", "expected one of %s, got %s" % (", ".join('"%s"' % b for b in BACKENDS), _show(name)))
    elif "backend" in job:
        out["backend"] = name
    is_slurm = name == "slurm"
    if "slurm" in job:
        if not is_slurm:
            bad("slurm", 'only with backend = "slurm" (add it, or remove the [slurm] table)')
        else:
            out["slurm"] = table(job["slurm"], "slurm", bad)
    elif is_slurm:
        out["slurm"] = {}
    if is_slurm:
        # Both read the host the agent runs on, never the compute node a stage gets.
        if "gpus" in job:
            bad("gpus", 'the cluster assigns GPUs to a Slurm job: ask with slurm.gres = "gpu:N" instead')
        if "preflight" in job:
            bad("preflight", "it checks the host the agent runs on (the login node), not the compute "
                             "node: remove it (Slurm checks what the job asks for at submission)")
    out.update(_ray_keys(job, name == "ray", bad))
    key = "stages" if "stages" in job else "stage"
    stages = job.get(key)
    for i, st in enumerate(stages if isinstance(stages, list) else []):
        if not isinstance(st, dict) or "slurm" not in st:
            continue
        path = "%s[%d].slurm" % (key, i)
        if not is_slurm:
            bad(path, 'only with backend = "slurm" at the top of the job')
        elif "wait" in st:
            bad(path, "a wait stage runs on the submit host, never as a Slurm job: remove this table")
    return out


def _ray_keys(job: Dict[str, Any], is_ray: bool, bad: Bad) -> Dict[str, Any]:
    """`backend = "ray"`: the `[ray]` table (the cluster's dashboard address), and the keys that
    read this host where a Ray node runs the stage."""
    out: Dict[str, Any] = {}
    if "ray" in job and not is_ray:
        bad("ray", 'only with backend = "ray" (add it, or remove the [ray] table)')
    elif "ray" in job:
        value = job["ray"]
        if not isinstance(value, dict):
            bad("ray", "expected a table (address, files), got %s" % _show(value))
        else:
            for key, item in value.items():
                if key not in RAY_KEYS:
                    bad("ray.%s" % key, "unknown key (allowed: %s)" % ", ".join(RAY_KEYS))
                elif key == "files":
                    if item not in RAY_FILES:
                        bad("ray.files", 'expected "shared" (a filesystem every node shares) or "node" (each '
                                         'node\'s own disk: pull fetches from the node that ran it), got %s' % _show(item))
                elif not isinstance(item, str) or not _RAY_ADDRESS.match(item):
                    bad("ray.address", 'expected the dashboard\'s URL, e.g. "http://10.0.0.5:8265", got %s' % _show(item))
            out["ray"] = {k: v for k, v in value.items() if k in RAY_KEYS and isinstance(v, str)}
    if is_ray:
        gpus = job.get("gpus", 0)
        if not isinstance(gpus, int) or isinstance(gpus, bool):
            bad("gpus", 'with backend = "ray", the GPUs each run holds on a node: a whole number '
                        '(Ray places the run on a node with that many free), got %s' % _show(gpus))
        if "preflight" in job:
            bad("preflight", "it checks the host the agent runs on, not the Ray node a stage gets: remove it")
    return out


def table(value: Any, path: str, bad: Bad) -> Dict[str, Any]:
    """One `[slurm]` / `[stage.slurm]` table, normalised (only the keys it has)."""
    if not isinstance(value, dict):
        bad(path, "expected a table (partition, gres, time, mem, ...), got %s" % _show(value))
        return {}
    out: Dict[str, Any] = {}
    for key, item in value.items():
        where = "%s.%s" % (path, key)
        check = _CHECKS.get(key)
        if check is None:
            bad(where, "unknown key (allowed: %s)" % ", ".join(TABLE_KEYS))
            continue
        norm = check(item, where, bad)
        if norm is not None:
            out[key] = norm
    return out


def _names(pattern: "re.Pattern[str]", what: str) -> Callable[[Any, str, Bad], Optional[str]]:
    def check(value: Any, path: str, bad: Bad) -> Optional[str]:
        if not isinstance(value, str) or not pattern.match(value):
            bad(path, "expected %s, got %s" % (what, _show(value)))
            return None
        return value
    return check


def _count(value: Any, path: str, bad: Bad) -> Optional[int]:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        bad(path, "expected an integer >= 1, got %s" % _show(value))
        return None
    return value


def _time(value: Any, path: str, bad: Bad) -> Optional[str]:
    seconds = slurm_time_seconds(value)
    if seconds is None:
        bad(path, 'expected a duration with a unit ("90m", "12h", "2d") or Slurm\'s "HH:MM:SS" / '
                  '"D-HH:MM:SS", got %s (a bare number is minutes to Slurm and seconds to rgt: '
                  'write the unit)' % _show(value))
        return None
    if seconds <= 0:
        bad(path, "expected a time limit above zero, got %s" % _show(value))
        return None
    return format_slurm_time(seconds)


def slurm_time_seconds(value: Any) -> Optional[int]:
    """Seconds from "90m" / "12h" / "2d" / "45s" or Slurm's "MM:SS", "HH:MM:SS", "D-HH[:MM[:SS]]";
    None for anything else, bare numbers included (ambiguous between Slurm and rgt)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    m = _SLURM_TIME.match(text)
    if m:
        if m.group("d") is not None:
            parts = [m.group("d"), m.group("dh"), m.group("dm") or "0", m.group("ds") or "0"]
            d, h, mi, s = (int(p) for p in parts)
            return ((d * 24 + h) * 60 + mi) * 60 + s
        if m.group("c") is not None:
            return (int(m.group("a")) * 60 + int(m.group("b"))) * 60 + int(m.group("c"))
        return int(m.group("a")) * 60 + int(m.group("b"))
    if not text or text[-1:].lower() not in "smhd":
        return None
    try:
        return int(math.ceil(parse_duration(text)))
    except ValueError:
        return None


def format_slurm_time(seconds: int) -> str:
    days, rest = divmod(int(seconds), 86400)
    hms = "%02d:%02d:%02d" % (rest // 3600, (rest % 3600) // 60, rest % 60)
    return "%d-%s" % (days, hms) if days else hms


def _mem(value: Any, path: str, bad: Bad) -> Optional[str]:
    if value == "all":
        return "all"    # sbatch --mem=0: all the memory of each node
    text = value.strip() if isinstance(value, str) else ""
    if not text or text[-1:].isdigit():
        bad(path, 'expected a size with a unit ("16G", "512M") or "all", got %s (a bare number is '
                  'megabytes to Slurm and bytes to rgt: write the unit)' % _show(value))
        return None
    try:
        size = parse_size(text)
    except ValueError as exc:
        bad(path, "%s, or \"all\"" % exc)
        return None
    if size < (1 << 20):
        bad(path, "expected at least 1M, got %s" % _show(value))
        return None
    return "%dM" % int(math.ceil(size / float(1 << 20)))


def _extra(value: Any, path: str, bad: Bad) -> Optional[List[str]]:
    if not isinstance(value, list):
        bad(path, 'expected a list of sbatch options like ["--constraint=a100"], got %s' % _show(value))
        return None
    out = []
    for i, item in enumerate(value):
        where = "%s[%d]" % (path, i)
        problem = _option_problem(item)
        if problem:
            bad(where, problem)
        else:
            out.append(item)
    return out


def _option_problem(item: Any) -> Optional[str]:
    m = _OPTION.match(item) if isinstance(item, str) else None
    if m is None:
        return 'expected one sbatch option starting with "--" ("--name" or "--name=value"), got %s' % _show(item)
    if _CONTROL.search(item):
        return "control characters (newline, tab, ...) are not allowed, got %s" % _show(item)
    name = m.group("name").lower()
    # sbatch (getopt_long) takes any unambiguous prefix: "--dep=..." is --dependency.
    for full, key in TABLE_OPTIONS.items():
        if full.startswith(name):
            return "--%s is the table's own key: set slurm.%s instead" % (full, key)
    for full in RGT_OPTIONS:
        if full.startswith(name):
            return "--%s is set by rgt for every stage (the chain, the log and re-adoption rely on it)" % full
    return None


_CHECKS: Dict[str, Callable[[Any, str, Bad], Any]] = {
    "partition": _names(_NAME_LIST, 'a partition name, or several joined by "," (letters, digits, . _ -)'),
    "gres": _names(_GRES, 'a gres like "gpu:1" or "gpu:a100:2" (several joined by ",")'),
    "account": _names(_NAME, "an account name (letters, digits, . _ -)"),
    "qos": _names(_NAME, "a QOS name (letters, digits, . _ -)"),
    "time": _time, "mem": _mem, "cpus_per_task": _count, "nodes": _count, "extra": _extra,
}


def _show(value: Any) -> str:
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif value is None:
        text = "nothing"
    elif isinstance(value, (dict, list)):
        text = "a table" if isinstance(value, dict) else "a list"
    else:
        text = json.dumps(value) if isinstance(value, (bool, int, float)) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
