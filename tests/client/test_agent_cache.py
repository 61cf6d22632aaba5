"""The agent's bytecode cache (bundle._MAIN): filled at install, used when it matches, and never
run when it is stale (another build's source), foreign (not ours, or open to others) or from
another Python (magic number). Real pyz, real interpreters (3.8 where installed)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rgt_client.box.bundle import build_agent
from tests.localuser import as_user, other_user, shared_tmp

PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"
PYTHONS = [sys.executable] + ([PY38] if Path(PY38).exists() else [])
MODULE = "boxagent.base.errors"       # every agent command imports it


def _py_info(py: str) -> tuple[bytes, str]:
    code = ("import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex() + ' ' + "
            "sys.implementation.cache_tag)")
    magic, tag = subprocess.run([py, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return bytes.fromhex(magic), tag


def _source_hash(py: str, data: bytes) -> bytes:
    code = "import importlib.util, sys; sys.stdout.write(importlib.util.source_hash(sys.stdin.buffer.read()).hex())"
    return bytes.fromhex(subprocess.run([py, "-c", code], input=data, capture_output=True, check=True).stdout.decode())


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    home = tmp_path_factory.mktemp("cache") / "box home"
    home.mkdir()
    pyz, sha = build_agent(home / "rgt-agent.pyz")
    (home / "agent.sha256").write_text(sha + "\n")
    return home, pyz, sha


def _run(py: str, pyz: Path, *args: str, env: dict | None = None, via: str = "pyz") -> subprocess.CompletedProcess:
    """The agent run as `python rgt-agent.pyz` (via="pyz") or as the remote status runs it, from
    the boot.py the precompile of `py` left (via="boot")."""
    if via == "boot":
        assert _run(py, pyz, "--rgt-precompile").returncode == 0     # boot.py is the last precompile's
        pyz = pyz.parent / ".agent-pyc" / "boot.py"
    return subprocess.run([py, str(pyz), *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **(env or {})))


@pytest.mark.parametrize("py", PYTHONS)
def test_precompile_fills_the_cache_for_this_python(installed, py):
    home, pyz, sha = installed
    assert _run(py, pyz, "--rgt-precompile").returncode == 0
    magic, tag = _py_info(py)
    cache = home / ".agent-pyc" / sha / tag
    names = {n[:-3].replace("/", ".").replace(".__init__", "") for n in zipfile.ZipFile(pyz).namelist()
             if n.endswith(".py")}          # __main__ too: boot.py starts from its code
    assert {p.name[:-4] for p in cache.glob("*.pyc")} == names
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in cache.glob("*.pyc"))
    assert (cache / (MODULE + ".pyc")).read_bytes().startswith(magic)
    out = _run(py, pyz, "version", "--json")
    assert out.returncode == 0 and sha in out.stdout, out.stderr


def _marshal(py: str, source: bytes) -> bytes:
    """The code of `source` marshalled by `py` itself (code objects differ between Pythons)."""
    code = "import marshal, sys; sys.stdout.buffer.write(marshal.dumps(compile(sys.stdin.buffer.read(), 'p', 'exec')))"
    return subprocess.run([py, "-c", code], input=source, capture_output=True, check=True).stdout


def _plant(py: str, home: Path, pyz: Path, sha: str, mark: Path, head_source: bytes | None = None,
           magic: bytes | None = None, mode: int = 0o600) -> None:
    """A cache entry for MODULE whose code also writes `mark`: if the agent runs it, it shows."""
    real = zipfile.ZipFile(pyz).read(MODULE.replace(".", "/") + ".py")
    planted = real + b"\nimport os as _o\nopen(_o.environ['MARK'], 'w').write('cached code ran')\n"
    own_magic, tag = _py_info(py)
    cache = home / ".agent-pyc" / sha / tag
    cache.mkdir(parents=True, exist_ok=True, mode=0o700)
    entry = cache / (MODULE + ".pyc")
    head = (magic or own_magic) + _source_hash(py, real if head_source is None else head_source)
    entry.write_bytes(head + _marshal(py, planted))
    entry.chmod(mode)
    mark.unlink(missing_ok=True)


@pytest.mark.parametrize("via", ["pyz", "boot"])
@pytest.mark.parametrize("py", PYTHONS)
def test_a_matching_entry_is_used(installed, py, via, tmp_path):
    home, pyz, sha = installed
    mark = tmp_path / "mark"
    _run(py, pyz, "--rgt-precompile")
    _plant(py, home, pyz, sha, mark)
    assert _run(py, pyz, "version", env={"MARK": str(mark)}, via=via).returncode == 0
    assert mark.read_text() == "cached code ran"     # so the refusals below are real refusals


@pytest.mark.parametrize("via", ["pyz", "boot"])
@pytest.mark.parametrize("py", PYTHONS)
@pytest.mark.parametrize("why, plant", [
    ("stale: compiled from another build's source", dict(head_source=b"x = 1  # another build\n")),
    ("another Python's magic number", dict(magic=b"\x00\x00\r\n")),
    ("foreign: readable and writable by others", dict(mode=0o666)),
])
def test_a_stale_or_foreign_entry_never_runs(installed, py, via, tmp_path, why, plant):
    home, pyz, sha = installed
    mark = tmp_path / "mark"
    _run(py, pyz, "--rgt-precompile")       # the index holds each entry's head: a planted one is checked against it
    _plant(py, home, pyz, sha, mark, **plant)
    out = _run(py, pyz, "version", env={"MARK": str(mark)}, via=via)
    assert out.returncode == 0 and sha in out.stdout, (why, out.stderr)
    assert not mark.exists(), why


def test_without_agent_sha256_there_is_no_cache(tmp_path):
    pyz, _ = build_agent(tmp_path / "rgt-agent.pyz")
    assert _run(sys.executable, pyz, "version").returncode == 0
    assert not (tmp_path / ".agent-pyc").exists()


def _imports(py: str, entry: Path, home: Path) -> tuple[str, set[str]]:
    """`status --json --events 0` run from `entry` on a bare interpreter: (stdout, the modules imported)."""
    out = subprocess.run([py, "-S", "-X", "importtime", str(entry), "status", "--json", "--events", "0"],
                         capture_output=True, text=True, timeout=60, env=dict(os.environ, RGT_HOME=str(home)))
    assert out.returncode in (0, 3), out.stderr          # 3: no daemon runs here
    return out.stdout, {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}


@pytest.mark.parametrize("py", PYTHONS)
def test_boot_starts_status_from_the_cache_without_runpy_or_the_zip(tmp_path, py):
    """The remote status runs .agent-pyc/boot.py: runpy (importlib.util, contextlib, collections),
    the zip's directory, its sources and their hashes were half of what status cost on the box."""
    pyz, sha = build_agent(tmp_path / "rgt-agent.pyz")
    (tmp_path / "agent.sha256").write_text(sha + "\n")
    assert _run(py, pyz, "--rgt-precompile").returncode == 0
    boot = tmp_path / ".agent-pyc" / "boot.py"
    assert oct(boot.stat().st_mode & 0o777) == "0o600" and oct(boot.parent.stat().st_mode & 0o777) == "0o700"
    fast, imported = _imports(py, boot, tmp_path)
    assert not {"runpy", "zlib", "json", "re"} & imported, imported   # zlib: nothing was read out of the zip
    plain, _ = _imports(py, pyz, tmp_path)
    assert json.loads(fast)["agent"]["build_sha256"] == json.loads(plain)["agent"]["build_sha256"] == sha


