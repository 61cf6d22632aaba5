"""Limits on a job no real one comes near; each stops a job that broke a box before.

Checked at submit by jobspec (the agent's `submit` and the client's `run` alike), before the
key-by-key validation, and documented in docs/jobs.md ("Limits"). Functions here return
(problem, hint) pairs; jobspec turns them into its JobError.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, List, Optional, Tuple

MAX_JOB_BYTES = 1 << 20           # the job text; real ones are a few KB
MAX_DEPTH = 32                    # tables and lists inside each other; real jobs nest 4 deep
MAX_DOTS = 1000                   # dots outside strings: see text_problem()
MAX_STAGES = 1000                 # 100,000 stages made a 23 MB status.json, rewritten every tick
MAX_RUN_BYTES = 64 << 10          # `bash -c RUN` is one argv string: Linux refuses > 128 KiB
MAX_ENV_VALUE_BYTES = 64 << 10    # one NAME=value, the same kernel limit
MAX_ENV_BYTES = 256 << 10         # a stage's whole env (job + stage) of execve's ~2 MiB

LIMIT_HINT = "keep big data in files the stage reads (a script for a long command, a config " \
             "file for a big value); the limits are in the job file documentation"
NUL_HINT = "remove the NUL byte (a paste from a binary file?); a regex can say \\x00"
FINITE_HINT = 'give a number (3600) or a duration ("12h")'

# Strings (TOML's four kinds, JSON's one), comments, or a dot: what text_problem() counts.
_OUTSIDE_STRINGS = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'(?:[^\']|\'(?!\'\'))*\'\'\''
                              r'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|\.')

Problem = Tuple[str, str]          # (what, hint)


def text_problem(text: str) -> Optional[Problem]:
    """A job text no parser should get: over MAX_JOB_BYTES, or with more than MAX_DOTS dots
    outside strings (tomllib is quadratic in a dotted key's length: 16,000 parts take 10 s,
    a 1 MB one hours; a job has a handful of dots, in its numbers)."""
    size = utf8_len(text) if len(text) <= MAX_JOB_BYTES else len(text)
    if size > MAX_JOB_BYTES:
        return "the job is %s; at most %s" % (_size(size), _size(MAX_JOB_BYTES)), LIMIT_HINT
    dots = sum(1 for m in _OUTSIDE_STRINGS.finditer(text) if m.group() == ".")
    if dots > MAX_DOTS:
        return ("%d dots outside strings (dotted keys?); a job has a few, at most %d"
                % (dots, MAX_DOTS), LIMIT_HINT)
    return None


def structure_problems(job: Any, show: Callable[[Any], str]) -> List[Problem]:
    """What no key-by-key check should meet, each with its path: nesting deeper than
    MAX_DEPTH, a NUL byte in any string or key (it cuts a command or a path short in the shim,
    and the stage then looks "killed from outside"), a number that is inf or nan (written as
    non-standard JSON). Iterative: a 200,000-deep TOML table must not blow the stack here."""
    problems: List[Problem] = []
    stack = [(job, "", 1)]
    while stack and len(problems) < 20:
        value, path, depth = stack.pop()
        if isinstance(value, (dict, list)) and depth > MAX_DEPTH:
            problems.append(("%s: %s" % (path or "(top)", too_deep()), LIMIT_HINT))
        elif isinstance(value, dict):
            for key in reversed(list(value)):
                if isinstance(key, str) and "\x00" in key:
                    problems.append(("%s: a key holds a NUL byte: %s" % (path or "(top)", show(key)),
                                     NUL_HINT))
                else:
                    stack.append((value[key], "%s.%s" % (path, key) if path else str(key), depth + 1))
        elif isinstance(value, list):
            stack.extend((v, "%s[%d]" % (path, i), depth + 1) for i, v in reversed(list(enumerate(value))))
        elif isinstance(value, str) and "\x00" in value:
            problems.append(("%s: holds a NUL byte (\\u0000) at character %d"
                             % (path, value.index("\x00")), NUL_HINT))
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append(("%s: expected a finite number, got %s" % (path, value), FINITE_HINT))
    return problems


def too_deep() -> str:
    return "nested deeper than %d tables/lists" % MAX_DEPTH


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _size(n: int) -> str:
    return "%d KiB" % (n >> 10) if n < (4 << 20) else "%d MiB" % (n >> 20)
