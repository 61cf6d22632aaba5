"""The threat model's claims about where pulled files and reports land (docs/agents.md "Threat
model"), one test each, named after the claim: rgt's own data folder, outside the project tree,
so that no test runner or glob of the project ever reaches the box's files.

The attacks are an independent review's: a box's `eval/metrics.test.js` pulled into
./rgt-pulls/ ran at the project's next `node --test`; a pytest `testpaths = **/tests` glob (or
`*/tests` with a model's `dest="tests"`) made a pulled folder an initial argument and loaded the
box's conftest.py at start. Through the real MCP SDK client against a real `rgt-client mcp`, the
real CLI, real node and pytest, and a compromised box (trustworld.py)."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rgt_client.pull.datahome import project_key
from tests.clirunner import Cli
from tests.mcp.trustworld import SharedServer, World


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return World(tmp_path_factory.mktemp("outside"))


def _project(base: Path) -> Path:
    """A user's project with its own tests for node and pytest, each of which passes."""
    proj = base / "proj"
    (proj / "test").mkdir(parents=True)
    (proj / "test" / "mine.test.js").write_text("require('node:test')('mine', () => {});\n")
    (proj / "tests").mkdir()
    (proj / "tests" / "test_mine.py").write_text("def test_mine():\n    pass\n")
    return proj


def _box_code(marker: Path) -> tuple[bytes, bytes]:
    js = ("require('fs').writeFileSync(%r, 'box code ran on the laptop');\n"
          "require('node:test')('box', () => {});\n" % str(marker)).encode()
    py = ("import pathlib; pathlib.Path(%r).write_text('box code ran on the laptop')\n" % str(marker)).encode()
    return js, py


def _files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _pytest(proj: Path, home: Path) -> subprocess.CompletedProcess:
    # the user's (or a coding agent's) test run from the project root, as anyone runs it
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
                          cwd=proj, capture_output=True, text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "HOME": str(home)})


def _pull_through_mcp(world: World, proj: Path, run: str, **args: str):
    s = SharedServer(dict(world.env, TEST_CWD=str(proj)))
    try:
        return s.call("pull_artifacts", host="local", run=run, **args)
    finally:
        s.close()


def test_claim_pulled_files_never_run_at_the_projects_next_node_test(world, tmp_path):
    if not shutil.which("node"):
        pytest.skip("no `node` on this machine to run the project's `node --test`")
    marker = tmp_path / "PWNED"
    js, py = _box_code(marker)
    m = world.box.manifest({"eval/metrics.test.js": js, "test/box.test.js": js, "conftest.py": py})
    m["run"] = "jstest"
    world.box.pull_info("jstest", m)
    world.box.answer("pull-verified", stdout={"ok": True})
    proj = _project(tmp_path)
    before = _files_under(proj)
    res = _pull_through_mcp(world, proj, "jstest")
    assert not res.is_error and res.structured_content["verified"] is True, res.content[0].text
    out = subprocess.run(["node", "--test"], cwd=proj, capture_output=True, text=True, timeout=120,
                         env={"PATH": os.environ["PATH"], "HOME": str(world.home)})
    assert not marker.exists(), "box code ran on the laptop"
    assert out.returncode == 0 and "# pass 1" in out.stdout, out.stdout[-800:] + out.stderr[-800:]
    dest = Path(res.structured_content["dest"])
    assert dest == world.data / "mcp-pulls" / project_key(str(proj)) / "local" / "jstest"
    assert (dest / "eval" / "metrics.test.js").read_bytes() == js       # the model can read what it pulled
    assert _files_under(proj) == before                                 # nothing new in the project tree


