"""click's usage errors (a missing argument, a value out of range, an unknown command) said
the rgt way: one `Error:` line in click's words, then a `Hint:` with the usage and the command
to read its help, or the command that was most likely meant."""
from __future__ import annotations

import difflib
import re

import click

_NO_SUCH = re.compile(r"^No such command '([^']+)'")


def report(exc: click.exceptions.UsageError) -> None:
    ctx = exc.ctx
    message = exc.format_message().replace("\n", " ")
    click.echo("Error: %s" % message, err=True)
    click.echo("Hint: %s" % hint(ctx, message), err=True)


def hint(ctx: click.Context | None, message: str) -> str:
    if ctx is None:
        return "see rgt-client --help"
    path = ctx.command_path
    wrong = _NO_SUCH.match(message)
    if wrong and isinstance(ctx.command, click.Group):
        meant = _meant(ctx, wrong.group(1))
        if meant:
            return "did you mean `%s %s`? (%s --help lists them)" % (path, meant, path)
        return "%s --help lists the commands" % path
    usage = " ".join(ctx.get_usage().split())
    usage = usage[len("Usage: "):] if usage.startswith("Usage: ") else usage
    return "usage: %s (%s --help says more)" % (usage, path)


def _meant(ctx: click.Context, word: str) -> str | None:
    """A close command name; under `profiles`, a profile's name means `profiles show NAME`."""
    group = ctx.command
    assert isinstance(group, click.Group)
    names = group.list_commands(ctx)
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    if close:
        return close[0]
    if "show" in names:
        return "show %s" % word
    return None
