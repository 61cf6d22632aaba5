"""`rgt-client notify-set HOST FILE` and `rgt-client notify-test HOST`.

The TOML file of `[[notify]]` tables is parsed and validated here, before the box is touched,
then crosses ssh on stdin as JSON (never in argv: `ps` on either end would show the tokens).
`notify-test` makes the BOX send through each notifier, so it proves the box's own route
(proxies, mirrors, firewalls) and prints one line per notifier.
"""
from __future__ import annotations

import json
import sys
from typing import Any

import click

from rgt_client import exitcodes, options
from rgt_client.box import agentcall
from rgt_client.errors import ClientError
from rgt_client.textsafe import s

AGENT_TIMEOUT_S = 120.0


def _toml() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
        return tomllib
    import tomli  # the client's dependency on Python 3.10
    return tomli


def load_notify_file(path: str, raw: bytes | None = None) -> dict[str, Any]:
    """Parse and validate a `[[notify]]` TOML file; return the secrets.json form {"notify": [...]}.

    Raises ClientError(USAGE) naming the file and what to fix. Schemes only Apprise speaks pass
    here (the BOX decides whether it can import Apprise); everything else is checked fully.
    `raw`: the file's bytes, already read by the caller (the MCP server reads a notify file once,
    by its checks; opening it again by path could open another file).
    """
    from boxagent.api import AgentError, check_notifiers
    try:
        if raw is not None:
            data = _toml().loads(raw.decode("utf-8"))
        else:
            with open(path, "rb") as fh:
                data = _toml().load(fh)
    except UnicodeDecodeError as exc:
        raise ClientError("%s is not UTF-8 text (byte %d)" % (path, exc.start), "save it as UTF-8", exitcodes.USAGE)
    except OSError as exc:
        raise ClientError("cannot read %s: %s" % (path, exc.strerror), "check the path", exitcodes.USAGE)
    except ValueError as exc:          # tomllib.TOMLDecodeError is a ValueError
        raise ClientError("%s is not valid TOML: %s" % (path, exc),
                          'write each notifier as a [[notify]] table with url = "..."', exitcodes.USAGE)
    extra = sorted(set(data) - {"notify"})
    if extra:
        raise ClientError("%s: unexpected top-level key %s" % (path, ", ".join(extra)),
                          "put every setting inside a [[notify]] table", exitcodes.USAGE)
    entries = data.get("notify")
    if not isinstance(entries, list) or not entries:
        raise ClientError("%s has no [[notify]] table" % path,
                          '[[notify]]\nurl = "ntfys://ntfy.sh/your-secret-topic"', exitcodes.USAGE)
    try:
        check_notifiers(entries)
    except AgentError as exc:
        raise ClientError("%s: %s" % (path, exc.message), exc.hint, exitcodes.USAGE)
    try:
        json.dumps(entries)
    except (TypeError, ValueError):
        raise ClientError("%s holds a value JSON cannot carry (a TOML date?)" % path,
                          "use strings and numbers only", exitcodes.USAGE)
    return {"notify": entries}


@click.command("notify-set")
@click.argument("host")
@click.argument("file", type=click.Path(dir_okay=False))
@options.json_flag()
@options.host_options
@click.pass_context
def notify_set(ctx: click.Context, host: str, file: str, as_json: bool, home: str | None,
               python: str | None) -> None:
    """Send the [[notify]] tables in FILE to HOST (replaces its notifiers; the daemon reloads)."""
    payload = load_notify_file(file)
    t = options.target(ctx, host, home, python)
    options.say_home(t)
    ans = agentcall.ok(t, ["notify-set", "--json"], "notify-set", stdin=json.dumps(payload).encode("utf-8"),
                       timeout=AGENT_TIMEOUT_S)
    answer = agentcall.json_of(ans, "notify-set")
    if as_json:
        click.echo(json.dumps(answer, ensure_ascii=False))
        return
    notifiers = [n for n in answer.get("notifiers") or [] if isinstance(n, dict)]
    click.echo("%s: %d notifier%s set" % (host, len(notifiers), "" if len(notifiers) == 1 else "s"))
    for n in notifiers:
        extra = "".join("  %s %s" % (k[:-2], _dur(n[k])) for k in ("heartbeat_s", "deadman_s") if _num(n.get(k)))
        click.echo("  %-10s %-13s %s%s" % (s(n.get("id")), s(n.get("format")), s(n.get("target")), extra))
    click.echo("next: rgt-client notify-test %s" % host, err=True)


@click.command("notify-test")
@click.argument("host")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--timeout", type=float, default=15.0, show_default=True, help="Seconds per notifier.")
@options.host_options
@click.pass_context
def notify_test(ctx: click.Context, host: str, as_json: bool, timeout: float, home: str | None,
                python: str | None) -> None:
    """Make HOST send a test message through every notifier; print each result.

    Exit 0 when every notifier answered, 1 when one failed, 2 when none is configured."""
    ans = agentcall.call(options.target(ctx, host, home, python),
                         ["notify-test", "--json", "--timeout", str(timeout)], timeout=AGENT_TIMEOUT_S + timeout)
    if ans.rc not in (0, 1) or not ans.stdout.strip():
        raise ans.error("notify-test")
    answer = agentcall.json_of(ans, "notify-test")
    if as_json:
        click.echo(json.dumps(answer, ensure_ascii=False))
    else:
        click.echo(render_test(answer))
    if not answer.get("ok"):
        ctx.exit(exitcodes.ERROR)


def render_test(answer: dict[str, Any]) -> str:
    lines = []
    for r in [r for r in answer.get("results") or [] if isinstance(r, dict)]:
        mark = "ok  " if r.get("ok") is True else "FAIL"
        detail = ("HTTP %s" % s(r["status"])) if r.get("ok") and r.get("status") else s(r.get("error") or "sent")
        took = "%.2fs" % r["elapsed_s"] if _num(r.get("elapsed_s")) else "-"
        lines.append("%s %-10s %-13s %-34s %s (%s)" % (mark, s(r.get("id")), s(r.get("format")), s(r.get("target")),
                                                       detail, took))
    for e in answer.get("config_errors") or []:
        lines.append("FAIL config: %s" % s(e))
    if not lines:
        lines.append("no notifiers on this box: rgt-client notify-set HOST FILE")
    return "\n".join(lines)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1e12


def _dur(seconds: float) -> str:
    from boxagent.api import format_duration
    return format_duration(seconds)


COMMANDS: list = [notify_set, notify_test]