def test_claim_pulled_files_never_run_at_the_projects_next_go_test(world, tmp_path):
    """`go test ./...` walks every folder of the module but `.`/`_` ones and testdata: a pulled
    `x_test.go` anywhere in the tree would be built and run. Where go is installed, it runs;
    without it, the files are checked to be outside the module's tree, which is what keeps go out."""
    marker = tmp_path / "PWNED"
    go_code = ('package x\nimport ("os"; "testing")\nfunc TestBox(t *testing.T) { os.WriteFile(%s, '
               '[]byte("box code ran on the laptop"), 0o600) }\n' % ('"%s"' % marker)).encode()
    m = world.box.manifest({"eval/x_test.go": go_code})
    m["run"] = "gotest"
    world.box.pull_info("gotest", m)
    world.box.answer("pull-verified", stdout={"ok": True})
    proj = tmp_path / "gomod"
    proj.mkdir()
    (proj / "go.mod").write_text("module example.com/mine\n\ngo 1.21\n")
    res = _pull_through_mcp(world, proj, "gotest")
    assert not res.is_error and res.structured_content["verified"] is True, res.content[0].text
    dest = os.path.realpath(res.structured_content["dest"])
    assert os.path.commonpath([dest, os.path.realpath(proj)]) != os.path.realpath(proj), dest
    assert _files_under(proj) == {"go.mod"}
    if shutil.which("go"):
        out = subprocess.run(["go", "test", "./..."], cwd=proj, capture_output=True, text=True, timeout=300,
                             env={"PATH": os.environ["PATH"], "HOME": str(world.home)})
        assert not marker.exists(), "box code ran on the laptop: " + out.stdout[-400:]


@pytest.mark.parametrize("testpaths,dest", [("**/tests", None), ("*/tests", "tests")])
def test_claim_pulled_files_never_load_at_a_pytest_whose_testpaths_glob_the_project(world, tmp_path, testpaths,
                                                                                       dest):
    marker = tmp_path / "PWNED"
    _js, py = _box_code(marker)
    m = world.box.manifest({"conftest.py": py, "tests/conftest.py": py, "tests/test_box.py": py})
    run = "glob-%s" % ("dest" if dest else "default")
    m["run"] = run
    world.box.pull_info(run, m)
    world.box.answer("pull-verified", stdout={"ok": True})
    proj = _project(tmp_path)
    (proj / "pytest.ini").write_text("[pytest]\ntestpaths = %s\n" % testpaths)
    (proj / "app" / "tests").mkdir(parents=True)              # a monorepo: what the glob is for
    (proj / "app" / "tests" / "test_app.py").write_text("def test_app():\n    pass\n")
    res = _pull_through_mcp(world, proj, run, **({"dest": dest} if dest else {}))
    assert not res.is_error and res.structured_content["verified"] is True, res.content[0].text
    out = _pytest(proj, world.home)
    assert not marker.exists(), "box code ran on the laptop"
    assert out.returncode == 0 and " passed" in out.stdout, out.stdout[-800:] + out.stderr[-800:]


def test_claim_the_clis_default_pull_lands_outside_the_project_and_says_where(world, tmp_path, monkeypatch):
    marker = tmp_path / "PWNED"
    js, py = _box_code(marker)
    m = world.box.manifest({"eval/metrics.test.js": js, "tests/conftest.py": py, "conftest.py": py})
    m["run"] = "clidefault"
    world.box.pull_info("clidefault", m)
    world.box.answer("pull-verified", stdout={"ok": True})
    proj = _project(tmp_path)
    (proj / "pytest.ini").write_text("[pytest]\ntestpaths = **/tests\n")
    before = _files_under(proj)
    monkeypatch.chdir(proj)
    cli = Cli()("pull", "local", "clidefault", "--home", str(world.box.home), env=world.env)
    assert cli.exit_code == 0, cli.stderr
    dest = world.data / "pulls" / project_key(str(proj)) / "local" / "clidefault"
    assert "files in %s" % dest in cli.stderr and (dest / "conftest.py").read_bytes() == py, cli.stderr
    assert _files_under(proj) == before
    assert _pytest(proj, world.home).returncode == 0 and not marker.exists(), "box code ran on the laptop"


