"""`rgt-client profiles` and `profiles show NAME|FILE [--json]`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rgt_client.profiles import catalog as P

REPO = Path(__file__).resolve().parents[2]


def test_profiles_table_lists_every_profile(cli):
    r = cli("profiles")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAME", "PLATFORM", "VERIFIED"]
    names = [l.split()[0] for l in lines[1:] if l.strip() and not l.startswith("Details")]
    assert names == P.list_profiles()
    autodl = [l for l in lines if l.startswith("autodl ")][0]
    assert "关机 power-off" in autodl and "15d" in autodl
    vast = [l for l in lines if l.startswith("vastai ")][0]
    assert "YES" in vast  # still bills after stop


def test_profiles_json(cli):
    r = cli("profiles", "--json")
    rows = json.loads(r.stdout)
    by = {row["name"]: row for row in rows}
    assert by["lambda"]["stop_verb"] == "terminate" and by["lambda"]["irreversible"] is True
    assert by["autodl"]["verified"] is True and by["autodl"]["danger_clocks"][0]["after"] == "15d"


def test_show_renders_matrix_and_tables(cli):
    r = cli("profiles", "show", "autodl")
    assert r.exit_code == 0, r.output
    for needle in ("Survival", "Teardown", "Danger clocks", "Conveniences", "/root/autodl-fs",
                   "after 15 days", "inode caps", "/root/autodl-fs=200000"):
        assert needle in r.stdout, needle


def test_show_json_is_the_validated_profile(cli):
    r = cli("profiles", "show", "vastai", "--json")
    assert json.loads(r.stdout) == P.load_profile("vastai")


def test_show_user_file_and_errors(cli, tmp_path):
    good = tmp_path / "lab.toml"
    good.write_text('platform = "Lab"\nkind = "local"\nverified = false\n')
    assert cli("profiles", "show", str(good)).exit_code == 0
    bad = tmp_path / "bad.toml"
    bad.write_text('platform = "Lab"\nkind = "local"\nverified = "no"\n')
    r = cli("profiles", "show", str(bad))
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: %s: verified: expected true or false" % bad)
    assert "Hint:" in r.stderr and "Traceback" not in r.stderr + r.stdout
    r = cli("profiles", "show", "nosuch")
    assert r.exit_code == 2 and "unknown profile 'nosuch'" in r.stderr


def test_real_console_script(tmp_path):
    """The installed entry point, as a user runs it (a real subprocess)."""
    code = "import sys; from rgt_client.cli import main; sys.argv = ['rgt-client'] + sys.argv[1:]; main()"
    out = subprocess.run([sys.executable, "-c", code, "profiles", "show", "lambda"], capture_output=True,
                         text=True, timeout=60, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "terminate" in out.stdout and "ubuntu" in out.stdout


def test_wheel_layout_finds_packaged_profiles(tmp_path):
    """A wheel install has rgt_client/_profiles/*.toml and no repo: the client must find them
    there (pyproject maps rgt_client._profiles to profiles/)."""
    import shutil
    pkg = tmp_path / "site" / "rgt_client"
    shutil.copytree(REPO / "rgt_client", pkg)
    shutil.copytree(REPO / "profiles", pkg / "_profiles")
    code = "from rgt_client.profiles import catalog as P; print(P.profiles_dir()); print(len(P.list_profiles()))"
    env = {k: v for k, v in os.environ.items() if k != "RGT_PROFILES_DIR"}
    env["PYTHONPATH"] = str(tmp_path / "site")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=env, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    where, count = out.stdout.split()
    assert where == str(pkg / "_profiles") and int(count) == len(P.list_profiles())
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert cfg["tool"]["setuptools"]["package-dir"]["rgt_client._profiles"] == "profiles"
    assert "*.toml" in cfg["tool"]["setuptools"]["package-data"]["rgt_client._profiles"]
