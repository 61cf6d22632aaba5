"""install run attach (and the helpers the other command modules share): thin click commands
over plain functions (install.py, ops.py, jobfile.py). Data to stdout, diagnostics to
stderr, exit codes from exitcodes.py."""
from __future__ import annotations

import json
import shlex
from typing import Any, Callable

import click

from rgt_client import exitcodes, hosts
from rgt_client.errors import ClientError
from rgt_client.transport import Target

COMMANDS: list = []


class Duration(click.ParamType):
    name = "DURATION"

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        from boxagent.base.units import parse_duration
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DURATION = Duration()


def host_options(fn: Callable) -> Callable:
    fn = click.option("--python", "python", metavar="PATH",
                      help="Python on the box (default: what install used, else python3).")(fn)
    return click.option("--home", metavar="DIR",
                        help="RGT_HOME on the box (default: what install used, else ~/.rgt).")(fn)


def target(ctx: click.Context, host: str, home: str | None = None, python: str | None = None) -> Target:
    return hosts.target_for(host, ctx.obj.get("ssh_config"), home, python)


def _register(cmd: click.Command) -> click.Command:
    COMMANDS.append(cmd)
    return cmd


def q(word: str) -> str:
    return shlex.quote(word)


def err(text: str) -> None:
    click.echo(text, err=True)


# --- install ---------------------------------------------------------------------------------

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
@click.pass_context
def install(ctx: click.Context, host: str, profile: str | None, home: str | None, python: str | None,
            deps: bool, deps_timeout: float, notify_file: str | None, sample_every: float | None) -> None:
    """Install or upgrade the agent on HOST and (re)start it. Idempotent."""
    from rgt_client.install import InstallOptions, install as do_install
    from rgt_client.render_box import box_summary
    t = target(ctx, host, home, python)
    rep = do_install(t, InstallOptions(profile=profile, deps=deps, deps_timeout_s=deps_timeout,
                                        notify_file=notify_file, sample_every=sample_every), say=err)
    up, status = rep.upload, rep.start.get("status") or {}
    agent = status.get("agent") or {}
    click.echo("rgt agent %s on %s: %s, sha256 %s" % (
        agent.get("version") or "?", host,
        "installed" if up.get("replaced") else "unchanged", rep.sha256[:16]))
    click.echo("  home     %s" % up.get("home"))
    for line in box_summary(up):
        click.echo(line)
    click.echo("  profile  %s (%s)" % (rep.profile.get("name"), rep.profile_reason))
    click.echo("  daemon   %s" % ("running, pid %s" % agent.get("pid") if agent.get("running") else "started"))
    for w in rep.warnings:
        click.echo("  warning  %s" % w)
    _first_contact(rep.profile)
    click.echo("next: rgt-client run %s JOB.toml    (or: rgt-client status %s)" % (q(host), q(host)))


def _first_contact(profile: dict[str, Any]) -> None:
    try:
        from rgt_client.profiles import first_contact
    except ImportError:
        return
    try:
        text = first_contact(profile)
    except Exception:  # noqa: BLE001 - a profile text problem must not fail a finished install
        return
    if text:
        click.echo("")
        click.echo(text)


# --- run / attach -----------------------------------------------------------------------------

@_register
@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("host")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--name", help="Run name for a one-stage job (then CMD follows --).")
@click.option("--workdir", metavar="DIR", help="Working directory on the box for a one-stage job.")
@click.option("--timeout", "stage_timeout", metavar="DURATION", help="Bound for the one stage.")
@click.option("--json", "as_json", is_flag=True, help="Print the agent's answer as JSON.")
@host_options
@click.pass_context
def run(ctx: click.Context, host: str, args: tuple[str, ...], name: str | None, workdir: str | None,
        stage_timeout: str | None, as_json: bool, home: str | None, python: str | None) -> None:
    """Submit a job: `run HOST JOB.toml`, or `run HOST --name N [--workdir D] -- CMD...`."""
    from rgt_client import jobfile
    if name:
        job = jobfile.command_job(name, list(args), workdir, stage_timeout)
        jobfile.validate(job, "job")
    elif len(args) == 1:
        job = jobfile.load_job(args[0])
    else:
        raise ClientError("run needs a job file, or --name and a command after --",
                          "rgt-client run HOST job.toml   |   rgt-client run HOST --name N -- python train.py",
                          exitcodes.USAGE)
    _submit(ctx, host, job, as_json, home, python)


def _submit(ctx: click.Context, host: str, job: dict[str, Any], as_json: bool, home: str | None,
            python: str | None) -> None:
    from rgt_client.ops import submit
    out = submit(target(ctx, host, home, python), job)
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    name = out.get("run") or job.get("name")
    if out.get("duplicate"):
        click.echo("run %s is already on %s with this exact job (%s): nothing changed" % (name, host, out.get("state")))
    else:
        click.echo("submitted run %s to %s (%s)" % (name, host, out.get("state") or "queued"))
    click.echo("  check:  rgt-client status %s --run %s" % (q(host), q(name)))
    click.echo("  follow: rgt-client watch %s %s" % (q(host), q(name)))
    click.echo("  logs:   rgt-client logs %s %s --follow" % (q(host), q(name)))


@_register
@click.command()
@click.argument("host")
@click.option("--name", required=True, help="Run name for the attached job.")
@click.option("--pid", type=int, help="Wait for this process to exit.")
@click.option("--log", "log", metavar="FILE", help="Watch this log file on the box...")
@click.option("--done", metavar="PATTERN", help="...until this regex appears (success).")
@click.option("--fail", metavar="PATTERN", help="...or this regex appears (failure).")
@click.option("--file", "file", metavar="PATH", help="Wait until this file exists and is non-empty.")
@click.option("--timeout", "wait_timeout", metavar="DURATION", help="Give the wait a bound (default 3 days).")
@click.option("--workdir", metavar="DIR", help="Working directory the paths are relative to.")
@click.option("--json", "as_json", is_flag=True)
@host_options
@click.pass_context
def attach(ctx: click.Context, host: str, name: str, pid: int | None, log: str | None, done: str | None,
           fail: str | None, file: str | None, wait_timeout: str | None, workdir: str | None,
           as_json: bool, home: str | None, python: str | None) -> None:
    """Watch a training started before rgt (a `wait` stage): --pid P | --log FILE --done PATTERN."""
    from rgt_client import jobfile
    job = jobfile.wait_job(name, pid, log, done, fail, file, wait_timeout, workdir)
    jobfile.validate(job, "attach")
    _submit(ctx, host, job, as_json, home, python)

