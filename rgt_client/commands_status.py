"""status logs cancel resume handbook watch patrol: thin click commands over ops.py/poll.py."""
from __future__ import annotations

import json
import sys

import click

from rgt_client import exitcodes
from rgt_client.commands import DURATION, err, host_options, target

COMMANDS: list = []


def _register(cmd: click.Command) -> click.Command:
    COMMANDS.append(cmd)
    return cmd


@_register
@click.command()
@click.argument("hosts", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="The agent's status.json structure plus a `client` block.")
@click.option("--run", "run_name", metavar="NAME", help="Only this run.")
@click.option("--events", type=int, metavar="N", help="Include the last N events.")
@host_options
@click.pass_context
def status(ctx: click.Context, hosts: tuple[str, ...], as_json: bool, run_name: str | None,
           events: int | None, home: str | None, python: str | None) -> None:
    """Status of HOST(s): one ssh round trip per host, hosts in parallel."""
    from rgt_client.ops import fetch_many, only_run
    from rgt_client.render import render_status
    results = fetch_many([target(ctx, h, home, python) for h in hosts], events)
    if run_name:
        for hs in results:
            only_run(hs, run_name)
    if as_json:
        data = [hs.as_json() for hs in results]
        click.echo(json.dumps(data[0] if len(data) == 1 else data, indent=1, ensure_ascii=False))
    else:
        for i, hs in enumerate(results):
            if i:
                click.echo("")
            if hs.error is not None:
                click.echo("%s · Error: %s" % (hs.target.host, hs.error.message))
                if hs.error.hint:
                    click.echo("  Hint: %s" % hs.error.hint)
                continue
            click.echo(render_status(hs.status or {}, dict(hs.client, show_events=events is not None)))
    ctx.exit(max(hs.code for hs in results))


def _run_cmd(ctx: click.Context, host: str, args: list[str], run: str, home: str | None,
             python: str | None) -> None:
    from rgt_client.ops import agent_run_command
    res = agent_run_command(target(ctx, host, home, python), args, run)
    sys.stdout.buffer.write(res.stdout)
    sys.stdout.flush()
    if res.stderr:
        sys.stderr.write(res.err)
    ctx.exit(res.rc if res.rc in (0, 1, 2, 3, 4) else exitcodes.ERROR)


def _simple(name: str, doc: str) -> click.Command:
    @click.command(name=name, help=doc)
    @click.argument("host")
    @click.argument("run")
    @host_options
    @click.pass_context
    def cmd(ctx: click.Context, host: str, run: str, home: str | None, python: str | None) -> None:
        _run_cmd(ctx, host, [name, run], run, home, python)
    return _register(cmd)


cancel = _simple("cancel", "Cancel RUN on HOST: TERM its stage's process group, KILL after a grace; no marker.")
resume = _simple("resume", "Resume an interrupted or failed RUN from its last marker.")
handbook = _simple("handbook", "Print RUN's HANDBOOK.md: the exact commands to check, resume and pull it.")


@_register
@click.command()
@click.argument("host")
@click.argument("run")
@click.option("--stage", metavar="S", help="Only this stage (default: all, latest attempt).")
@click.option("-n", "lines", type=int, default=50, show_default=True, help="Last N lines.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the run ends (bounded by --max-wait).")
@click.option("--max-wait", type=DURATION, default="1h", show_default=True, help="Bound for --follow.")
@host_options
@click.pass_context
def logs(ctx: click.Context, host: str, run: str, stage: str | None, lines: int, follow: bool,
         max_wait: float, home: str | None, python: str | None) -> None:
    """Print the logs of RUN's stages; --follow streams them over one ssh connection."""
    t = target(ctx, host, home, python)
    if not follow:
        args = ["logs", run, "-n", str(lines)] + (["--stage", stage] if stage else [])
        _run_cmd(ctx, host, args, run, home, python)
        return
    from rgt_client.follow import follow
    ctx.exit(follow(t, run, stage or "", lines, max_wait, err))


@_register
@click.command()
@click.argument("host")
@click.argument("run")
@click.option("--every", type=DURATION, default="60s", show_default=True, help="Time between checks.")
@click.option("--max-wait", type=DURATION, default="12h", show_default=True, help="Give up after this long.")
@host_options
@click.pass_context
def watch(ctx: click.Context, host: str, run: str, every: float, max_wait: float, home: str | None,
          python: str | None) -> None:
    """Poll RUN until it ends (one short ssh per check): exit 0 succeeded, 4 failed, 6 gave up."""
    from rgt_client.poll import watch as do_watch
    ctx.exit(do_watch(target(ctx, host, home, python), run, every, max_wait, click.echo))


@_register
@click.command()
@click.argument("hosts", nargs=-1, required=True)
@click.option("--since", type=DURATION, default="24h", show_default=True,
              help="A failed run counts while it ended within this window.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per host, one per line.")
@host_options
@click.pass_context
def patrol(ctx: click.Context, hosts: tuple[str, ...], since: float, as_json: bool, home: str | None,
           python: str | None) -> None:
    """Exactly one line per HOST and an exit code from a fixed decision table (for cron/agents)."""
    from rgt_client.ops import fetch_many
    from rgt_client.poll import patrol_exit, patrol_verdict
    results = fetch_many([target(ctx, h, home, python) for h in hosts], events=0)
    codes = []
    width = max(len(h) for h in hosts)
    for hs in results:
        word, code, detail = patrol_verdict(hs, since)
        codes.append(code)
        detail = " ".join(detail.split())  # exactly one line, whatever the messages hold
        if as_json:
            click.echo(json.dumps({"host": hs.target.host, "verdict": word, "exit_code": code, "detail": detail}))
        else:
            click.echo("%-*s  %-11s  %s" % (width, hs.target.host, word, detail))
    ctx.exit(patrol_exit(codes))

