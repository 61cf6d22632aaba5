"""run attach logs cancel resume handbook: thin click commands over plain functions (jobfile.py,
submit.py, logview.py, follow.py, status/fetch.py).
Data to stdout, diagnostics to stderr, exit codes from exitcodes.py, options from options.py."""
from __future__ import annotations

import json
import re
import shlex
import sys
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
    from rgt_client.jobs import jobfile
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
    from rgt_client.jobs.submit import submit
    from rgt_client.textsafe import s
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
    from rgt_client.textsafe import s
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
    from rgt_client.jobs import jobfile
    job = jobfile.wait_job(name, pid, log, done, fail, file, wait_timeout, workdir)
    jobfile.validate(job, "attach")
    _submit(ctx, host, job, as_json, home, python)


# --- cancel / resume / handbook / logs --------------------------------------------------------

def _run_cmd(ctx: click.Context, host: str, args: list[str], run: str, home: str | None,
             python: str | None, writes: bool = False) -> None:
    """An agent command about RUN whose text answer is shown as it is (sanitised: box text)."""
    from rgt_client.box.agentcall import client_hint
    from rgt_client.status.fetch import run_command
    from rgt_client.textsafe import safe
    t = options.target(ctx, host, home, python)
    if writes:
        options.say_home(t)
    ans = run_command(t, args, run, args[0])
    text = safe(ans.text)
    # cancel/resume answer in the agent's words (`rgt-agent start`); the handbook's commands
    # are meant for the box, as written
    click.echo(client_hint(text, host) if writes else text, nl=False)
    if writes and ans.code == exitcodes.AGENT_DOWN and text.strip():
        # The request is queued and the agent's text says so, and how to start the daemon: one
        # message per action. "Error: cancel on HOST failed: exit 3" after it contradicted it
        # (the cancel was honoured when the daemon came back). The exit code still says it.
        ctx.exit(ans.code)
    if ans.rc != 0:
        raise ans.error(args[0])
    ctx.exit(ans.code)


def _simple(name: str, doc: str, writes: bool) -> click.Command:
    @click.command(name=name, help=doc)
    @click.argument("host")
    @click.argument("run")
    @host_options
    @click.pass_context
    def cmd(ctx: click.Context, host: str, run: str, home: str | None, python: str | None) -> None:
        _run_cmd(ctx, host, [name, run], run, home, python, writes)
    return _register(cmd)


@_register
@click.command()
@click.argument("host")
@click.argument("run")
@click.option("--group", "kind", flag_value="group", help="RUN names a sweep: cancel every run of it.")
@click.option("--run", "kind", flag_value="run", help="RUN names one run (where a sweep has the same name).")
@host_options
@click.pass_context
def cancel(ctx: click.Context, host: str, run: str, kind: str | None, home: str | None, python: str | None) -> None:
    """Cancel RUN on HOST: TERM its stage's process group, KILL after a grace; no marker. A sweep's
    name cancels all its runs; a name that is both a run and a sweep needs --group or --run."""
    _run_cmd(ctx, host, ["cancel", run] + (["--" + kind] if kind else []), run, home, python, True)


resume = _simple("resume", "Resume an interrupted or failed RUN from its last marker.", True)
handbook = _simple("handbook", "Print RUN's HANDBOOK.md: the exact commands to check, resume and pull it.", False)


@_register
@click.command()
@click.argument("host")
@click.argument("run")
@click.option("--stage", metavar="S", help="Only this stage (default: all, latest attempt).")
@click.option("-n", "lines", type=click.IntRange(min=0), default=50, show_default=True,
              help="Last N lines (0: all, as the agent's own `logs -n 0`).")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the run ends (bounded by --max-wait).")
@click.option("--max-wait", type=DURATION, default="1h", show_default=True, help="Bound for --follow.")
@click.option("--raw", is_flag=True, help="The log's bytes as they are (colours, escapes); default on a "
                                          "terminal: control characters shown as visible escapes.")
@host_options
@click.pass_context
def logs(ctx: click.Context, host: str, run: str, stage: str | None, lines: int, follow: bool,
         max_wait: float, raw: bool, home: str | None, python: str | None) -> None:
    """Print the last lines of RUN's stage logs (a tqdm bar's redraws count as one line: the last);
    --follow streams them over one ssh connection."""
    from rgt_client.jobs.logview import LogSink, print_logs
    t = options.target(ctx, host, home, python)
    sink = LogSink(raw=raw or not sys.stdout.isatty())
    if not follow:
        ctx.exit(print_logs(t, run, stage, lines, sink))
    from rgt_client.jobs.follow import follow as do_follow
    ctx.exit(do_follow(t, run, stage or "", lines, max_wait, err, sink))
