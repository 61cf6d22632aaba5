"""The job file: parse (JSON, or TOML where tomllib exists), validate every key, normalise.

Every problem names its exact path (`stage[1].timeout: expected a duration like "90m", got "abc"`),
all problems are reported at once, and nothing is written when there is one. The normalised spec
(durations in seconds, defaults filled, alias `stages` -> `stage`) validates to itself, so the
daemon can re-check what is on disk.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Dict, List, Optional

from boxagent.base.errors import UsageError
from boxagent.base.units import parse_size
from boxagent.engine import joblimits, sweep
from boxagent.engine.jobcheck import ENV_KEY_RE, Checker, show
from boxagent.engine.joblimits import (MAX_ENV_BYTES, MAX_ENV_VALUE_BYTES, MAX_JOB_BYTES,  # noqa: F401
                                       MAX_RUN_BYTES, MAX_STAGES, utf8_len)
from boxagent.slurm import spec as slurm_spec

from boxagent.base.names import valid as valid_name  # noqa: E402 - one rule for every name
TOP_KEYS = ("name", "workdir", "env", "stage", "stages", "artifacts", "preflight", "rule", "stall_after") + \
    slurm_spec.TOP_KEYS + sweep.TOP_KEYS
STAGE_KEYS = ("name", "run", "wait", "expect", "success_pattern", "fail_pattern", "progress_pattern",
              "metrics_pattern", "timeout", "retries", "expected_duration", "stall_after", "fast_ratio",
              "env") + slurm_spec.STAGE_KEYS
WAIT_KEYS = ("log", "pattern", "fail_pattern", "file", "pid")
RULE_KEYS = ("class", "pattern", "severity", "retryable", "remediation")
SEVERITIES = ("info", "warning", "critical")
DEFAULT_WAIT_TIMEOUT = 72 * 3600.0   # "every wait ends": a wait without a timeout gets three days
MAX_RETRIES = 10
FORMAT_HINT = "fix the job file; every key is described in docs/jobs.md, \"The job file\" (examples/job.toml)"

class JobError(UsageError):
    def __init__(self, problems: List[str], source: str = "job", hint: Optional[str] = None):
        self.problems = problems
        if len(problems) == 1:
            message = "%s: %s" % (source, problems[0])
        else:
            message = "%s: %d problems:\n  %s" % (source, len(problems), "\n  ".join(problems))
        super().__init__(message, hint or FORMAT_HINT)


def parse_text(text: str, source: str = "job") -> Dict[str, Any]:
    """JSON (what the client sends); TOML when the text is not JSON and tomllib exists (3.11+)."""
    check_text(text, source)
    stripped = text.lstrip()
    if not stripped:
        raise JobError(["the job is empty"], source)
    try:
        data = json.loads(text)
    except RecursionError:                # 200,000 nested [ : the parser's own stack
        raise JobError([joblimits.too_deep()], source, joblimits.LIMIT_HINT)
    except ValueError as exc:
        if stripped.startswith("{") or source.endswith(".json"):
            raise JobError(["not valid JSON: %s" % exc], source)
        data = _parse_toml(text, source)
    if not isinstance(data, dict):
        raise JobError(["the job must be an object (a table), got %s" % type(data).__name__], source)
    return data


def _parse_toml(text: str, source: str) -> Any:
    try:
        import tomllib  # novermin  (Python 3.11+ only; guarded by ImportError)
    except ImportError:
        raise JobError(["not JSON, and this Python (< 3.11) has no TOML reader"], source)
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise JobError([joblimits.too_deep()], source, joblimits.LIMIT_HINT)
    except ValueError as exc:
        raise JobError(["not valid TOML: %s" % exc], source)


def check_text(text: str, source: str = "job") -> None:
    """JobError for a job text no parser should get (joblimits.text_problem)."""
    problem = joblimits.text_problem(text)
    if problem is not None:
        raise JobError([problem[0]], source, problem[1])


def check_structure(job: Any, source: str = "job") -> None:
    """JobError for too deep, a NUL byte, inf/nan anywhere (joblimits.structure_problems)."""
    problems = joblimits.structure_problems(job, show)
    if problems:
        raise JobError([p for p, _ in problems], source, problems[0][1])


def spec_sha256(spec: Dict[str, Any]) -> str:
    """Identity of a normalised job: identical re-submits are no-ops."""
    data = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def stage_kind(stage: Dict[str, Any]) -> str:
    return "wait" if "wait" in stage else "run"


def validate(job: Any, source: str = "job", home_dir: Optional[str] = None) -> Dict[str, Any]:
    """The normalised spec, or JobError listing every problem with its path."""
    v = _Validator()
    if not isinstance(job, dict):
        raise JobError(["the job must be an object, got %s" % type(job).__name__], source)
    check_structure(job, source)
    spec = v.top(job, home_dir or os.path.expanduser("~"))
    if v.problems:
        raise JobError(v.problems, source)
    return spec


class _Validator(Checker):
    """The job's sections, checked with the typed checks of jobcheck.Checker."""

    # -- sections
    def top(self, job: Dict[str, Any], home_dir: str) -> Dict[str, Any]:
        self.unknown(job, TOP_KEYS, "")
        spec: Dict[str, Any] = {}
        if "name" not in job:
            self.bad("name", "required (letters, digits, . _ -; at most 64 characters)")
        elif not valid_name("job", job["name"]):
            self.bad("name", "expected letters, digits, '.', '_' or '-' (starting with a letter or "
                             "digit, at most 64 characters), got %s" % show(job["name"]))
        else:
            spec["name"] = job["name"]
        spec["workdir"] = self.workdir(job.get("workdir"), home_dir)
        spec["env"] = self.job_env = self.env(job.get("env", {}), "env")
        spec["stage"] = self.stages(job)
        spec["artifacts"] = self.artifacts(job.get("artifacts", {}))
        if "preflight" in job:
            spec["preflight"] = self.preflight(job["preflight"])
        spec["rule"] = self.rules(job.get("rule", []))
        if "stall_after" in job:
            spec["stall_after"] = self.duration(job["stall_after"], "stall_after")
        spec.update(slurm_spec.check_job(job, self.bad))
        spec.update(sweep.check_job(job, self.bad, lambda key: bool(ENV_KEY_RE.match(key))))
        # rgt picks the GPUs (all of them by default): a job that picks its own would fight the runs beside it
        sweep.check_env(job.get("env"), "env", self.bad)
        key = "stages" if "stages" in job else "stage"
        stages = job.get(key)
        for i, st in enumerate(stages if isinstance(stages, list) else []):
            if isinstance(st, dict):
                sweep.check_env(st.get("env"), "%s[%d].env" % (key, i), self.bad)
        too_long = sweep.name_room(spec.get("name") or "", spec.get("matrix")) if "group" not in spec else None
        if too_long:
            self.bad("name", too_long)
        return spec

    def workdir(self, value: Any, home_dir: str) -> Optional[str]:
        if value is None:
            return home_dir
        if self.string(value, "workdir") is None:
            return None
        path = os.path.expanduser(value) if value.startswith("~") else value
        if not os.path.isabs(path):
            self.bad("workdir", "expected an absolute path (or ~/...), got %s" % show(value))
            return None
        return os.path.normpath(path)

    def stages(self, job: Dict[str, Any]) -> List[Dict[str, Any]]:
        if "stage" in job and "stages" in job:
            self.bad("stages", "give either `stage` or its alias `stages`, not both")
            return []
        key = "stages" if "stages" in job else "stage"
        raw = job.get(key)
        if not isinstance(raw, list) or not raw:
            self.bad(key, "expected a non-empty list of stages ([[stage]] tables), got %s" % show(raw))
            return []
        if len(raw) > MAX_STAGES:
            self.bad(key, "%d stages; at most %d (split the work into several jobs, or loop "
                          "inside one stage's script)" % (len(raw), MAX_STAGES))
            return []
        out: List[Dict[str, Any]] = []
        seen: Dict[Any, int] = {}
        for i, st in enumerate(raw):
            path = "%s[%d]" % (key, i)
            norm = self.stage(st, path)
            name = norm.get("name")
            if name is not None:
                if name in seen:
                    self.bad(path + ".name", "duplicate stage name %s (also %s[%d])" % (show(name), key, seen[name]))
                seen.setdefault(name, i)
            out.append(norm)
        return out

    def stage(self, st: Any, path: str) -> Dict[str, Any]:
        if not isinstance(st, dict):
            self.bad(path, "expected a table, got %s" % show(st))
            return {}
        self.unknown(st, STAGE_KEYS, path + ".")
        out: Dict[str, Any] = {}
        name = st.get("name")
        if name is None:
            self.bad(path + ".name", "required")
        elif not valid_name("stage", name):
            self.bad(path + ".name", "expected letters, digits, '.', '_' or '-' (at most 64), got %s" % show(name))
        else:
            out["name"] = name
        if ("run" in st) == ("wait" in st):
            self.bad(path, "needs exactly one of `run` (a command) or `wait` (a table)")
        elif "run" in st:
            out["run"] = self.string(st["run"], path + ".run")
            if out["run"] is not None and utf8_len(out["run"]) > MAX_RUN_BYTES:
                self.bad(path + ".run", "the command is %d KiB; at most %d KiB (put it in a "
                         "script and run that)" % (utf8_len(out["run"]) >> 10, MAX_RUN_BYTES >> 10))
        else:
            out["wait"] = self.wait(st["wait"], path + ".wait")
        out["expect"] = self.str_list(st.get("expect", []), path + ".expect")
        for key in ("success_pattern", "fail_pattern", "progress_pattern", "metrics_pattern"):
            if key not in st:
                continue
            out[key] = self.metrics(st[key], path + "." + key) if key == "metrics_pattern" else \
                self.regex(st[key], "%s.%s" % (path, key))
            if key == "progress_pattern" and out[key] is not None and "done" not in re.compile(out[key]).groupindex:
                self.bad("%s.%s" % (path, key), "needs a named group `done` (and optionally `total`), "
                         "e.g. 'epoch (?P<done>\\d+)/(?P<total>\\d+)'")
            if "wait" in st and key not in ("progress_pattern", "metrics_pattern"):
                self.bad("%s.%s" % (path, key), "a wait stage uses wait.%s instead"
                         % ("pattern" if key == "success_pattern" else key))
            elif "wait" in st and isinstance(st["wait"], dict) and "log" not in st["wait"]:
                self.bad("%s.%s" % (path, key), "a wait stage without wait.log has no log to match")
        self.stage_numbers(st, out, path)
        out["env"] = self.env(st.get("env", {}), path + ".env")
        self.env_total(out["env"], path + ".env")
        if "slurm" in st:
            out["slurm"] = slurm_spec.table(st["slurm"], path + ".slurm", self.bad)
        if "wait" in out and "timeout" not in out:
            out["timeout"] = DEFAULT_WAIT_TIMEOUT
        return out

    def stage_numbers(self, st: Dict[str, Any], out: Dict[str, Any], path: str) -> None:
        for key in ("timeout", "expected_duration", "stall_after"):
            if key in st:
                out[key] = self.duration(st[key], "%s.%s" % (path, key))
        out["retries"] = self.integer(st.get("retries", 0), path + ".retries", 0, MAX_RETRIES)
        out["fast_ratio"] = self.number(st.get("fast_ratio", 0.5), path + ".fast_ratio", 0.0, 1.0)

    def wait(self, w: Any, path: str) -> Dict[str, Any]:
        if not isinstance(w, dict):
            self.bad(path, "expected a table with `log` + `pattern`, or `file`, or `pid`, got %s" % show(w))
            return {}
        self.unknown(w, WAIT_KEYS, path + ".")
        forms = [k for k in ("log", "file", "pid") if k in w]
        if len(forms) != 1:
            self.bad(path, "needs exactly one of `log` (+ `pattern`), `file` or `pid`, got %s"
                     % (", ".join(forms) or "none"))
            return {}
        out: Dict[str, Any] = {}
        if "log" in w:
            out["log"] = self.string(w["log"], path + ".log")
            if "pattern" not in w:
                self.bad(path + ".pattern", "required with `log`")
            else:
                out["pattern"] = self.regex(w["pattern"], path + ".pattern")
            if "fail_pattern" in w:
                out["fail_pattern"] = self.regex(w["fail_pattern"], path + ".fail_pattern")
        else:
            for key in ("pattern", "fail_pattern"):
                if key in w:
                    self.bad("%s.%s" % (path, key), "only with `log`")
            if "file" in w:
                out["file"] = self.string(w["file"], path + ".file")
            else:
                out["pid"] = self.integer(w["pid"], path + ".pid", 1)
        return out

    def artifacts(self, a: Any) -> Dict[str, List[str]]:
        if not isinstance(a, dict):
            self.bad("artifacts", "expected a table with `include` and `exclude` globs, got %s" % show(a))
            return {"include": [], "exclude": []}
        self.unknown(a, ("include", "exclude"), "artifacts.")
        out = {}
        for key in ("include", "exclude"):
            globs = self.str_list(a.get(key, []), "artifacts." + key)
            for i, g in enumerate(globs):
                if g.startswith("/") or g.startswith("~"):
                    self.bad("artifacts.%s[%d]" % (key, i), "must be relative to workdir, got %s" % show(g))
                elif ".." in g.replace("\\", "/").split("/"):
                    self.bad("artifacts.%s[%d]" % (key, i), "must not climb out of workdir with '..', got %s" % show(g))
            out[key] = globs
        return out

    def preflight(self, p: Any) -> Dict[str, Any]:
        if not isinstance(p, dict):
            self.bad("preflight", "expected a table, got %s" % show(p))
            return {}
        self.unknown(p, ("gpus", "min_free_disk", "min_free_inodes", "max_gpu_temp_c",
                         "max_gpu_memory_taken_pct"), "preflight.")
        out: Dict[str, Any] = {}
        if "gpus" in p:
            out["gpus"] = self.integer(p["gpus"], "preflight.gpus", 0)
        if "min_free_disk" in p:
            try:
                out["min_free_disk"] = parse_size(p["min_free_disk"])
            except ValueError as exc:
                self.bad("preflight.min_free_disk", str(exc))
        if "min_free_inodes" in p:
            out["min_free_inodes"] = self.integer(p["min_free_inodes"], "preflight.min_free_inodes", 0)
        if "max_gpu_temp_c" in p:
            out["max_gpu_temp_c"] = self.number(p["max_gpu_temp_c"], "preflight.max_gpu_temp_c", 0.0)
        if "max_gpu_memory_taken_pct" in p:
            out["max_gpu_memory_taken_pct"] = self.number(p["max_gpu_memory_taken_pct"],
                                                          "preflight.max_gpu_memory_taken_pct", 0.0)
        return out

    def rules(self, rules: Any) -> List[Dict[str, Any]]:
        if not isinstance(rules, list):
            self.bad("rule", "expected a list of [[rule]] tables, got %s" % show(rules))
            return []
        out = []
        for i, r in enumerate(rules):
            path = "rule[%d]" % i
            if not isinstance(r, dict):
                self.bad(path, "expected a table, got %s" % show(r))
                continue
            self.unknown(r, RULE_KEYS, path + ".")
            norm = {"class": self.string(r.get("class"), path + ".class"),
                    "pattern": self.regex(r.get("pattern"), path + ".pattern"),
                    "severity": r.get("severity", "warning"),
                    "retryable": r.get("retryable", False)}
            if norm["severity"] not in SEVERITIES:
                self.bad(path + ".severity", "expected one of %s, got %s" % ("|".join(SEVERITIES), show(norm["severity"])))
            if not isinstance(norm["retryable"], bool):
                self.bad(path + ".retryable", "expected true or false, got %s" % show(norm["retryable"]))
            if "remediation" in r:
                norm["remediation"] = self.string(r["remediation"], path + ".remediation")
            out.append(norm)
        return out
