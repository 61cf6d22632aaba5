"""The client's memory of each host: the home and Python it installed with, so later commands
need neither flag. One JSON file in the client's config dir (RGT_CLIENT_CONFIG_DIR, else
$XDG_CONFIG_HOME/rgt, else ~/.config/rgt), rewritten atomically under a lock because several
installs may run in parallel (one per host).
"""
from __future__ import annotations

import os
import time

TYPE_CHECKING = False   # annotations only: typing would add a few ms before a status's ssh call
if TYPE_CHECKING:
    from typing import Any

from rgt_client.box.hostsfile import config_dir, hosts_file, load_all
from rgt_client.box.transport import Target

__all__ = ["config_dir", "hosts_file", "load_all", "get", "remember", "target_for"]


def get(host: str) -> dict[str, Any]:
    entry = load_all().get(host)
    return entry if isinstance(entry, dict) else {}


class _Locked:
    """hosts.json's lock, held while it is rewritten. A class, not contextlib.contextmanager:
    contextlib (collections, functools) was imported before every `status`'s ssh call."""

    def __enter__(self) -> None:
        import fcntl
        d = config_dir()
        os.makedirs(d, exist_ok=True)
        self.fh = open(os.path.join(d, ".hosts.lock"), "a")
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX)
        except BaseException:
            self.fh.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.fh.close()          # closing the file releases the lock


def remember(host: str, **fields: Any) -> None:
    """Merge fields into the host's entry (None values are not stored)."""
    with _Locked():
        hosts = load_all()
        entry = dict(hosts.get(host) or {})
        entry.update({k: v for k, v in fields.items() if v is not None})
        entry["updated_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        hosts[host] = entry
        _write({"hosts": hosts})


def _write(data: dict) -> None:
    # the same tmp -> fsync -> replace the agent uses for every file a reader may see mid-write
    import json
    from boxagent.api import atomic_write_text
    atomic_write_text(hosts_file(), json.dumps(data, indent=1, sort_keys=True) + "\n", mode=0o600)


def target_for(host: str, ssh_config: str | None = None, home: str | None = None,
               python: str | None = None) -> Target:
    """The one rule for a host's home and python (printed by every command that writes):

    - `local`: --home, else $RGT_HOME, else ~/.rgt. Never the home remembered by an earlier
      install: with RGT_HOME unset, a remembered home once won over ~/.rgt and a command
      silently reached another agent than the one the docs promise.
    - a box: --home, else the home install used on it (remembered here), else the box's own
      $RGT_HOME or ~/.rgt.
    The python: --python, else what install resolved on that host, else python3."""
    mem = get(host)
    if home:
        home_from = "--home"
    elif host == "local":
        home = os.environ.get("RGT_HOME") or None
        home_from = "$RGT_HOME" if home else "the default ~/.rgt"
    elif mem.get("home"):
        home, home_from = mem["home"], "remembered from install"
    else:
        home_from = "the box's default"
    return Target(host=host, home=home, python=python or mem.get("python") or "python3",
                  ssh_config=ssh_config, home_from=home_from)
