"""install's upload half over a real sshd: stdin stream, sha256 checked on the box, atomic
replace, no sftp needed, and a Python 3.8 box interpreter."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rgt_client.box import build_cache
from rgt_client.box.remote_scripts import UPLOAD, parse_result
from rgt_client.box.transport import Target, run_python
from tests.sshd import sshd_binary, start_sshd

pytestmark = pytest.mark.ssh
PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"


@pytest.fixture(scope="module")
def sshd_nosftp(tmp_path_factory):
    if not sshd_binary():
        pytest.skip("openssh-server is not installed")
    server = start_sshd(tmp_path_factory.mktemp("sshd-nosftp"), sftp=False, aliases=("runpod-like",))
    yield server
    server.stop()


def upload(t: Target, data: bytes, sha: str) -> dict:
    res = run_python(t, UPLOAD, [sha, str(len(data)), "0", "10"], stdin=data, timeout=120)
    return parse_result(res.text, "upload", res.err)


def test_upload_without_sftp_then_idempotent(sshd_nosftp, tmp_path):
    assert "Subsystem" not in (sshd_nosftp.dir / "sshd_config").read_text()
    data, sha = build_cache.agent_bytes()
    home = tmp_path / "box home"
    t = Target("runpod-like", home=str(home), ssh_config=str(sshd_nosftp.config))
    first = upload(t, data, sha)
    assert first["ok"] and first["replaced"] and first["home"] == str(home)
    assert hashlib.sha256((home / "rgt-agent.pyz").read_bytes()).hexdigest() == sha
    assert (home / "agent.sha256").read_text().strip() == sha
    assert oct(home.stat().st_mode & 0o777) == "0o700"
    assert upload(t, data, sha)["replaced"] is False
    out = subprocess.run([sys.executable, str(home / "rgt-agent.pyz"), "--version"], capture_output=True)
    assert out.returncode == 0 and b"rgt-agent" in out.stdout


def test_damaged_upload_leaves_the_old_agent(sshd, tmp_path):
    data, sha = build_cache.agent_bytes()
    t = Target("rgt-box", home=str(tmp_path / "h"), ssh_config=str(sshd.config))
    upload(t, data, sha)
    bad = upload(t, data[:-10], sha)
    assert "arrived damaged" in bad["error"]
    assert hashlib.sha256((tmp_path / "h" / "rgt-agent.pyz").read_bytes()).hexdigest() == sha
    assert not [p for p in os.listdir(tmp_path / "h") if p.startswith(".tmp")]


@pytest.mark.skipif(not Path(PY38).exists(), reason="Python 3.8 is not installed at %s" % PY38)
def test_upload_under_python38(sshd, tmp_path):
    data, sha = build_cache.agent_bytes()
    t = Target("rgt-box", home=str(tmp_path / "h38"), ssh_config=str(sshd.config), python=PY38)
    res = upload(t, data, sha)
    assert res["ok"] and res["python_version"].startswith("3.8")
    out = subprocess.run([PY38, "-S", str(tmp_path / "h38" / "rgt-agent.pyz"), "version", "--json"],
                         capture_output=True)
    assert out.returncode == 0 and json.loads(out.stdout)["version"], out.stderr


def test_an_unchanged_agent_is_not_uploaded_again(sshd, tmp_path):
    """install re-sent the whole agent (369 KB over a far link) to say "unchanged": the box's
    sha256 is asked first, with no data on the wire."""
    data, sha = build_cache.agent_bytes()
    t = Target("rgt-box", home=str(tmp_path / "h"), ssh_config=str(sshd.config))

    def check() -> dict:
        res = run_python(t, UPLOAD, [sha, str(len(data)), "0", "10", "check"], timeout=120)
        return parse_result(res.text, "upload", res.err)
    assert check().get("need_upload") is True                 # nothing there yet
    assert upload(t, data, sha)["replaced"] is True
    pyz = tmp_path / "h" / "rgt-agent.pyz"
    before = pyz.stat().st_mtime_ns
    again = check()
    assert again["ok"] and not again.get("need_upload") and again["replaced"] is False
    assert again["sha256"] == sha and pyz.stat().st_mtime_ns == before and again.get("probe")
