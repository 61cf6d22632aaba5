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

import click

from rgt_client import __version__, exitcodes, options
from rgt_client.errors import ClientError

COMMAND_MODULES = {
    "rgt_client.commands": ("install", "run", "attach"),
    "rgt_client.commands_status": ("status", "logs", "cancel", "resume", "handbook", "watch", "patrol"),
    "rgt_client.demo": ("demo",),
    "rgt_client.profiles_cmd": ("profiles",),
    "rgt_client.notify_cmd": ("notify-set", "notify-test"),
    "rgt_client.triage_cmd": ("triage",),
    "rgt_client.pull_cmd": ("pull", "verify"),
    "rgt_client.report.cmd": ("report",),
    "rgt_client.ssh_cmd": ("ssh-close",),
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

    def invoke(self, ctx: click.Context) -> object:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except ClientError as exc:
            # messages and hints often quote the box (its Error: lines, run names): textsafe
            from rgt_client.textsafe import safe, safe_line
            click.echo("Error: %s" % safe_line(exc.message), err=True)
            if exc.hint:
                click.echo("Hint: %s" % safe(exc.hint), err=True)
            ctx.exit(exc.code)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - the last line of defence: never a traceback
            if (ctx.obj or {}).get("debug"):
                raise
            from rgt_client.textsafe import safe_line
            click.echo("Error: internal error: %s: %s" % (type(exc).__name__, safe_line(str(exc))), err=True)
            click.echo("Hint: run again with --debug and report the traceback", err=True)
            ctx.exit(exitcodes.ERROR)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
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
