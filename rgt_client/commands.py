"""install run attach: thin click commands over plain functions (install.py, ops.py, jobfile.py).
Data to stdout, diagnostics to stderr, exit codes from exitcodes.py, options from options.py."""
from __future__ import annotations

import json
import re
import shlex
from typing import Any

import click

from rgt_client import exitcodes, options
from rgt_client.errors import ClientError
from rgt_client.options import DURATION, err, host_options

COMMANDS: list = []


def _register(cmd: click.Command) -> click.Command:
    COMMANDS.append(cmd)
    return cmd


def q(word: str) -> str:
    return shlex.quote(word)


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
@click.option("--max-parallel", type=click.IntRange(min=1), metavar="N",
              help="Runs with gpus = 0 at once, beside the GPU runs (default: the box's GPU count, at least 1).")
@options.cost_options
@click.pass_context
def install(ctx: click.Context, host: str, profile: str | None, home: str | None, python: str | None,
            deps: bool, deps_timeout: float, notify_file: str | None, sample_every: float | None,
            max_parallel: int | None, **cost: str | None) -> None:
    """Install or upgrade the agent on HOST and (re)start it. Idempotent. The cost flags change
    only what they name; the box keeps the others (docs/cost.md)."""
    from rgt_client.costopts import cost_patch
    from rgt_client.install import InstallOptions, install as do_install
    from rgt_client.render_box import install_summary
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
    from rgt_client.profiles import first_contact
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
@click.option("--replace", is_flag=True,
              help="Reuse the name of a finished run with a changed job (the old run is archived on the box).")
@options.json_flag()
@host_options
@click.pass_context
def run(ctx: click.Context, host: str, args: tuple[str, ...], name: str | None, workdir: str | None,
        stage_timeout: str | None, replace: bool, as_json: bool, home: str | None, python: str | None) -> None:
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
    _submit(ctx, host, job, as_json, home, python, replace, args[0] if len(args) == 1 and not name else None)


def _submit(ctx: click.Context, host: str, job: dict[str, Any], as_json: bool, home: str | None,
            python: str | None, replace: bool = False, job_file: str | None = None) -> None:
    from rgt_client.ops import submit
    from rgt_client.render_run import s
    t = options.target(ctx, host, home, python)
    options.say_home(t)
    try:
        out, notes = submit(t, job, replace=replace)
    except ClientError as exc:
        exc.hint = with_job_file(exc.hint, host, job_file)
        raise
    for note in notes:
        err("Note: %s" % s(note))
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    name = str(job.get("name"))   # ours, validated: the box's echo of it is not needed
    state = s(out.get("state") or "queued")
    if isinstance(out.get("runs"), list):
        _sweep_lines(host, name, out["runs"])
        return
    if out.get("duplicate"):
        click.echo("run %s is already on %s with this exact job (%s): nothing changed" % (name, host, state))
        if out.get("state") in ("failed", "cancelled", "interrupted"):
            click.echo("  resume: rgt-client resume %s %s" % (q(host), q(name)))
    else:
        click.echo("submitted run %s to %s (%s)%s" % (name, host, state, ", replacing the old run" if replace else ""))
    click.echo("  check:  rgt-client status %s --run %s" % (q(host), q(name)))
    click.echo("  follow: rgt-client watch %s %s" % (q(host), q(name)))
    click.echo("  logs:   rgt-client logs %s %s --follow" % (q(host), q(name)))


def with_job_file(hint: str | None, host: str, job_file: str | None) -> str | None:
    """The agent's "submit with --replace" as the command to type, with this job's file."""
    if not hint or not job_file or "--replace" not in hint:
        return hint
    return re.sub(r"submit it again with --replace \(`[^`]*`\)|submit with --replace",
                  "`rgt-client run %s %s --replace`" % (q(host), q(job_file)), hint)


def _sweep_lines(host: str, group: str, runs: list[Any]) -> None:
    """A [matrix] job became runs GROUP-1..N on the box."""
    from rgt_client.render_run import s
    fresh = [s(r.get("run")) for r in runs if isinstance(r, dict) and not r.get("duplicate")]
    click.echo("submitted sweep %s to %s: %d run(s)%s" % (group, host, len(fresh),
                                                           " (%s .. %s)" % (fresh[0], fresh[-1]) if fresh else ""))
    if len(fresh) < len(runs):
        click.echo("  %d identical run(s) were already there: nothing changed for them" % (len(runs) - len(fresh)))
    click.echo("  check:  rgt-client status %s" % q(host))
    click.echo("  cancel: rgt-client cancel %s %s      # every run of the sweep" % (q(host), q(group)))


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
@options.json_flag()
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

