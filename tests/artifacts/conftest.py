"""Artifacts fixtures: a "box" on this machine (a temp RGT_HOME holding the built single-file
agent, a temp workdir, runs written as spec.json/state.json the way the daemon writes them),
and rgt-client in-process with stdout and stderr apart."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


from rgt_client.box.transport import Target


@pytest.fixture(autouse=True)
def _isolated_client(client_config) -> Path:
    """Every test here gets its own client config dir and no inherited RGT_HOME/RGT_SSH_CONFIG."""
    return client_config


class Box:
    def __init__(self, root: Path, pyz: Path):
        self.root = root
        self.home = root / "box home"      # a space in every path the agent and rsync see
        self.work = root / "work dir"
        (self.home / "runs").mkdir(parents=True)
        self.work.mkdir()
        shutil.copy(pyz, self.home / "rgt-agent.pyz")

    def write(self, rel: str, data: bytes | str) -> Path:
        p = self.work / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return p

    def run(self, name: str, include, exclude=(), state: dict | None = None) -> str:
        d = self.home / "runs" / name
        d.mkdir(parents=True, exist_ok=True)
        spec = {"name": name, "workdir": str(self.work), "stage": [{"name": "train", "run": "true"}],
                "artifacts": {"include": list(include), "exclude": list(exclude)}}
        (d / "spec.json").write_text(json.dumps(spec))
        if state is not None:
            (d / "state.json").write_text(json.dumps(state))
        return name

    def profile(self, prof: dict) -> None:
        (self.home / "config.json").write_text(json.dumps({"profile": prof}))

    def agent(self, *args: str, stdin: bytes | None = None, env: dict | None = None
              ) -> subprocess.CompletedProcess:
        e = dict(os.environ, RGT_HOME=str(self.home))
        e.update(env or {})
        return subprocess.run([sys.executable, str(self.home / "rgt-agent.pyz"), *args], input=stdin,
                              capture_output=True, env=e, timeout=120)

    def manifest(self, run: str) -> dict:
        return json.loads((self.home / "runs" / run / "manifest.json").read_text())

    def target(self, sshd=None) -> Target:
        if sshd is None:
            return Target(host="local", home=str(self.home))
        return Target(host="rgt-box", home=str(self.home), ssh_config=str(sshd.config))


@pytest.fixture
def box(tmp_path, agent_pyz) -> Box:
    return Box(tmp_path, agent_pyz)


def client_argv(ssh_config: Path | None, *args: str) -> list[str]:
    """rgt-client as a real process (for the tests that kill it mid-transfer)."""
    pre = ["--ssh-config", str(ssh_config)] if ssh_config else []
    return [sys.executable, "-c", "from rgt_client.cli import main; main()", *pre, *args]
