"""`rgt-agent` / `python3 rgt-agent.pyz`: argparse over plain functions.

Each concern registers its own subcommands (`register(subparsers)` in the modules below), so
the folders stay independent. A handler takes the parsed args and returns an exit code.
Users never see a traceback: AgentError becomes `Error:` + `Hint:` (STYLE 8); --debug shows more.
"""
from __future__ import annotations

import sys

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any, Dict, List, NoReturn, Optional

from boxagent import __version__
from boxagent.base import names
from boxagent.base.errors import EXIT_ERROR, EXIT_USAGE, AgentError

COMMAND_MODULES = (
    "boxagent.daemon.commands",          # core: start daemon stop submit cancel resume status version exec-stage
    "boxagent.health.cli",        # probe
    "boxagent.triage.cli",        # triage
    "boxagent.notify.cli",        # notify-set notify-test
    "boxagent.artifacts.cli",     # manifest
    "boxagent.runlog.cli",        # report-data
    "boxagent.cost.cli",          # pull-verified
    "boxagent.raynode.cli",       # ray-node
)


# A part's command imports only that part's module (a `triage` call is then ~0.1 s faster).
PART_COMMANDS = {"probe": "boxagent.health.cli", "triage": "boxagent.triage.cli",
                 "notify-set": "boxagent.notify.cli", "notify-test": "boxagent.notify.cli",
                 "manifest": "boxagent.artifacts.cli", "pull-info": "boxagent.artifacts.cli",
                 "pull-stream": "boxagent.artifacts.cli", "report-data": "boxagent.runlog.cli",
                 "ray-node": "boxagent.raynode.cli"}

# The core's commands: `status` & co. then import only the core (a CLI call is ~3x faster than
# with every part's imports, which matters for the client's one-round-trip `status`).
CORE_COMMANDS = ("start", "daemon", "stop", "configure", "submit", "cancel", "resume", "status", "logs",
                 "handbook", "version")


def _command_word(args: List[str]) -> Optional[str]:
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--home":
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def build_parser(modules: tuple = COMMAND_MODULES) -> Any:
    # Imported here: the stage shim's fast path (main) must not pay for argparse's imports.
    import argparse
    import importlib

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:  # exit 2 with a hint, not argparse's bare usage dump
            sys.stderr.write("Error: %s\nHint: run `%s --help`\n" % (message, self.prog))
            sys.exit(EXIT_USAGE)

    parser = _Parser(prog="rgt-agent", description="rgt box agent")
    parser.add_argument("--version", action="version", version="rgt-agent " + __version__)
    parser.add_argument("--home", help="state directory (default $RGT_HOME or ~/.rgt)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in modules:
        try:
            importlib.import_module(name).register(sub)
        except Exception as exc:  # noqa: BLE001
            if name == COMMAND_MODULES[0] or len(modules) == 1:
                raise       # the core, or the one part this command is: nothing to go on with
            # A broken optional part must not take `status`, `stop` or `resume` down with it.
            sys.stderr.write("Warning: the %s commands are unavailable: %s: %s\n" % (name, type(exc).__name__, exc))
    return parser


def main(argv: Optional[List[str]] = None, process_exit: bool = False) -> int:
    """Run one command; its exit code. `process_exit`: the process ends with it (the .pyz's run),
    and a `status` then ends it as soon as its answer is out (_exit_now)."""
    args_in = sys.argv[1:] if argv is None else list(argv)
    if args_in[:1] == ["exec-stage"]:
        # The stage shim lives as long as the stage: skip the other parts' imports (memory, start time).
        from boxagent.engine.shim import main as shim_main
        return shim_main(args_in[1:])
    args = _plain_status(args_in)
    if args is None:
        word = _command_word(args_in)
        if word in CORE_COMMANDS:
            parser = build_parser(COMMAND_MODULES[:1])
        elif word in PART_COMMANDS:
            parser = build_parser((PART_COMMANDS[word],))
        else:
            parser = build_parser(COMMAND_MODULES)
        args = parser.parse_args(args_in)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
    code = _run(args)
    if process_exit and args.command == "status":
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """End a `status` (it only reads, and starts no thread) once its answer is flushed, without
    tearing down every module it imported: that teardown came after the answer, and the client's
    ssh call waits for this process to end (3 ms of each status). Output that cannot be flushed
    returns to Python's own way out, which reports it."""
    import atexit
    import os
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    atexit._run_exitfuncs()
    os._exit(code)


def _plain_status(args_in: List[str]) -> Any:
    """The client's one round trip, `[--home H] status [--json] [--events N] [--run NAME]`, read
    without argparse: building the parser was half of what `status` cost on the box. Anything
    else (a typo, --help, another option) is None: argparse then reads it, errors and all."""
    vals: Dict[str, Any] = {"home": None, "debug": False, "json": False, "events": None, "run": None,
                            "all_runs": False}
    words, seen = iter(args_in), False
    for word in words:
        if word == "status" and not seen:
            seen = True
        elif word in ("--json", "--debug") and (seen or word == "--debug"):
            vals[word[2:]] = True
        elif word == "--all" and seen:
            vals["all_runs"] = True
        elif word in ("--home", "--events", "--run") and (seen or word == "--home"):
            value = next(words, None)
            if value is None or value.startswith("-") and word != "--events":
                return None
            if word == "--events" and not value.isdigit():
                return None
            if word == "--run" and not names.valid("run", value):
                return None     # argparse says why (a name is never a path or an option)
            vals[word[2:]] = int(value) if word == "--events" else value
        else:
            return None
    if not seen:
        return None
    from types import SimpleNamespace
    from boxagent.daemon.commands import cmd_status
    return SimpleNamespace(command="status", func=cmd_status, **vals)


def _run(args: Any) -> int:
    try:
        return int(args.func(args) or 0)
    except AgentError as exc:
        sys.stderr.write("Error: %s\n" % exc.message)
        if exc.hint:
            sys.stderr.write("Hint: %s\n" % exc.hint)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except OSError as exc:   # a full disk, a read-only or foreign state directory...
        if getattr(args, "debug", False):
            raise
        where = exc.filename or ""
        sys.stderr.write("Error: %s%s\n" % (exc.strerror or exc, (": %s" % where) if where else ""))
        sys.stderr.write("Hint: check that the state directory (--home or $RGT_HOME) is writable and its "
                         "disk has space (df -h; df -i)\n")
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        if getattr(args, "debug", False):
            raise
        sys.stderr.write("Error: internal error: %s: %s\n" % (type(exc).__name__, exc))
        sys.stderr.write("Hint: run again with --debug and report the traceback\n")
        return EXIT_ERROR
