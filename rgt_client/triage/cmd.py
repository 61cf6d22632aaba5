"""`rgt-client triage LOG [--exit-code N] [--json]`: the box agent's own rules and
diagnosis, run here on a log the user already has (a pulled log, a run rgt did not launch).
Same report, same text, same exit codes as `rgt-agent triage` on the box.
"""
from __future__ import annotations

import json

import click

from rgt_client import exitcodes
from rgt_client.errors import ClientError


@click.command("triage")
@click.argument("log", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--exit-code", "exit_code", type=int, default=None,
              help="The command's exit code, if known (137 = SIGKILL, ...).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--rules", "rules_file", type=click.Path(dir_okay=False), default=None,
              help="Extra [[rule]] entries: a TOML file with [[rule]] tables, or a JSON list.")
@click.option("--progress-pattern", default=None,
              help="Regex with named groups done/total for progress lines.")
@click.option("--engine", type=click.Choice(["auto", "grep", "python"]), default="auto",
              show_default=True, help="Candidate-line search: grep -F for big files, or python.")
@click.option("--workdir", default=None,
              help="The job's working directory ON THIS MACHINE: its filesystem is checked.")
@click.option("--path", "paths", multiple=True, metavar="P",
              help="Also check the filesystem of P on this machine (repeatable): tells a full "
                   "disk from full inodes.")
def triage(log: str, exit_code: int | None, as_json: bool, rules_file: str | None,
           progress_pattern: str | None, engine: str, workdir: str | None,
           paths: tuple[str, ...]) -> None:
    """Classes found in LOG (with line numbers) and the cause, with its remediation, the line
    that decided it and the matches it overruled (why an earlier error, a warning or a
    launcher's report did not decide). LOG may be - for stdin (`kubectl logs POD |
    rgt-client triage -`).

    Exit codes: 0 no failure found (or --exit-code 0: warnings only), 4 a failure (the cause
    is printed), 2 bad input.
    """
    from boxagent.api import AgentError, triage_log, triage_text
    try:
        # This machine's disks say nothing about the box's: only the paths a person names.
        rep = triage_log(log, exit_code, rules_file, engine, progress_pattern, workdir, list(paths))
    except AgentError as exc:
        code = exitcodes.USAGE if exc.code == 2 else exitcodes.ERROR
        raise ClientError(exc.message, exc.hint, code)
    if as_json:
        click.echo(json.dumps(rep, indent=2, sort_keys=True))
    else:   # the report quotes the log's lines: a pulled log is box text (textsafe)
        from rgt_client.textsafe import safe
        click.echo(safe(triage_text(rep).rstrip("\n")))
    if rep["cause"] is not None:
        raise SystemExit(exitcodes.RUN_FAILED)


COMMANDS: list = [triage]
