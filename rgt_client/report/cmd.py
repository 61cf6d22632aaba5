"""`rgt-client report HOST RUN [-o FILE] [--pulled DIR]`: one self-contained HTML file about a run.

One ssh round trip (`rgt-agent report-data RUN`: the run, its history, its events), rendered
here. Works for a finished run, a running one, and a run whose agent died (the agent command
reads files only).
"""
from __future__ import annotations

import json
import os
import re
from typing import Any

import click

from boxagent.api import box_json
from rgt_client import DISTRIBUTION, exitcodes
from rgt_client.options import host_options, target
from rgt_client.errors import ClientError
from rgt_client.box.transport import Target

COMMANDS: list = []
MAX_DOC_BYTES = 64 << 20     # the agent bounds its answer (~4 MB); this bounds a broken or hostile one
SCHEMA = "rgt.report/1"


def fetch(target: Target, run: str, timeout: float = 180) -> dict[str, Any]:
    from rgt_client.status.fetch import run_command
    res = run_command(target, ["report-data", run], run, "report-data", timeout=timeout, max_out=MAX_DOC_BYTES)
    if res.rc != 0:
        if "invalid choice" in (res.message or ""):
            raise ClientError("the agent on %s is too old to make reports" % target.host,
                              "upgrade it: rgt-client install %s" % target.host, exitcodes.USAGE)
        err = res.error("report-data")
        err.hint = err.hint or "rgt-client status %s" % target.host
        raise err
    try:
        doc = box_json(res.text)
    except ValueError as exc:
        raise ClientError("the agent on %s sent report data that is not JSON: %s" % (target.host, exc),
                          "upgrade the agent: rgt-client install %s" % target.host)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ClientError("the agent on %s sent report data of another format" % target.host,
                          "upgrade both ends: pip install -U %s (or ./install.sh in your checkout); rgt-client install %s"
                          % (DISTRIBUTION, target.host))
    return doc


def read_verified(pulled: str | None) -> dict[str, Any] | None:
    """PULL_VERIFIED.json that `rgt-client verify` wrote into the pull's folder."""
    if not pulled:
        return None
    from rgt_client.pull.verify import VERIFIED_NAME
    path = os.path.join(pulled, VERIFIED_NAME)
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(1 << 20).decode("utf-8"))
    except FileNotFoundError:
        raise ClientError("%s has no %s" % (pulled, VERIFIED_NAME),
                          "verify the pull first: rgt-client verify %s" % pulled, exitcodes.USAGE)
    except (OSError, ValueError) as exc:
        raise ClientError("cannot read %s: %s" % (path, exc), "run rgt-client verify again", exitcodes.USAGE)
    return data if isinstance(data, dict) else None


def default_path(host: str, run: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", "%s-%s" % (host, run)).strip("._") or "run"
    return "rgt-report-%s.html" % safe


def write_report(target: Target, run: str, out: str | None, pulled: str | None = None) -> str:
    """Fetch, render, write atomically; the path written."""
    from boxagent.api import atomic_write_text
    from rgt_client.report.page import render
    verified = read_verified(pulled)
    doc = fetch(target, run)
    path = os.path.abspath(out or default_path(target.host, run))
    try:
        atomic_write_text(path, render(doc, verified))
    except OSError as exc:
        raise ClientError("cannot write %s: %s" % (path, exc.strerror or exc), "pass -o with a writable path",
                          exitcodes.USAGE)
    return path


@COMMANDS.append
@click.command()
@click.argument("host")
@click.argument("run")
@click.option("-o", "--output", "out", metavar="FILE", type=click.Path(dir_okay=False),
              help="Where to write the HTML (default: ./rgt-report-HOST-RUN.html).")
@click.option("--pulled", metavar="DIR", type=click.Path(file_okay=False),
              help="The folder you pulled the run into: its PULL_VERIFIED.json goes in the report.")
@host_options
@click.pass_context
def report(ctx: click.Context, host: str, run: str, out: str | None, pulled: str | None,
           home: str | None, python: str | None) -> None:
    """One HTML file about RUN: stage timeline, events, GPU/memory/disk charts, metrics.

    Self-contained (inline SVG and CSS, no script, nothing from the network): open it offline
    or send it as a mail attachment. Works for finished and running runs, and from the files of
    a box whose agent died."""
    path = write_report(target(ctx, host, home, python), run, out, pulled)
    click.echo(path)
