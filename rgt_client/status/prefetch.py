"""`status` starts its ssh calls before the rest of the client is even imported.

A `status` is one ssh round trip, and the client's own start (click, the renderers, the command
modules) used to come before that round trip began: about a third of the whole command on a
loopback box. The entry point (entry.py) calls start(argv) first. When the command line is a
plain `status HOST...`, it builds each host's call the way ops.fetch_status will (the same
hosts.target_for, the same agentcall.status_args, the same transport line) and starts it;
transport.run_remote then takes the process already under way for an identical call (same argv,
same environment) instead of starting another. A call that is never taken is killed at exit.

It is only ever a head start: a command line it does not fully understand (an option it does
not know, --help, a typo) starts nothing, and a guess that differs from what the command then
asks is simply not taken. The box only ever sees its read-only `status`.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False   # annotations only: typing would add a few ms before a status's ssh call
if TYPE_CHECKING:
    from typing import Iterator

_FLAGS = {"--json": "as_json", "--all": "all"}
_VALUES = {"--run": "run", "--events": "events", "--home": "home", "--python": "python"}


def start(argv: list[str]) -> bool:
    """Start the ssh calls of `status HOST...` now (True); nothing for any other command line."""
    parsed = _parse(argv)
    if parsed is None:
        return False
    from rgt_client.box import agentcall, hosts, transport
    from rgt_client.errors import ClientError
    ssh_config, opts, names = parsed
    events = agentcall.status_events(int(opts["events"]) if "events" in opts else None, "as_json" in opts)
    try:
        args = agentcall.status_args(events, opts.get("run"))
    except ClientError:
        return False      # a run name that is not one: the command says so (Error, Hint, exit 2)
    for host in names:
        target = hosts.target_for(host, ssh_config, opts.get("home"), opts.get("python"))
        transport.start_early(target, transport.agent_command(target, args))
    return True


def _parse(argv: list[str]) -> tuple[str | None, dict[str, str], list[str]] | None:
    """(ssh config, status options, hosts), or None for anything but a plain status."""
    words = iter(_split(argv))
    ssh_config = os.environ.get("RGT_SSH_CONFIG") or None
    for word in words:
        if word == "--ssh-config":
            ssh_config = next(words, None)
            if ssh_config is None:
                return None
        elif word != "--debug":
            if word != "status":
                return None
            break
    else:
        return None
    opts: dict[str, str] = {}
    names: list[str] = []
    for word in words:
        if word in _FLAGS:
            opts[_FLAGS[word]] = ""
        elif word in _VALUES:
            value = next(words, None)
            if value is None:
                return None
            opts[_VALUES[word]] = value
        elif word.startswith("-"):
            return None
        else:
            names.append(word)
    if not names or ("events" in opts and not opts["events"].isdigit()):
        return None
    return ssh_config, opts, names


def _split(argv: list[str]) -> Iterator[str]:
    for word in argv:
        if word.startswith("--") and "=" in word:
            yield from word.split("=", 1)
        else:
            yield word
