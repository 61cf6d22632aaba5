"""Client fixtures: an isolated client config dir, box homes on this machine (the sshd's "box"
is this machine) whose daemons are always stopped afterwards, and a CliRunner wrapper."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.clirunner import Cli  # noqa: F401 - re-exported to the tests of this folder
from tests.hostile import hostile  # noqa: F401 - the fixture: a compromised box on the loopback sshd



def agent_has(command: str) -> bool:
    """True once the core's agent command exists (the e2e tests need the daemon)."""
    try:
        from boxagent.cli import build_parser
        sub = [a for a in build_parser()._actions if a.dest == "command"]
    except Exception:  # noqa: BLE001 - another area mid-edit must not break collecting these tests
        return False
    return bool(sub) and command in (sub[0].choices or {})


needs_daemon = pytest.mark.skipif(not agent_has("submit") or not agent_has("daemon"),
                                  reason="the agent core (submit/daemon) has not landed yet")


@pytest.fixture(autouse=True)
def _isolated_client(client_config) -> Path:
    """Every test here gets its own client config dir and no inherited RGT_HOME/RGT_SSH_CONFIG."""
    return client_config


def stop_daemon(home: Path) -> None:
    """Stop a test box's daemon: the agent's own `stop`, then the pid file as a last resort."""
    pyz = home / "rgt-agent.pyz"
    if pyz.exists():
        subprocess.run([sys.executable, str(pyz), "stop"], env=dict(os.environ, RGT_HOME=str(home)),
                       capture_output=True, timeout=60)
    try:
        pid = int((home / "daemon.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


class Homes:
    def __init__(self, base: Path):
        self.base, self.made = base, []

    def new(self, name: str = "box home") -> Path:
        home = self.base / ("%s-%d" % (name, len(self.made)))
        self.made.append(home)
        return home

    def stop_all(self) -> None:
        for h in self.made:
            stop_daemon(h)


@pytest.fixture
def homes(tmp_path):
    h = Homes(tmp_path)
    yield h
    h.stop_all()


def wait_for(pred, timeout: float = 30.0, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(every)
    raise AssertionError("condition not met within %ss" % timeout)


def read_status(home: Path) -> dict:
    try:
        return json.loads((home / "status.json").read_text())
    except (OSError, ValueError):
        return {}
