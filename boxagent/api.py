"""The agent's one face to the client: everything rgt_client uses of boxagent, by name.

The laptop's client imports this module and no other part of the agent (tests/test_structure.py
holds it to that), so the agent's folders can be rearranged without breaking the client, and a
reader sees in one page what the two halves share: the units and exit codes, the atomic write,
the one validator of numbers from files and flags (`numbers`), the job validator, the log line
rule, offline triage, the profile's alert thresholds and regex
check, the notifier check, the file hasher, and the .pyz's entry point.

Light facts are imported here; the heavy parts only when a function that needs them is called:
`status` imports this module and must stay close to one bare ssh round trip.
"""
from __future__ import annotations

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from boxagent.base import names, numbers
from boxagent.base.boxjson import BadJSON, loads as box_json
from boxagent.base.errors import (EXIT_ERROR, EXIT_NOT_RUNNING, EXIT_OK, EXIT_RUN_FAILED,
                                  EXIT_USAGE, AgentError)
from boxagent.base.fsutil import atomic_write_text, dumps
from boxagent.base.units import (NON_FINITE, format_bytes, format_duration, parse_duration,
                                 parse_iso_utc, parse_utc_time)

if TYPE_CHECKING:
    from boxagent.artifacts.hashing import Hashed
    from boxagent.daemon.logtail import Lines

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_NOT_RUNNING", "EXIT_RUN_FAILED", "AgentError",
           "atomic_write_text", "dumps", "NON_FINITE", "format_bytes", "format_duration", "parse_duration",
           "parse_iso_utc", "parse_utc_time", "check_job_text", "validate_job", "job_key_names",
           "log_lines", "triage_log",
           "triage_text", "alert_thresholds", "unsafe_regex_reason", "check_notifiers", "notify_secret_strings", "hash_file",
           "hash_many", "main", "numbers", "box_json", "BadJSON", "valid_name", "name_error"]


# -- names ---------------------------------------------------------------------------------------
def valid_name(kind: str, value: object) -> bool:
    """Is `value` a valid run / stage / group / job name (the agent's one rule, base/names.py)."""
    return names.valid(kind, value)


def name_error(kind: str, value: object) -> AgentError:
    """The usage error for a name that is not one (the name shown escaped and cut)."""
    try:
        names.check(kind, value)
    except AgentError as exc:
        return exc
    raise ValueError("%r is a valid %s name" % (value, kind))


# -- jobs ----------------------------------------------------------------------------------------

def check_job_text(text: str, origin: str) -> None:
    """AgentError (a usage error) for a job text no parser should get: too big, too deep."""
    from boxagent.engine import jobspec
    jobspec.check_text(text, origin)


def validate_job(job: Any, origin: str, home_dir: str) -> Dict[str, Any]:
    """The box's own job validator: the normalised job, or AgentError listing every problem."""
    from boxagent.engine import jobspec
    return jobspec.validate(job, origin, home_dir)


def job_key_names() -> List[str]:
    """Every key name the job format has (a message naming one quotes the format, not a file)."""
    from boxagent.engine import jobspec
    return sorted(set(jobspec.TOP_KEYS + jobspec.STAGE_KEYS + jobspec.WAIT_KEYS + jobspec.RULE_KEYS))


def notify_key_names() -> List[str]:
    """Every key name a notify file has (a message naming one quotes the format, not a file)."""
    from boxagent.notify.config import KEYS
    return sorted(set(KEYS) | {"notify"})


# -- logs ----------------------------------------------------------------------------------------

def log_lines() -> "Lines":
    """The box's rule for what a line of a stage log is (a bar's redraws count as one), for
    bytes that arrive in chunks: feed(), pending(), end()."""
    from boxagent.daemon.logtail import Lines
    return Lines()


# -- triage --------------------------------------------------------------------------------------

def triage_log(path: str, exit_code: Optional[int], rules_file: Optional[str], engine: str,
               progress_pattern: Optional[str], workdir: Optional[str],
               check_paths: List[str]) -> Dict[str, Any]:
    """Triage a log file on this machine, as the box triages a stage: its classes and its cause.
    Only the paths named are checked: this machine's disks say nothing about the box's."""
    from boxagent.triage.cli import load_rules, report
    return report(path, exit_code, load_rules(rules_file), engine, progress_pattern,
                  probe_disks=False, workdir=workdir, check_paths=check_paths)


def triage_text(report: Dict[str, Any]) -> str:
    from boxagent.triage.cli import render_text
    return render_text(report)


# -- profiles ------------------------------------------------------------------------------------

def alert_thresholds() -> Tuple[str, ...]:
    """The names of the agent's alert thresholds: a profile may override only those."""
    from boxagent.health.alerts import DEFAULTS
    return tuple(DEFAULTS)


def unsafe_regex_reason(pattern: str) -> Optional[str]:
    """Why a pattern could freeze the box's log scan (with a safer form), or None."""
    from boxagent.triage.regexsafe import unsafe_reason
    return unsafe_reason(pattern)


# -- notify --------------------------------------------------------------------------------------

def check_notifiers(entries: List[Any]) -> None:
    """AgentError (a usage error, with its hint) for a [[notify]] entry the box could not use.
    Schemes only Apprise speaks pass: the box decides whether it can import Apprise."""
    from boxagent.notify.config import NotifyConfigError, parse_notifiers
    try:
        parse_notifiers(entries, apprise_ok=True)
    except NotifyConfigError as exc:
        raise AgentError(exc.message, exc.hint, EXIT_USAGE) from None


def notify_secret_strings(entries: List[Any]) -> List[str]:
    """Every secret-bearing string of these [[notify]] entries, longest first: each URL, its
    userinfo and token pieces, `secret`, a `base_url` with a path and its pieces. What the box
    masks in its own output, for a caller that must mask the same (the MCP server)."""
    from boxagent.notify.config import secret_parts
    out: set = set()
    for e in entries:
        if not isinstance(e, dict):
            continue
        if isinstance(e.get("url"), str):
            out.update(secret_parts(e["url"], e.get("secret")))
        elif isinstance(e.get("secret"), str) and e["secret"]:
            out.add(e["secret"])
        if isinstance(e.get("base_url"), str):
            out.update(secret_parts(e["base_url"], keep_host=True))
    return sorted(out, key=len, reverse=True)


# -- artifacts -----------------------------------------------------------------------------------

def hash_file(path: str) -> "Hashed":
    """sha256 of one regular file, as the box's manifest records it (no symlink followed)."""
    from boxagent.artifacts import hashing
    return hashing.hash_file(path)


def hash_many(items: Iterable[Tuple[str, int]], workers: Optional[int] = None,
              on_done: Optional[Callable[[str, "Hashed"], None]] = None) -> Dict[str, "Hashed"]:
    """{path: Hashed} for (path, expected size) pairs, on `workers` threads."""
    from boxagent.artifacts import hashing
    return hashing.hash_many(items, workers, on_done)


# -- the .pyz ------------------------------------------------------------------------------------

def main(process_exit: bool = False) -> int:
    """The agent's command line: the entry point of rgt-agent.pyz. `process_exit`: this process
    ends with the command (the .pyz's own run), so a `status` may end it at once (cli.py)."""
    from boxagent.cli import main as cli_main
    return cli_main(process_exit=process_exit)
