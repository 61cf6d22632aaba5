"""install: a thin click command over install/bootstrap.py; what it prints is install/render.py's.
Data to stdout, diagnostics to stderr, exit codes from exitcodes.py, options from options.py."""
from __future__ import annotations

import shlex
from typing import Any

import click

from rgt_client import options
from rgt_client.options import DURATION, err, host_options

COMMANDS: list = []


def _register(cmd: click.Command) -> click.Command:
    COMMANDS.append(cmd)
    return cmd


def q(word: str) -> str:
    return shlex.quote(word)


@_register
@click.command()
@click.argument("host")
@click.option("--profile", metavar="NAME|FILE", help="Platform profile (default: detected from the box).")
@host_options
@click.option("--deps/--no-deps", default=False, show_default=True,
              help="pip install --user psutil requests watchdog on the box (time-bounded; never fails the install).")
@click.option("--deps-timeout", type=DURATION, default="120s", show_default=True, help="Bound for --deps.")
@click.option("--notify", "notify_file", type=click.Path(dir_okay=False), help="Notification TOML to send.")
@click.option("--sample-every", type=DURATION, help="Health sampling interval on the box (default 10s).")
@click.option("--max-parallel", type=click.IntRange(min=1), metavar="N",
              help="Runs with gpus = 0 at once, beside the GPU runs (default: the box's GPU count, at least 1).")
@options.cost_options
@click.pass_context
def install(ctx: click.Context, host: str, profile: str | None, home: str | None, python: str | None,
            deps: bool, deps_timeout: float, notify_file: str | None, sample_every: float | None,
            max_parallel: int | None, **cost: Any) -> None:
    """Install or upgrade the agent on HOST and (re)start it. Idempotent. The cost flags change
    only what they name; the box keeps the others (docs/cost.md)."""
    from rgt_client.cost.flags import cost_patch
    from rgt_client.install.bootstrap import InstallOptions, install as do_install
    from rgt_client.install.render import install_summary
    patch = cost_patch(**cost)                       # a bad value stops here, before the box is touched
    t = options.target(ctx, host, home, python)
    rep = do_install(t, InstallOptions(profile=profile, deps=deps, deps_timeout_s=deps_timeout,
                                        notify_file=notify_file, sample_every=sample_every, cost=patch,
                                        max_parallel=max_parallel), say=err)
    for line in install_summary(rep):
        click.echo(line)
    _first_contact(rep.profile)
    click.echo("next: rgt-client run %s JOB.toml    (or: rgt-client status %s)" % (q(host), q(host)))


def _first_contact(profile: dict[str, Any]) -> None:
    from rgt_client.profiles.catalog import first_contact
    try:
        text = first_contact(profile)
    except Exception:  # noqa: BLE001 - a profile text problem must not fail a finished install
        return
    if text:
        click.echo("")
        click.echo(text)
