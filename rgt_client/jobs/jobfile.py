"""Job files: TOML on the client, the same shape as JSON for the agent (`submit -`).

Validated here first with the agent's own validator (`boxagent.engine.jobspec`, importable because
the client ships the agent), so a typo fails on the laptop with the exact path of the problem,
before anything reaches the box.
"""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from rgt_client import exitcodes
from rgt_client.errors import ClientError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


def load_job(path: str | Path) -> dict[str, Any]:
    """Read JOB.toml (or .json) and validate it; ClientError(USAGE) with the problem's path."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            raw = fh.read((1 << 20) + 1)  # the agent refuses more (jobspec.MAX_JOB_BYTES)
    except OSError as exc:
        raise ClientError("cannot read %s: %s" % (p, exc.strerror), "check the job file path",
                          exitcodes.USAGE)
    job = _parse(p, raw)
    validate(job, str(p))
    return job


def load_quietly(raw: bytes, origin: str) -> dict[str, Any]:
    """A job file's bytes read for a caller that must not see them (an MCP tool: the model):
    an error gives the key path, the kind of problem and a line number, never the line nor a
    value from it (quieterr.py). A model asked by a box's log line for `~/.netrc` as a job once
    got its password back in a TOML error's hint."""
    from boxagent.api import job_key_names
    from rgt_client.jobs.quieterr import quiet
    p = Path(origin)
    try:
        job = _parse(p, raw, quote=False)
        validate(job, origin)
    except ClientError as exc:
        keys = frozenset(job_key_names())
        raise ClientError(quiet(exc.message, origin, keys), quiet(exc.hint or "", origin, keys),
                          exc.code) from None
    return job


def _parse(p: Path, raw: bytes, quote: bool = True) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
        _check_text(text, str(p))
        if p.suffix == ".json":
            job = json.loads(text)
        else:
            job = tomllib.loads(text)
    except RecursionError:  # 200,000 nested [ : the parser's own stack
        raise ClientError("%s: nested too deeply" % p, "a job nests tables a few levels deep",
                          exitcodes.USAGE) from None
    except UnicodeDecodeError as exc:
        raise ClientError("%s is not UTF-8 text (byte %d)" % (p, exc.start),
                          "save the job file as UTF-8", exitcodes.USAGE) from None
    except ValueError as exc:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise syntax_error(p, text, exc, quote) from None
    if not isinstance(job, dict):
        raise ClientError("%s: a job is a table of keys" % p, "see the job format in the README",
                          exitcodes.USAGE)
    return job


_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_CHAR = re.compile(r"Illegal character '(\\[nr])'")


def syntax_error(p: Path, text: str, exc: ValueError, quote: bool = True) -> ClientError:
    """`FILE line L, column C: what` and, as the hint, that line with a caret under the column.
    tomllib says `Illegal character '\\n' (at line 1, column 14)` for an unclosed quote: the
    literal \\n and no line shown left a user guessing."""
    kind = "JSON" if p.suffix == ".json" else "TOML"
    what = str(exc)
    line_no, col = getattr(exc, "lineno", None), getattr(exc, "colno", None)
    at = _AT.search(what)
    if at:
        line_no, col, what = int(at.group(1)), int(at.group(2)), what[:at.start()]
    elif isinstance(exc, json.JSONDecodeError):
        what = exc.msg
    what = _CHAR.sub(lambda m: "the line ends before its value does (an unclosed quote or bracket?)"
                     if m.group(1) == "\\n" else "a carriage return (save the file with LF line ends)", what)
    if not line_no:
        return ClientError("%s is not valid %s: %s" % (p, kind, what), "fix the file; docs/jobs.md has the format",
                           exitcodes.USAGE)
    if not quote:
        return ClientError("%s line %d, column %d is not valid %s: %s" % (p, line_no, col or 1, kind, what),
                           "fix line %d, column %d (the line is not shown: it is from a local file)"
                           % (line_no, col or 1), exitcodes.USAGE)
    lines = text.splitlines() or [""]
    shown = lines[line_no - 1] if 0 < line_no <= len(lines) else ""
    caret = " " * max(0, min(col or 1, len(shown) + 1) - 1) + "^"
    return ClientError("%s line %d, column %d is not valid %s: %s" % (p, line_no, col or 1, kind, what),
                       "fix line %d:\n    %s\n    %s" % (line_no, shown[:200], caret), exitcodes.USAGE)


def _check_text(text: str, origin: str) -> None:
    """The agent's limits on a job's text (size, dotted keys) before a parser sees it."""
    from boxagent.api import AgentError, check_job_text
    try:
        check_job_text(text, origin)
    except AgentError as exc:
        raise ClientError(exc.message, exc.hint or "fix the job file", exitcodes.USAGE) from None


def validate(job: dict[str, Any], origin: str = "job") -> None:
    """The agent's own validator, here: a bad job never reaches the box."""
    from boxagent.api import AgentError, validate_job
    try:
        # Only a check: the box normalises the job itself (its own ~ for workdir).
        validate_job(json.loads(json.dumps(job)), origin, "/home/box")
    except AgentError as exc:
        raise ClientError(exc.message, exc.hint or "fix the job file", exitcodes.USAGE)
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        raise ClientError("%s: %s" % (origin, exc), "fix the job file", exitcodes.USAGE)


def check_name(name: str) -> str:
    if not NAME_RE.match(name or ""):
        raise ClientError("run name %r: expected letters, digits, '.', '_' or '-' (at most 64)" % name,
                          "pick a plain run name like resnet-a3", exitcodes.USAGE)
    return name


def command_job(name: str, command: tuple[str, ...] | list[str], workdir: str | None,
                timeout: str | None = None) -> dict[str, Any]:
    """A one-stage job from `run HOST --name N -- CMD...`. One word is a shell line as written
    (pipes, redirections); several words are an argv, each quoted."""
    check_name(name)
    if not command:
        raise ClientError("no command after --", "rgt-client run HOST --name N -- python train.py",
                          exitcodes.USAGE)
    line = command[0] if len(command) == 1 else shlex.join(command)
    stage: dict[str, Any] = {"name": "main", "run": line}
    if timeout:
        stage["timeout"] = timeout
    return _job(name, workdir, [stage])


def wait_job(name: str, pid: int | None, log: str | None, done: str | None, fail: str | None,
             file: str | None, timeout: str | None, workdir: str | None) -> dict[str, Any]:
    """A one-stage `wait` job from `attach`: watch something rgt did not start."""
    check_name(name)
    wait: dict[str, Any]
    if pid is not None and not log and not file:
        wait = {"pid": pid}
    elif log and done and pid is None and not file:
        wait = {"log": log, "pattern": done}
        if fail:
            wait["fail_pattern"] = fail
    elif file and pid is None and not log:
        wait = {"file": file}
    else:
        raise ClientError("attach needs exactly one of --pid P, --log FILE --done PATTERN, or --file PATH",
                          "rgt-client attach HOST --name N --log train.log --done 'Training completed'",
                          exitcodes.USAGE)
    stage: dict[str, Any] = {"name": "wait", "wait": wait}
    if timeout:
        stage["timeout"] = timeout
    return _job(name, workdir, [stage])


def _job(name: str, workdir: str | None, stages: list[dict[str, Any]]) -> dict[str, Any]:
    job: dict[str, Any] = {"name": name}
    if workdir:
        job["workdir"] = workdir
    job["stage"] = stages
    return job
