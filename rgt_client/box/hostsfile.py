"""Where the client keeps its memory of hosts (hosts.json), read without the transport: the ssh
failure hints (sshfail.py) name a close host rgt has used, and the transport imports them.
hosts.py writes the file and re-exports these."""
from __future__ import annotations

import os

TYPE_CHECKING = False   # annotations only: typing would add a few ms before a status's ssh call
if TYPE_CHECKING:
    from typing import Any

# Plain os.path, no pathlib: every `status` reads this file, and its start-up time counts.


def config_dir() -> str:
    env = os.environ.get("RGT_CLIENT_CONFIG_DIR")
    if env:
        return os.path.expanduser(env)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "rgt")


def hosts_file() -> str:
    return os.path.join(config_dir(), "hosts.json")


def load_all() -> dict[str, dict[str, Any]]:
    from boxagent.api import box_json     # json's import (re, enum...) came before `status`'s ssh call
    try:
        with open(hosts_file(), "rb") as fh:
            data = box_json(fh.read())
    except (OSError, ValueError):
        return {}
    hosts = data.get("hosts") if isinstance(data, dict) else None
    return hosts if isinstance(hosts, dict) else {}
