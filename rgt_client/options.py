"""Click options defined once and reused by every command module (pip-tools' options.py), and the
one way a command turns HOST + --home + --python into a Target.

A flag spelt twice drifts: two `--home` helps said different things, and a hint could name an
option one command had and another lacked. Every command takes its shared options from here.
"""
from __future__ import annotations

from typing import Any, Callable

import click

from rgt_client.box.transport import Target

F = Callable[..., Any]


class Duration(click.ParamType):
    """`90s`, `15m`, `12h`, `3d` (the agent's own parser: the same words on both sides)."""
    name = "DURATION"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        from boxagent.api import parse_duration
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DURATION = Duration()

home = click.option("--home", metavar="DIR",
                    help="RGT_HOME on the box (default: what install used, else ~/.rgt; "
                         "for `local`: $RGT_HOME, else ~/.rgt).")
python = click.option("--python", "python", metavar="PATH",
                      help="Python on the box (default: what install used, else python3).")


def host_options(fn: F) -> F:
    """--home and --python: every command that reaches a box takes both."""
    return home(python(fn))


def json_flag(help_text: str = "Print the agent's answer as JSON.") -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=help_text)


def cost_options(fn: F) -> F:
    """install's cost flags (docs/cost.md), as text: cost/flags.py's cost_patch reads them into the
    patch the box merges, and says what is wrong with a bad one (Error + Hint, exit 2)."""
    for flag, name, meta, text in reversed((
            ("--price", "price", "P", "What the box costs per hour (0 removes it; no price: hours only)."),
            ("--gpu-price", "gpu_price", "P",
             "What one GPU of a Ray cluster costs per hour: a Ray run's price per GPU hour (default: --price / "
             "this box's GPUs; 0 removes it)."),
            ("--currency", "currency", "C", "3-letter code of the price and budget (default USD)."),
            ("--idle-alert-after", "idle_alert_after", "DURATION",
             "Warn when nothing runs and the GPUs idle this long (default 30m on rented boxes; 0 = off)."),
            ("--budget", "budget", "B", "Warn at 80% and 100% of this spend, and at an ETA past it (0 removes it)."),
            ("--stop-deadline", "stop_deadline", "UTC|DURATION",
             "When the platform stops/releases the box itself, e.g. 2026-12-01T08:00Z or 12h (warned 24h, 2h before)."))):
        fn = click.option(flag, name, metavar=meta, help=text)(fn)
    return fn


ssh_config = click.option("--ssh-config", envvar="RGT_SSH_CONFIG", type=click.Path(dir_okay=False),
                          help="ssh config file passed as -F to every ssh call (env RGT_SSH_CONFIG).")
debug = click.option("--debug", is_flag=True, help="Show tracebacks.")


def target(ctx: click.Context, host: str, home_dir: str | None = None, py: str | None = None) -> Target:
    """The one way a command builds its Target (hosts.target_for decides the home and python)."""
    from rgt_client.box.hosts import target_for
    return target_for(host, (ctx.obj or {}).get("ssh_config"), home_dir, py)


def say_home(t: Target) -> None:
    """Every command that writes on a box says which home it wrote to, and why that one (stderr):
    a `local` command that silently reached another agent's home is how runs got lost."""
    click.echo("%s: home %s (%s)" % (t.host, t.home_shown(), t.home_from), err=True)


def err(text: str) -> None:
    click.echo(text, err=True)
