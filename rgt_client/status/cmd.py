"""status watch patrol: thin click commands over fetch.py/poll.py, text from render*.py.
Data to stdout; a host's error to stderr (patrol's one line per host is its data)."""
from __future__ import annotations

import json
import sys

import click

from rgt_client import exitcodes, options
from rgt_client.options import DURATION, err, host_options

COMMANDS: list = []


def _register(cmd: click.Command) -> click.Command:
    COMMANDS.append(cmd)
    return cmd


@_register
@click.command()
@click.argument("hosts", nargs=-1, required=True)
@options.json_flag("The agent's status.json structure plus a `client` block.")
@click.option("--run", "run_name", metavar="NAME", help="Only this run.")
@click.option("--all", "show_all", is_flag=True, help="Every run (default: the active ones and the last 5 ended).")
@click.option("--events", type=click.IntRange(min=0), metavar="N", help="Include the last N events.")
@host_options
@click.pass_context
def status(ctx: click.Context, hosts: tuple[str, ...], as_json: bool, run_name: str | None, show_all: bool,
           events: int | None, home: str | None, python: str | None) -> None:
    """Status of HOST(s): one ssh round trip per host, hosts in parallel."""
    from rgt_client.box.agentcall import status_events
    from rgt_client.status.fetch import fetch_many
    # The renderer is imported while the box's answer is on its way (prefetch.py started the
    # call), not after it came: after it, its import was part of every status's wait.
    from rgt_client.status.render import error_lines, render_status
    targets = [options.target(ctx, h, home, python) for h in hosts]
    results = fetch_many(targets, status_events(events, as_json), run_name, all_runs=show_all)
    if as_json:   # streamed: json.dumps of a 4 MiB answer held ~140 MB of text at once
        data = [hs.as_json() for hs in results]
        out = sys.stdout
        json.dump(data[0] if len(data) == 1 else data, out, indent=1, ensure_ascii=False)
        out.write("\n")
    else:
        shown = 0
        for hs in results:
            if hs.error is not None:
                for line in error_lines(hs.target.host, hs.error):
                    err(line)
                continue
            if shown:
                click.echo("")
            shown += 1
            click.echo(render_status(hs.status or {}, dict(hs.client, show_events=events is not None,
                                                           show_all=show_all)))
    ctx.exit(max(hs.code for hs in results))


@_register
@click.command()
@click.argument("host")
@click.argument("run")
@click.option("--every", type=DURATION, default="60s", show_default=True,
              help="At most this often, a line with the running stage's progress and ETA (on a terminal, "
                   "redrawn in place; piped, only when it changes); the time between checks of an agent too "
                   "old to stream its events.")
@click.option("--max-wait", type=DURATION, default="12h", show_default=True, help="Give up after this long.")
@host_options
@click.pass_context
def watch(ctx: click.Context, host: str, run: str, every: float, max_wait: float, home: str | None,
          python: str | None) -> None:
    """Follow RUN until it ends: the box's events as they land, over one connection (an older
    agent is polled every --every): exit 0 succeeded, 4 failed, 6 gave up."""
    from rgt_client.status.render_poll import WatchPrinter
    from rgt_client.status.watchstream import watch as do_watch
    tty = sys.stdout.isatty()
    show = WatchPrinter(host, run, tty)
    ctx.exit(do_watch(options.target(ctx, host, home, python), run, every, max_wait, show))


@_register
@click.command()
@click.argument("hosts", nargs=-1, required=True)
@click.option("--since", type=DURATION, default="24h", show_default=True,
              help="A failed or warned run counts while it ended within this window.")
@options.json_flag("One JSON object per host, one per line.")
@host_options
@click.pass_context
def patrol(ctx: click.Context, hosts: tuple[str, ...], since: float, as_json: bool, home: str | None,
           python: str | None) -> None:
    """Exactly one line per HOST and an exit code from a fixed decision table (for cron/agents)."""
    from rgt_client.status.fetch import fetch_many
    from rgt_client.status.poll import patrol_exit, patrol_verdict
    from rgt_client.status.render_poll import patrol_detail
    results = fetch_many([options.target(ctx, h, home, python) for h in hosts], events=0)
    codes = []
    width = max(len(h) for h in hosts)
    for hs in results:
        v = patrol_verdict(hs, since)
        codes.append(v.code)
        detail = " ".join(patrol_detail(v, hs.target.host).split())  # exactly one line, always
        if as_json:
            click.echo(json.dumps({"host": hs.target.host, "verdict": v.word, "exit_code": v.code, "detail": detail}))
        else:
            click.echo("%-*s  %-11s  %s" % (width, hs.target.host, v.word, detail))
    ctx.exit(patrol_exit(codes))


