"""ssh failures told apart on the real sshd: a first contact with an unknown host key, a changed
host key, an unusable identity (cron without its ssh-agent looks the same to the box), a stopped
sshd, and a host name that does not resolve. Each has its own exit code, patrol verdict and hint,
and the hint quotes the user's own `ssh -F FILE`."""
from __future__ import annotations

import socket

import pytest

from rgt_client import exitcodes
from tests.client.conftest import Cli
from tests.sshd import _user

pytestmark = pytest.mark.ssh


def _block(alias: str, port: int, *lines: str) -> str:
    return "\n".join(["Host %s" % alias, "  HostName 127.0.0.1", "  Port %d" % port, "  User %s" % _user(),
                      "  LogLevel ERROR", "  ConnectTimeout 5", "  ControlMaster no", *lines]) + "\n"


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def trouble(sshd, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)          # as under cron
    junk = tmp_path / "junk_key"
    junk.write_text("not a key\n")
    junk.chmod(0o600)
    good = "  IdentityFile %s\n  IdentitiesOnly yes" % sshd.key
    changed = tmp_path / "known_changed"
    changed.write_text("[127.0.0.1]:%d ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKp0y6s8Qx8sfWbuhV8z6wR1t2Q7XcX6N9mYk6yqZ7cA\n"
                       % sshd.port)
    cfg = tmp_path / "ssh config"
    cfg.write_text(
        _block("newbox", sshd.port, good, "  StrictHostKeyChecking yes", "  UserKnownHostsFile %s" % (tmp_path / "empty_known"))
        + _block("movedbox", sshd.port, good, "  StrictHostKeyChecking yes", "  UserKnownHostsFile %s" % changed)
        + _block("nokey", sshd.port, "  IdentityFile %s" % junk, "  IdentitiesOnly yes", "  StrictHostKeyChecking no",
                 "  UserKnownHostsFile /dev/null", "  PasswordAuthentication no", "  KbdInteractiveAuthentication no")
        + _block("downbox", _closed_port(), good, "  StrictHostKeyChecking no", "  UserKnownHostsFile /dev/null")
        + "Host gpu-trainer\n  HostName gpu-trainer.invalid\n")
    return cfg


@pytest.mark.parametrize("host, code, word, said, hinted", [
    ("newbox", exitcodes.HOST_KEY, "HOST-KEY", "host key is not known here yet (first contact)",
     "-o StrictHostKeyChecking=accept-new newbox true"),
    ("movedbox", exitcodes.HOST_KEY, "HOST-KEY", "host key has CHANGED", "-R '[127.0.0.1]:"),
    ("nokey", exitcodes.AUTH_FAILED, "AUTH-FAILED", "refused the login (authentication failed)",
     "the box refused the key"),
    ("downbox", exitcodes.UNREACHABLE, "UNREACHABLE", "cannot reach downbox", "check the box is up"),
    ("gpu-trainr", exitcodes.UNREACHABLE, "UNREACHABLE", "no host named gpu-trainr", "did you mean gpu-trainer?"),
])
def test_each_ssh_failure_has_its_own_code_verdict_and_hint(trouble, host, code, word, said, hinted):
    rgt = Cli(trouble)
    res = rgt("status", host)
    assert res.exit_code == code, res.output
    err = res.stderr
    assert said in err and hinted in err, err
    assert "ssh -F '%s'" % trouble in err                  # the user's own config, quoted
    patrol = rgt("patrol", host)
    assert patrol.exit_code == code and word in patrol.stdout, patrol.output
