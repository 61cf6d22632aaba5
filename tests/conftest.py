"""Shared fixtures. Each area keeps its own in tests/<area>/conftest.py."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # `tests.sshd` importable


# Hypothesis: `ci` is the suite's full strength (each test's own settings, else hypothesis'
# defaults), the profile whenever CI=true; `dev` runs a fifth of the examples for the inner loop.
# HYPOTHESIS_PROFILE=ci|dev chooses (or pytest's --hypothesis-profile).
try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:    # the dev extra brings it; without it the fuzz tests are not collected either
    _hypothesis_settings = None
if _hypothesis_settings is not None:
    _hypothesis_settings.register_profile("ci", _hypothesis_settings.get_profile("default"))
    _hypothesis_settings.register_profile("dev", max_examples=20)
    _hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or (
        "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"))


def fuzz_examples(full: int) -> int:
    """A fuzz test's example count: `full` under the ci profile, a fifth of it under dev."""
    if _hypothesis_settings is None:
        return full
    default = _hypothesis_settings.get_profile("default").max_examples
    return max(10, full * _hypothesis_settings.default.max_examples // default)


def pytest_collection_modifyitems(config, items):
    is_root = os.geteuid() == 0
    for item in items:
        if "root" in item.keywords and not is_root:
            item.add_marker(pytest.mark.skip(reason="needs root (cgroups, tmpfs mounts, /dev/kmsg)"))


# The suite runs in parallel workers (pytest-xdist, `--dist loadgroup` in pyproject.toml). Each
# worker starts its own sshd and builds its own agent and fake NVML library (session fixtures,
# free ports, tmp_path). Some tests must share one worker:
# - what exists once per machine: the one-node Slurm cluster (its daemons own the node's CPUs and
#   cgroups; tests/slurm/ and tests marked `slurm`) and the Ray cluster (tests/ray/, `ray`);
# - the tests of a file that share a module-scoped fixture (an installed box, a finished run):
#   split over workers, each worker set the box up again (12 s each for tests/cost's), and a
#   test that reads what an earlier one left found nothing;
# - a file that names its group: `pytestmark = pytest.mark.xdist_group("name")`.
# xdist 3.8's own loadgroup groups nothing under pytest 9 (it renames node ids through an
# attribute pytest 9 no longer reads), so the groups are read here, from the test files.
_MACHINE_GROUPS = (("tests/slurm/", "mark.slurm", "slurm"), ("tests/ray/", "mark.ray", "ray"))
_NAMED_GROUP = re.compile(r"""xdist_group\(\s*(?:name\s*=\s*)?["']([^"']+)["']""")
_MODULE_FIXTURE = re.compile(r"""fixture\([^)]*scope\s*=\s*["']module["']""")
_file_groups: dict = {}
# The machine groups hold the suite's longest waits (a Slurm time limit is 60-90 s of slurmctld's
# clock; the Ray tests ~3 min on one worker): handed out first, they wait beside the other
# workers' tests instead of after them. Handed out last, the Slurm group alone was the suite's
# final ~2 minutes.
_FIRST = ("slurm", "ray")


def _group_of_file(path: str) -> str | None:
    """The group every test of the file `path` (relative to the repository) runs in, or None."""
    if path not in _file_groups:
        def text(p: Path) -> str:
            try:
                return p.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return ""
        body = text(REPO / path)
        near = text((REPO / path).parent / "conftest.py")
        group = None
        for prefix, marker, name in _MACHINE_GROUPS:
            if path.startswith(prefix) or marker in body:
                group = name
                break
        named = _NAMED_GROUP.search(body)
        if group is None and named:
            group = named.group(1)
        if group is None and (_MODULE_FIXTURE.search(body) or _MODULE_FIXTURE.search(near)):
            group = path
        _file_groups[path] = group
    return _file_groups[path]


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedPartsScheduling(LoadScopeScheduling):
        """Each test is its own unit of work, but a group's tests are one unit (one worker, in
        order); the machine groups (_FIRST) are handed out first, then the biggest units. (A
        second cluster's job that stayed PENDING launch_failed_requeued_held under the workers
        was slurmstepd's socket path: xdist's `popen-gwN/` made it one byte too long; the test
        cluster's spool dir is kept short now.)"""

        def _assign_work_unit(self, node) -> None:
            scope = next((s for s in _FIRST if s in self.workqueue), None) or next(iter(self.workqueue))
            unit = self.workqueue.pop(scope)
            self.assigned_work.setdefault(node, {})[scope] = unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(nodeid) for nodeid, done in unit.items() if not done])

        def _split_scope(self, nodeid: str) -> str:
            return _group_of_file(nodeid.split("::", 1)[0]) or nodeid

    return SharedPartsScheduling(config, log)


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: the suite mostly waits (daemons, ssh, sleeps in the programs under test), so two
    workers per core, at least 4 and at most 8 (each starts its own sshd)."""
    return min(8, max(4, 2 * (os.cpu_count() or 1)))


@pytest.fixture(scope="session", autouse=True)
def rgt_data_home(tmp_path_factory):
    """rgt's data folder (pulls and reports) for the whole session: never the real
    ~/.local/share/rgt. Set before any other fixture, so every subprocess inherits it; a test that
    needs its own sets RGT_DATA_HOME in the environment it passes."""
    root = tmp_path_factory.mktemp("rgt-data")
    root.chmod(0o700)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RGT_DATA_HOME", str(root))
        yield root


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
