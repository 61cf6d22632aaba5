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

from rgt_client import exitcodes, hosts
from rgt_client.errors import ClientError
from rgt_client.transport import Target, run_agent

AGENT_TIMEOUT_S = 120.0


def _toml() -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
        return tomllib
    import tomli  # the client's dependency on Python 3.10
    return tomli


def load_notify_file(path: str) -> dict[str, Any]:
    """Parse and validate a `[[notify]]` TOML file; return the secrets.json form {"notify": [...]}.

    Raises ClientError(USAGE) naming the file and what to fix. Schemes only Apprise speaks pass
    here (the BOX decides whether it can import Apprise); everything else is checked fully.
    """
    from boxagent.notify.config import NotifyConfigError, parse_notifiers
    try:
        with open(path, "rb") as fh:
            data = _toml().load(fh)
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
        parse_notifiers(entries, apprise_ok=True)
    except NotifyConfigError as exc:
        raise ClientError("%s: %s" % (path, exc.message), exc.hint, exitcodes.USAGE)
    try:
        json.dumps(entries)
    except (TypeError, ValueError):
        raise ClientError("%s holds a value JSON cannot carry (a TOML date?)" % path,
                          "use strings and numbers only", exitcodes.USAGE)
    return {"notify": entries}


def _agent_error(host: str, res: Any, what: str) -> ClientError:
    """The agent's own `Error:`/`Hint:` lines, passed on with its exit code."""
    msg, hint = "", None
    for line in res.err.splitlines():
        if line.startswith("Error: "):
            msg = line[len("Error: "):]
        elif line.startswith("Hint: "):
            hint = line[len("Hint: "):]
    code = res.rc if res.rc in (exitcodes.USAGE, exitcodes.AGENT_DOWN) else exitcodes.ERROR
    return ClientError("%s on %s failed: %s" % (what, host, msg or res.err.strip()[-300:] or "exit %d" % res.rc),
                       hint, code)


def _target(ctx: click.Context, host: str, home: str | None, python: str | None) -> Target:
    return hosts.target_for(host, (ctx.obj or {}).get("ssh_config"), home, python)


def _host_options(fn: Any) -> Any:
    fn = click.option("--python", "python", metavar="PATH",
                      help="Python on the box (default: what install used, else python3).")(fn)
    return click.option("--home", metavar="DIR",
                        help="RGT_HOME on the box (default: what install used, else ~/.rgt).")(fn)


@click.command("notify-set")
@click.argument("host")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the agent's answer as JSON.")
@_host_options
@click.pass_context
def notify_set(ctx: click.Context, host: str, file: str, as_json: bool, home: str | None,
               python: str | None) -> None:
    """Send the [[notify]] tables in FILE to HOST (replaces its notifiers; the daemon reloads)."""
    payload = load_notify_file(file)
    res = run_agent(_target(ctx, host, home, python), ["notify-set", "--json"],
                    stdin=json.dumps(payload).encode("utf-8"), timeout=AGENT_TIMEOUT_S)
    if res.rc != 0:
        raise _agent_error(host, res, "notify-set")
    answer = _parse(res.text, host)
    if as_json:
        click.echo(json.dumps(answer, ensure_ascii=False))
        return
    targets = answer.get("notifiers") or []
    click.echo("%s: %d notifier%s set" % (host, len(targets), "" if len(targets) == 1 else "s"))
    for t in targets:
        extra = "".join("  %s %s" % (k[:-2], _dur(t[k])) for k in ("heartbeat_s", "deadman_s") if t.get(k))
        click.echo("  %-10s %-13s %s%s" % (t.get("id"), t.get("format"), t.get("target"), extra))
    click.echo("next: rgt-client notify-test %s" % host, err=True)


@click.command("notify-test")
@click.argument("host")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--timeout", type=float, default=15.0, show_default=True, help="Seconds per notifier.")
@_host_options
@click.pass_context
def notify_test(ctx: click.Context, host: str, as_json: bool, timeout: float, home: str | None,
                python: str | None) -> None:
    """Make HOST send a test message through every notifier; print each result.

    Exit 0 when every notifier answered, 1 when one failed, 2 when none is configured."""
    res = run_agent(_target(ctx, host, home, python), ["notify-test", "--json", "--timeout", str(timeout)],
                    timeout=AGENT_TIMEOUT_S + timeout)
    if res.rc not in (0, 1) or not res.text.strip():
        raise _agent_error(host, res, "notify-test")
    answer = _parse(res.text, host)
    if as_json:
        click.echo(json.dumps(answer, ensure_ascii=False))
    else:
        click.echo(render_test(answer))
    if not answer.get("ok"):
        ctx.exit(exitcodes.ERROR)


def render_test(answer: dict[str, Any]) -> str:
    lines = []
    for r in answer.get("results") or []:
        mark = "ok  " if r.get("ok") else "FAIL"
        detail = ("HTTP %s" % r["status"]) if r.get("ok") and r.get("status") else (r.get("error") or "sent")
        lines.append("%s %-10s %-13s %-34s %s (%.2fs)" % (mark, r.get("id"), r.get("format"), r.get("target"),
                                                          detail, r.get("elapsed_s") or 0))
    for e in answer.get("config_errors") or []:
        lines.append("FAIL config: %s" % e)
    return "\n".join(lines)


def _parse(text: str, host: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError:
        raise ClientError("the agent on %s answered something that is not JSON" % host,
                          "reinstall the agent: rgt-client install %s" % host)
    return data if isinstance(data, dict) else {}


def _dur(seconds: float) -> str:
    from boxagent.base.units import format_duration
    return format_duration(seconds)


COMMANDS: list = [notify_set, notify_test]
