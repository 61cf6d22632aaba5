"""The job keys that spread work over a multi-GPU box: `gpus` (whole GPUs per run) and `[matrix]`
(one run per combination of environment values: a sweep).

A rented 8-GPU box costs the same per hour whether one GPU works or eight; the classic ablation
queue ran its cells one after another and left seven idle. `[matrix]` expands at submit into runs
`<name>-1..N` (the cartesian product, first key slowest) sharing `group = <name>`, each with its
values in every stage's environment; no text templating inside `run` (the command reads $LR).

A sweep is one thing: the client sends the job once, as one request file (tmp -> rename), and the
daemon expands it while it handles that one request (engine/requests.py). A submit cut partway
(an ssh drop, a SIGKILL) once left 109 of 1000 cells queued, and then "sweep finished: 109 of 109
succeeded"; now it leaves nothing, or the whole sweep. `group` is rgt's, never the job's.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, List, Optional

ENV_RESERVED = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "RGT_GPUS")
MAX_COMBINATIONS = 1000
MAX_GPUS = 1024
TOP_KEYS = ("gpus", "matrix", "group")

Bad = Callable[[str, str], None]


def check_job(job: Dict[str, Any], bad: Bad, env_key_ok: Callable[[str], bool]) -> Dict[str, Any]:
    """The normalised `gpus`, `matrix` and `group` of a job (only those it gives)."""
    out: Dict[str, Any] = {}
    if "gpus" in job:
        gpus = job["gpus"]
        if gpus != "all" and (isinstance(gpus, bool) or not isinstance(gpus, int) or not 0 <= gpus <= MAX_GPUS):
            bad("gpus", 'expected a whole number of GPUs >= 0, or "all" (the box to itself), got %r' % (gpus,))
        else:
            out["gpus"] = gpus
    if "matrix" in job:
        matrix = _matrix(job["matrix"], bad, env_key_ok, expanded=False)
        if matrix is not None:
            out["matrix"] = matrix
    if "group" in job:
        # Not a job key: a job that set `group` itself joined another job's sweep (a "sweep
        # intruder": it counted in that sweep's group_finished, and `cancel GROUP` stopped it).
        bad("group", "set by rgt for the runs a [matrix] makes; a job cannot give it: drop it (give `matrix`)")
    return out


def _matrix(value: Any, bad: Bad, env_key_ok: Callable[[str], bool], expanded: bool) -> Optional[Dict[str, Any]]:
    """A table NAME -> list of strings (or, in a run a sweep made, NAME -> its one string)."""
    if not isinstance(value, dict) or not value:
        bad("matrix", 'expected a table of environment variables, each with a list of values, e.g. '
                      'LR = ["1e-3", "3e-4"], got %r' % (value,))
        return None
    combos, ok = 1, True
    for key, vals in value.items():
        path = "matrix.%s" % key
        if not env_key_ok(str(key)) or key in ENV_RESERVED or str(key).startswith("RGT_"):
            bad(path, "not an environment variable a sweep may set")
            ok = False
        elif expanded:
            ok = ok and _check(isinstance(vals, str), bad, path, "expected a string")
        elif not isinstance(vals, list) or not vals or not all(isinstance(v, str) for v in vals):
            bad(path, "expected a non-empty list of strings (quote numbers: [\"1e-3\", \"3e-4\"])")
            ok = False
        else:
            combos *= len(vals)
    if combos > MAX_COMBINATIONS:
        bad("matrix", "expands into %d runs; at most %d" % (combos, MAX_COMBINATIONS))
        ok = False
    return value if ok else None


def _check(cond: bool, bad: Bad, path: str, what: str) -> bool:
    if not cond:
        bad(path, what)
    return cond


def check_env(env: Any, path: str, bad: Bad) -> None:
    """A job that picks its own GPUs would fight the runs beside it: rgt assigns them (`gpus`)."""
    if not isinstance(env, dict):
        return
    for key in ENV_RESERVED:
        if key in env:
            bad("%s.%s" % (path, key), "rgt assigns the GPUs: drop this key and give the job `gpus = N` "
                                      "(CUDA_VISIBLE_DEVICES is then set to the run's GPUs by UUID)")


def expand(spec: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One spec per combination of a not-yet-expanded [matrix]; the spec itself otherwise."""
    matrix = spec.get("matrix")
    if not matrix or "group" in spec:
        return [spec]
    keys = list(matrix)
    out = []
    for i, values in enumerate(itertools.product(*(matrix[k] for k in keys)), start=1):
        run = dict(spec, name="%s-%d" % (spec["name"], i), group=spec["name"],
                   matrix=dict(zip(keys, values)))
        run["env"] = dict(spec.get("env") or {}, **run["matrix"])
        out.append(run)
    return out


def name_room(name: str, matrix: Optional[Dict[str, Any]]) -> Optional[str]:
    """Why `name` is too long to carry a sweep's `-N` suffix (names are at most 64), or None."""
    if not matrix:
        return None
    n = 1
    for vals in matrix.values():
        n *= len(vals) if isinstance(vals, list) else 1
    longest = len(name) + 1 + len(str(n))
    return None if longest <= 64 else "a sweep's run names are NAME-1..NAME-%d: shorten the name to %d characters" % (
        n, 64 - 1 - len(str(n)))
