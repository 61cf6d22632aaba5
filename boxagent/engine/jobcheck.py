"""The typed value checks of the job file, each naming the exact path of a problem
(`stage[1].timeout: expected a duration like "90m", got "abc"`): strings, regexes (compiled and
checked for catastrophic backtracking), durations, numbers, environment tables within the
kernel's limits, lists. jobspec.py applies them section by section."""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional

from boxagent.base.units import parse_duration
from boxagent.engine.joblimits import MAX_ENV_BYTES, MAX_ENV_VALUE_BYTES, utf8_len

ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Checker:
    """Collects every problem with its path; each checker returns the normalised value, or None
    (an empty value for tables and lists) after recording what is wrong."""

    def __init__(self) -> None:
        self.problems: List[str] = []
        self.job_env: Dict[str, str] = {}

    def bad(self, path: str, what: str) -> None:
        self.problems.append("%s: %s" % (path, what))

    def unknown(self, obj: Dict[str, Any], allowed: tuple, prefix: str) -> None:
        for key in obj:
            if key not in allowed:
                self.bad(prefix + str(key), "unknown key (allowed: %s)" % ", ".join(a for a in allowed if a != "stages"))

    # -- scalar checkers: each returns the normalised value or None after recording a problem
    def string(self, value: Any, path: str, nonempty: bool = True) -> Optional[str]:
        if not isinstance(value, str) or (nonempty and not value.strip()):
            self.bad(path, "expected a non-empty string, got %s" % show(value))
            return None
        return value

    def regex(self, value: Any, path: str) -> Optional[str]:
        if self.string(value, path) is None:
            return None
        try:
            re.compile(value)
        except re.error as exc:
            self.bad(path, "not a valid regular expression (%s): %s" % (exc, show(value)))
            return None
        # Imported here: the triage package's imports only for jobs that give a pattern.
        from boxagent.triage.regexsafe import unsafe_reason
        why = unsafe_reason(value)
        if why is not None:
            self.bad(path, "the pattern %s %s" % (show(value), why))
            return None
        return value

    def metrics(self, value: Any, path: str) -> Optional[str]:
        # Imported here: only jobs with a metrics_pattern pay for the triage package's imports.
        from boxagent.triage.metrics import pattern_problem
        problem = pattern_problem(value)
        if problem:
            self.bad(path, "%s, got %s" % (problem, show(value)))
            return None
        return value

    def duration(self, value: Any, path: str, positive: bool = True) -> Optional[float]:
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            self.bad(path, str(exc))
            return None
        if positive and seconds <= 0:
            self.bad(path, "expected a duration above zero, got %s" % show(value))
            return None
        return seconds

    def integer(self, value: Any, path: str, lo: int, hi: Optional[int] = None) -> Optional[int]:
        if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
            rng = ("%d..%d" % (lo, hi)) if hi is not None else (">= %d" % lo)
            self.bad(path, "expected an integer %s, got %s" % (rng, show(value)))
            return None
        return value

    def number(self, value: Any, path: str, lo: float, hi: Optional[float] = None) -> Optional[float]:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < lo or (hi is not None and value > hi):
            rng = ("%g..%g" % (lo, hi)) if hi is not None else (">= %g" % lo)
            self.bad(path, "expected a number %s, got %s" % (rng, show(value)))
            return None
        return float(value)

    def env(self, value: Any, path: str) -> Dict[str, str]:
        if not isinstance(value, dict):
            self.bad(path, "expected a table of NAME = \"value\" strings, got %s" % show(value))
            return {}
        out = {}
        for key, val in value.items():
            if not ENV_KEY_RE.match(str(key)):
                self.bad("%s.%s" % (path, key), "not a valid environment variable name")
            elif not isinstance(val, str):
                self.bad("%s.%s" % (path, key), "expected a string (quote it: %s = \"%s\"), got %s"
                         % (key, val, show(val)))
            elif utf8_len(key) + 1 + utf8_len(val) > MAX_ENV_VALUE_BYTES:
                self.bad("%s.%s" % (path, key), "the value is %d KiB; at most %d KiB a variable "
                         "(the kernel refuses 128 KiB): put it in a file and pass its path"
                         % (utf8_len(val) >> 10, MAX_ENV_VALUE_BYTES >> 10))
            else:
                out[key] = val
        return out

    def env_total(self, stage_env: Dict[str, str], path: str) -> None:
        """The job's env and this stage's together, as execve gets them."""
        merged = dict(self.job_env, **stage_env)
        total = sum(utf8_len(k) + utf8_len(v) + 2 for k, v in merged.items())
        if total > MAX_ENV_BYTES:
            self.bad(path, "env and the job's env are %d KiB together; at most %d KiB"
                     % (total >> 10, MAX_ENV_BYTES >> 10))

    def str_list(self, value: Any, path: str) -> List[str]:
        if not isinstance(value, list):
            self.bad(path, "expected a list of strings, got %s" % show(value))
            return []
        out = []
        for i, item in enumerate(value):
            if self.string(item, "%s[%d]" % (path, i)) is not None:
                out.append(item)
        return out


def show(value: Any) -> str:
    """A value as a problem quotes it: short, typed, never a whole table."""
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif value is None:
        text = "nothing"
    elif isinstance(value, (dict, list)):
        text = "a %s" % ("table" if isinstance(value, dict) else "list")
    else:
        text = json.dumps(value) if isinstance(value, (bool, int, float)) else repr(value)
    if len(text) <= 60:
        return text
    # a string cut short keeps its closing quote: a reader that drops quoted values (an error
    # for the model) once passed a long pattern's URL on, its quote left open
    return text[:56] + '…"' if isinstance(value, str) else text[:57] + "..."