@pytest.mark.parametrize("change", ["replaced by a copy", "rewritten in place", "index open to others"])
def test_boot_of_a_pyz_that_changed_since_its_precompile_runs_the_pyz_itself(tmp_path, change):
    """The index and boot.py hold for the very file they were written from (size, times, inode):
    a .pyz replaced, touched or copied back, or an index that is not ours, and boot.py runs the
    .pyz as `python rgt-agent.pyz` does, its modules checked against their source."""
    pyz, sha = build_agent(tmp_path / "rgt-agent.pyz")
    (tmp_path / "agent.sha256").write_text(sha + "\n")
    assert _run(sys.executable, pyz, "--rgt-precompile").returncode == 0
    if change == "replaced by a copy":
        shutil.copy(pyz, tmp_path / "copy")
        os.replace(tmp_path / "copy", pyz)
    elif change == "rewritten in place":
        pyz.write_bytes(pyz.read_bytes())
    else:
        next((tmp_path / ".agent-pyc").glob("*/*/index")).chmod(0o644)
    out, imported = _imports(sys.executable, tmp_path / ".agent-pyc" / "boot.py", tmp_path)
    assert json.loads(out)["agent"]["build_sha256"] == sha
    assert "zlib" in imported, "the modules were not read from the zip"
    assert ("runpy" in imported) == (change != "index open to others")


