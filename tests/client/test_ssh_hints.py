"""Every ssh hint runs as written: on a real sshd, with the user's own -F config and the
known-hosts file it names, the commands a hint gives do what the hint says.

A changed host key's hint once said `ssh-keygen -R HOSTNAME`, which edited ~/.ssh/known_hosts
while the key lived, as `[127.0.0.1]:PORT`, in the file the user's config names."""
from __future__ import annotations

import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from rgt_client import exitcodes
from tests.client.conftest import Cli
from tests.sshd import SshServer, _user, sshd_binary, start_sshd

pytestmark = [pytest.mark.ssh, pytest.mark.slow]


def _block(alias: str, port: int, *lines: str) -> str:
    return "\n".join(["Host %s" % alias, "  HostName 127.0.0.1", "  Port %d" % port, "  User %s" % _user(),
                      "  LogLevel ERROR", "  ConnectTimeout 5", "  ControlMaster no", *lines]) + "\n"


@pytest.fixture
def own_sshd(tmp_path):
    """An sshd of this test's own: its host key is regenerated (the session's is shared)."""
    if not sshd_binary():
        pytest.skip("openssh-server is not installed (apt-get install openssh-server)")
    server = start_sshd(tmp_path / "sshd")
    yield server
    server.stop()


def _new_host_key(server: SshServer) -> None:
    """The box re-created behind the same address: a new host key, the same port."""
    server.stop()
    key = server.dir / "host_ed25519"
    for p in (key, Path(str(key) + ".pub")):
        p.unlink()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    log = open(server.dir / "sshd.log", "ab")
    server.proc = subprocess.Popen([sshd_binary() or "sshd", "-D", "-e", "-f", str(server.dir / "sshd_config")],
                                   stdout=log, stderr=log)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("sshd did not come back")


def _fingerprint(server: SshServer) -> str:
    out = subprocess.run(["ssh-keygen", "-lf", str(server.dir / "host_ed25519.pub")], capture_output=True, text=True)
    return out.stdout.split()[1]


def _hint(res) -> str:
    return next(line for line in res.stderr.splitlines() if line.strip().startswith("Hint: ")).strip()[len("Hint: "):]


def _sh(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)


def _config(tmp_path: Path, server: SshServer, known: Path, *lines: str) -> Path:
    cfg = tmp_path / "my ssh config"
    cfg.write_text(_block("farbox", server.port, "  IdentityFile %s" % server.key, "  IdentitiesOnly yes",
                          "  StrictHostKeyChecking yes", "  UserKnownHostsFile %s" % known, *lines))
    return cfg


def test_a_first_contact_shows_the_boxs_fingerprint_and_the_command_that_accepts_it(own_sshd, tmp_path):
    known = tmp_path / "known_hosts_of_my_config"
    rgt = Cli(_config(tmp_path, own_sshd, known))
    res = rgt("status", "farbox")
    assert res.exit_code == exitcodes.HOST_KEY, res.output
    hint = _hint(res)
    assert "the box offers %s" % _fingerprint(own_sshd) in hint, hint
    shown = re.search(r"\((ssh-keyscan [^)]*)\)", hint).group(1)
    assert _fingerprint(own_sshd) in _sh(shown).stdout
    accept = re.search(r"accept it: (.*)$", hint).group(1)
    assert _sh(accept).returncode == 0
    assert "[127.0.0.1]:%d" % own_sshd.port in known.read_text()
    assert rgt("status", "farbox").exit_code != exitcodes.HOST_KEY


def test_a_changed_host_keys_hint_removes_the_key_where_the_users_config_keeps_it(own_sshd, tmp_path):
    known = tmp_path / "known_hosts_of_my_config"
    cfg = _config(tmp_path, own_sshd, known)
    assert own_sshd.ssh("true").returncode == 0
    assert _sh("ssh -F '%s' -o StrictHostKeyChecking=accept-new farbox true" % cfg).returncode == 0
    _new_host_key(own_sshd)
    rgt = Cli(cfg)
    res = rgt("status", "farbox")
    assert res.exit_code == exitcodes.HOST_KEY and "host key has CHANGED" in res.stderr, res.output
    hint = _hint(res)
    assert "the box offers %s" % _fingerprint(own_sshd) in hint, hint
    forget = re.search(r"remove the old key: (.*?), then accept", hint).group(1)
    assert forget == "ssh-keygen -f %s -R '[127.0.0.1]:%d'" % (known, own_sshd.port)
    assert _sh(forget).returncode == 0 and "[127.0.0.1]" not in known.read_text()
    accept = re.search(r"accept the new one: (.*)$", hint).group(1)
    assert _sh(accept).returncode == 0
    assert rgt("status", "farbox").exit_code != exitcodes.HOST_KEY


def test_an_auth_hint_names_the_key_the_box_refused_not_a_missing_agent(own_sshd, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    stranger = tmp_path / "id_stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    cfg = tmp_path / "cfg"
    cfg.write_text(_block("farbox", own_sshd.port, "  IdentityFile %s" % stranger, "  IdentitiesOnly yes",
                          "  StrictHostKeyChecking no", "  UserKnownHostsFile /dev/null",
                          "  PasswordAuthentication no", "  KbdInteractiveAuthentication no"))
    res = Cli(cfg)("status", "farbox")
    assert res.exit_code == exitcodes.AUTH_FAILED, res.output
    hint = _hint(res)
    assert "refused the key %s" % stranger in hint and "ssh-agent" not in hint, hint
    then = re.search(r"; then: (.*)$", hint).group(1)
    assert then == "ssh -F %s farbox true" % cfg and _sh(then).returncode != 0
    # done as the hint says (the key into the box's authorized_keys), its command now logs in
    with open(own_sshd.dir / "authorized_keys", "a") as fh:
        fh.write(Path(str(stranger) + ".pub").read_text())
    assert _sh(then).returncode == 0


def test_ssh_stderr_lines_stay_lines(own_sshd, tmp_path):
    known = tmp_path / "known"
    cfg = _config(tmp_path, own_sshd, known)
    _sh("ssh -F '%s' -o StrictHostKeyChecking=accept-new farbox true" % cfg)
    _new_host_key(own_sshd)
    res = Cli(cfg)("status", "farbox")
    error = res.stderr.split("Hint: ")[0]
    assert "\n    Host key verification failed." in error, error
