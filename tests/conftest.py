"""Shared fixtures. Each area keeps its own in tests/<area>/conftest.py."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # `tests.sshd` importable


def pytest_collection_modifyitems(config, items):
    is_root = os.geteuid() == 0
    for item in items:
        if "root" in item.keywords and not is_root:
            item.add_marker(pytest.mark.skip(reason="needs root (cgroups, tmpfs mounts, /dev/kmsg)"))


@pytest.fixture(scope="session")
def agent_pyz(tmp_path_factory) -> Path:
    """The agent built once per session as the single file users ship."""
    from rgt_client.box.bundle import build_agent
    path, _sha = build_agent(tmp_path_factory.mktemp("pyz") / "rgt-agent.pyz")
    return path


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory) -> Path:
    """libnvidia-ml.so.1 compiled from tests/health/fakenvml/fakenvml.c (state from a JSON file
    named by FAKE_NVML_STATE), in its own dir: LD_LIBRARY_PATH=<dir> makes the REAL pynvml's
    CDLL("libnvidia-ml.so.1") find it, RGT_NVML_LIB=<file> hands it to the agent in-process."""
    import shutil
    gcc = shutil.which("gcc") or shutil.which("cc")
    if not gcc:
        pytest.skip("gcc is not installed: cannot build the fake libnvidia-ml.so.1")
    src = REPO / "tests" / "health" / "fakenvml" / "fakenvml.c"
    out = tmp_path_factory.mktemp("fakenvml") / "libnvidia-ml.so.1"
    proc = subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-Wall", "-fvisibility=hidden", "-o", str(out),
                           str(src), "-lpthread"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture
def box(tmp_path):
    """A real daemon's box (tests/realbox.Box): a temp RGT_HOME with fast intervals, the agent run
    from the source tree; everything the test started is killed at teardown. One definition for
    every suite (an area with a box of another kind, artifacts' .pyz box, overrides it)."""
    from tests.realbox import Box
    b = Box(tmp_path)
    yield b
    b.cleanup()


@pytest.fixture
def rgt_home(tmp_path) -> Path:
    home = tmp_path / "rgt-home"
    home.mkdir()
    return home


@pytest.fixture
def agent(rgt_home):
    """Run the agent from the source tree: agent("status", "--json") -> CompletedProcess."""
    def run(*args: str, stdin: bytes | None = None, env: dict | None = None, timeout: float = 60,
            bare: bool = False) -> subprocess.CompletedProcess:
        e = dict(os.environ, RGT_HOME=str(rgt_home), PYTHONPATH=str(REPO))
        e.update(env or {})
        py = [sys.executable, "-S"] if bare else [sys.executable]
        return subprocess.run(py + ["-m", "boxagent", *args], input=stdin, capture_output=True,
                              env=e, timeout=timeout, cwd=str(REPO))
    return run


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """A real sshd on 127.0.0.1 with aliases rgt-box, rgt-box2..4 in its ssh config."""
    from tests.sshd import sshd_binary, start_sshd
    if not sshd_binary():
        pytest.skip("openssh-server is not installed (apt-get install openssh-server)")
    server = start_sshd(tmp_path_factory.mktemp("sshd"),
                        aliases=("rgt-box", "rgt-box2", "rgt-box3", "rgt-box4"))
    yield server
    server.stop()


@pytest.fixture
def rgt(sshd):
    """rgt-client in-process, with the test sshd's config (aliases rgt-box..rgt-box4)."""
    from tests.clirunner import Cli
    return Cli(sshd.config)


@pytest.fixture
def rgt_local():
    from tests.clirunner import Cli
    return Cli()


@pytest.fixture
def client_config(tmp_path, monkeypatch) -> Path:
    """A private rgt-client config dir; RGT_SSH_CONFIG and RGT_HOME unset in this process."""
    d = tmp_path / "client-config"
    monkeypatch.setenv("RGT_CLIENT_CONFIG_DIR", str(d))
    monkeypatch.delenv("RGT_SSH_CONFIG", raising=False)
    monkeypatch.delenv("RGT_HOME", raising=False)
    return d
