"""rgt-client: thin click commands over plain functions (pip-tools style).

Each concern keeps its commands in its own module and lists them in COMMANDS; this file
only assembles the group and turns ClientError into `Error:` + `Hint:` with its exit code.
A command's module is imported when that command runs: `status` must stay close to one bare
ssh round trip, and importing every command (pull, profiles, demo...) cost more than the agent's
whole answer on the box. tests/client/test_cli.py checks COMMANDS against the modules.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from rgt_client import __version__, exitcodes, options, usage
from rgt_client.errors import ClientError

COMMAND_MODULES = {
    "rgt_client.install.cmd": ("install",),
    "rgt_client.jobs.cmd": ("run", "attach", "logs", "cancel", "resume", "handbook"),
    "rgt_client.status.cmd": ("status", "watch", "patrol"),
    "rgt_client.demo.cmd": ("demo",),
    "rgt_client.profiles.cmd": ("profiles",),
    "rgt_client.notify.cmd": ("notify-set", "notify-test"),
    "rgt_client.triage.cmd": ("triage",),
    "rgt_client.pull.cmd": ("pull", "verify"),
    "rgt_client.report.cmd": ("report",),
    "rgt_client.ssh.cmd": ("ssh-close",),
    "rgt_client.ray.cmd": ("ray",),
    "rgt_client.mcp.cmd": ("mcp",),
}
MODULE_OF = {name: module for module, names in COMMAND_MODULES.items() for name in names}


class _Group(click.Group):
    """Commands by name from COMMAND_MODULES; a module is imported when one of its commands is
    needed (to run it, or for --help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(MODULE_OF)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in MODULE_OF:
            for cmd in importlib.import_module(MODULE_OF[cmd_name]).COMMANDS:
                self.add_command(cmd)
        return self.commands.get(cmd_name)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """click's own usage errors in rgt's form: `Error:` + `Hint:` and exit 2 (click printed its
        usage block and `Error: Missing argument 'DEST'.` with no hint)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.UsageError as exc:
            usage.report(exc)
            sys.exit(exitcodes.USAGE)
        except click.exceptions.ClickException as exc:      # a bad file argument and the like
            click.echo("Error: %s" % exc.format_message(), err=True)
            click.echo("Hint: see rgt-client --help", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted.", err=True)
            sys.exit(exitcodes.ERROR)
        sys.exit(rv if isinstance(rv, int) else exitcodes.OK)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ClientError as exc:
            # messages and hints often quote the box (its Error: lines, run names): textsafe
            from rgt_client.textsafe import safe, safe_line
            # a message of several lines (a job's N problems) keeps its lines, each made safe:
            # one safe_line over all of it printed them joined by a literal "\n"
            first, *rest = exc.message.splitlines() or [""]
            click.echo("Error: %s" % safe_line(first), err=True)
            for line in rest:
                click.echo(safe_line(line), err=True)
            if exc.hint:
                click.echo("Hint: %s" % safe(exc.hint), err=True)
            ctx.exit(exc.code)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (`status --json | head`): nothing is wrong with rgt, and there
            # is no one to tell. Said "internal error" once. Exit as a command killed by SIGPIPE
            # does; stdout goes to /dev/null so the flush at exit cannot fail again.
            import os
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            ctx.exit(128 + 13)
        except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
            if (ctx.obj or {}).get("debug"):
                raise
            from rgt_client.textsafe import safe_line
            click.echo("Error: internal error: %s: %s" % (type(exc).__name__, safe_line(str(exc))), err=True)
            click.echo("Hint: run again with --debug and report the traceback", err=True)
            ctx.exit(exitcodes.ERROR)


@click.group("rgt-client", cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rgt-client")
@options.ssh_config
@options.debug
@click.pass_context
def cli(ctx: click.Context, ssh_config: str | None, debug: bool) -> None:
    """rgt: keep long GPU jobs on rented boxes finishing on their own."""
    ctx.ensure_object(dict)
    ctx.obj["ssh_config"] = ssh_config
    ctx.obj["debug"] = debug


def main() -> None:
    try:
        cli(obj={})
    except KeyboardInterrupt:
        sys.exit(130)


__all__ = ["cli", "main", "exitcodes"]


if __name__ == "__main__":
    main()