@pytest.mark.root
def test_boot_of_a_moved_home_never_runs_the_pyz_at_its_old_path(tmp_path):
    """boot.py named the .pyz by the absolute path it was written at. A home moved elsewhere (out
    of a sticky, world-writable /tmp, say) kept a boot.py that ran whatever .pyz stood at the old
    path: there another local user (`nobody`, a real second uid) made one, and the owner's next
    `status` ran their code. boot.py now runs only the .pyz beside its own folder."""
    other = other_user()
    with shared_tmp() as shared:
        old = shared / "rgt"
        old.mkdir(mode=0o700)
        pyz, sha = build_agent(old / "rgt-agent.pyz")
        (old / "agent.sha256").write_text(sha + "\n")
        assert _run(sys.executable, pyz, "--rgt-precompile").returncode == 0
        home = tmp_path / "home"
        shutil.move(str(old), str(home))
        hostile = ("import os\nopen(os.environ['MARK'], 'w').write('the other user ran code')\n"
                   "print('{}')\n")

        def plant() -> None:                 # the other user, at the path the home left
            os.mkdir(old)
            with zipfile.ZipFile(old / "rgt-agent.pyz", "w") as zf:
                zf.writestr("__main__.py", hostile)
        as_user(other, plant)
        assert (old / "rgt-agent.pyz").stat().st_uid == other.pw_uid
        mark = tmp_path / "mark"
        out = subprocess.run([sys.executable, "-S", str(home / ".agent-pyc" / "boot.py"), "version", "--json"],
                             capture_output=True, text=True, timeout=60, env=dict(os.environ, MARK=str(mark)))
        assert not mark.exists(), "the owner's status ran the other user's .pyz"
        assert out.returncode == 0 and sha in out.stdout, out.stderr


@pytest.mark.root
@pytest.mark.parametrize("command", [["status", "local"], ["logs", "local", "r1"]])
def test_a_home_another_user_made_first_is_never_run(tmp_path, command):
    """RGT_HOME in a shared, sticky /tmp: another local user (`nobody`, a real second uid) makes
    that folder first, with an rgt-agent.pyz and a boot.py of their own. Install refused such a
    folder (its chmod), but status (via boot.py) and every other command ran their code as you.
    The real client, against `local`, refuses the folder and runs nothing from it."""
    from tests.clientproc import client_argv
    other = other_user()
    with shared_tmp() as shared:
        home, mark = shared / "rgt", tmp_path / "mark"
        hostile = "import os\nopen(%r, 'w').write('the other user ran code')\n" % str(mark)

        def plant() -> None:
            os.mkdir(home, 0o755)
            with zipfile.ZipFile(home / "rgt-agent.pyz", "w") as zf:
                zf.writestr("__main__.py", hostile)
            os.mkdir(home / ".agent-pyc", 0o755)
            (home / ".agent-pyc" / "boot.py").write_text(hostile)
        as_user(other, plant)
        env = {k: v for k, v in os.environ.items() if k != "RGT_HOME"}
        env["RGT_CLIENT_CONFIG_DIR"] = str(tmp_path / "client")
        res = subprocess.run(client_argv(command + ["--home", str(home)]), env=env, capture_output=True,
                             text=True, timeout=60)
        assert not mark.exists(), "the owner's %s ran the other user's code" % command[0]
        assert res.returncode == 2 and "belongs to another user" in res.stderr and "Hint:" in res.stderr, \
            res.stdout + res.stderr
        assert "Traceback" not in res.stderr


@pytest.mark.root
def test_a_boot_py_another_user_planted_is_passed_over_for_your_pyz(tmp_path):
    """Your home, opened to others (mode 0777): another local user (`nobody`) cannot replace your
    .pyz unnoticed (theirs would not be yours, and is refused), but moved `.agent-pyc` aside and
    left a boot.py of their own, which `status` ran as you. It now runs your .pyz instead."""
    from tests.clientproc import client_argv
    other = other_user()
    with shared_tmp() as shared:
        home, mark = shared / "rgt", tmp_path / "mark"
        home.mkdir()
        pyz, sha = build_agent(home / "rgt-agent.pyz")
        (home / "agent.sha256").write_text(sha + "\n")
        assert _run(sys.executable, pyz, "--rgt-precompile").returncode == 0
        home.chmod(0o777)

        def plant() -> None:
            os.rename(home / ".agent-pyc", home / ".aside")
            os.mkdir(home / ".agent-pyc")
            (home / ".agent-pyc" / "boot.py").write_text("open(%r, 'w').write('theirs ran')\n" % str(mark))
        as_user(other, plant)
        env = {k: v for k, v in os.environ.items() if k != "RGT_HOME"}
        env["RGT_CLIENT_CONFIG_DIR"] = str(tmp_path / "client")
        res = subprocess.run(client_argv(["status", "local", "--home", str(home)]), env=env, capture_output=True,
                             text=True, timeout=60)
        assert not mark.exists(), "the owner's status ran the other user's boot.py"
        assert "Traceback" not in res.stderr and "belongs to another user" not in res.stderr, res.stderr