def test_claim_rgts_data_folder_is_made_yours_alone(world, tmp_path, monkeypatch):
    """No RGT_DATA_HOME, no XDG_DATA_HOME, a fresh HOME without ~/.local: the folders rgt makes
    are 0700, and two projects of the same name never share one."""
    home = tmp_path / "fresh-home"
    home.mkdir()
    m = world.box.manifest({"out/w.bin": b"w"})
    m["run"] = "fresh"
    env = {k: v for k, v in world.env.items() if k not in ("RGT_DATA_HOME", "XDG_DATA_HOME")}
    env["HOME"] = str(home)
    monkeypatch.delenv("RGT_DATA_HOME")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    seen = []
    for where in ("a", "b"):
        proj = tmp_path / where / "app"
        proj.mkdir(parents=True)
        monkeypatch.chdir(proj)
        world.box.pull_info("fresh", m)
        world.box.answer("pull-verified", stdout={"ok": True})
        cli = Cli()("pull", "local", "fresh", "--home", str(world.box.home), "--json", env=env)
        assert cli.exit_code == 0, cli.stderr
        seen.append(Path(json.loads(cli.stdout)["dest"]))
    root = home / ".local" / "share" / "rgt"
    assert seen[0] != seen[1] and all(str(d).startswith(str(root / "pulls" / "app-")) for d in seen), seen
    for folder in (root, root / "pulls", seen[0].parent.parent, seen[0].parent, seen[0]):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, (folder, oct(folder.stat().st_mode))


@pytest.mark.parametrize("bad", ["symlink", "other-user", "group-writable", "parent-writable-by-others",
                                 "parent-of-other-user"])
def test_claim_rgts_data_folder_is_refused_unless_yours_alone(world, tmp_path, monkeypatch, bad):
    root = tmp_path / "data"
    if bad.startswith("parent"):
        # A folder above the data folder that another local user can write in (or owns) lets
        # them rename the data folder away and put their own in its place between two pulls.
        root = tmp_path / "shared" / "data"
        root.parent.mkdir()
        root.mkdir(mode=0o700)
        if bad == "parent-writable-by-others":
            root.parent.chmod(0o777)
        else:
            import pwd
            if os.geteuid() != 0:
                pytest.skip("needs root to give a folder to another local user")
            try:
                nobody = pwd.getpwnam("nobody")
            except KeyError:
                pytest.skip("no `nobody` user on this machine to play the other local user")
            os.chown(root.parent, nobody.pw_uid, nobody.pw_gid)
    elif bad == "symlink":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        os.symlink(str(tmp_path / "elsewhere"), str(root))
    elif bad == "other-user":
        import pwd
        if os.geteuid() != 0:
            pytest.skip("needs root to give a folder to another local user")
        try:
            nobody = pwd.getpwnam("nobody")
        except KeyError:
            pytest.skip("no `nobody` user on this machine to play the other local user")
        root.mkdir(mode=0o700)
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
    else:
        root.mkdir()
        root.chmod(0o770)
    m = world.box.manifest({"out/w.bin": b"w"})
    m["run"] = "refused"
    world.box.pull_info("refused", m)
    world.box.answer("report-data", stdout={"schema": "rgt.report/1", "run": {"name": "refused", "state": "succeeded"}})
    proj = tmp_path / "proj"
    proj.mkdir()
    calls = len(world.box.calls())
    s = SharedServer(dict(world.env, TEST_CWD=str(proj), RGT_DATA_HOME=str(root)))
    try:
        for res in (s.call("pull_artifacts", host="local", run="refused"),
                    s.call("make_report", host="local", run="refused")):
            text = res.content[0].text
            assert res.is_error and "Error: rgt's data folder %s" % root in text and "Hint:" in text, text
            assert "Traceback" not in text
    finally:
        s.close()
    monkeypatch.chdir(proj)
    cli = Cli()("pull", "local", "refused", "--home", str(world.box.home), env=dict(world.env, RGT_DATA_HOME=str(root)))
    assert cli.exit_code == 2 and "Error: rgt's data folder" in cli.stderr and "Hint:" in cli.stderr, cli.stderr
    assert world.box.calls()[calls:] == []                     # refused before the box was asked
    assert _files_under(tmp_path / "elsewhere" if bad == "symlink" else root) == set()
    assert os.listdir(proj) == []
