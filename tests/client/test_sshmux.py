"""One ssh connection per box, on the real sshd: rgt's calls share a master (ControlMaster),
a user's own Control* settings are left alone, a wedged master never hangs a later call, and
`ssh-close` ends it."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from rgt_client.box import sshmux
from rgt_client.errors import ClientError
from rgt_client.box.transport import Target, run_remote
from tests.client.conftest import Cli

pytestmark = pytest.mark.ssh


@pytest.fixture
def mux_config(sshd, tmp_path, monkeypatch):
    """The test sshd's client config without its `ControlMaster no`, and a private ControlPath dir."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text("\n".join(line for line in sshd.config.read_text().splitlines()
                             if "ControlMaster" not in line) + "\n")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    yield cfg
    sshmux.close("rgt-box", str(cfg))


def _check(cfg) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", "-F", str(cfg)] + sshmux.options("rgt-box", str(cfg)) + ["-O", "check", "rgt-box"],
                          capture_output=True, text=True, timeout=10)


def test_rgt_calls_share_one_master_connection(mux_config):
    opts = sshmux.options("rgt-box", str(mux_config))
    assert "ControlMaster=auto" in opts and "ControlPersist=60s" in opts
    t = Target("rgt-box", ssh_config=str(mux_config))
    assert run_remote(t, "true", timeout=30).rc == 0
    check = _check(mux_config)
    assert check.returncode == 0 and "Master running" in check.stderr
    sock = sshmux.socket_path("rgt-box", str(mux_config))
    assert sock and os.path.exists(sock) and oct(os.stat(os.path.dirname(sock)).st_mode & 0o777) == "0o700"
    t0 = time.monotonic()
    assert run_remote(t, "echo again", timeout=30).stdout == b"again\n"
    assert time.monotonic() - t0 < 2.0


def test_a_users_own_control_settings_are_left_alone(sshd, monkeypatch):
    assert "ControlMaster no" in sshd.config.read_text()
    assert sshmux.options("rgt-box", str(sshd.config)) == []
    monkeypatch.setenv(sshmux.ENV_OFF, "0")
    assert sshmux.options("any-host", None) == []


@pytest.mark.slow
def test_a_wedged_master_is_replaced_not_waited_on(mux_config):
    t = Target("rgt-box", ssh_config=str(mux_config))
    assert run_remote(t, "true", timeout=30).rc == 0
    pid = int(_check(mux_config).stderr.split("pid=")[1].split(")")[0])
    os.kill(pid, signal.SIGSTOP)          # a master that accepts and never answers
    try:
        with pytest.raises(ClientError):
            run_remote(t, "true", timeout=3)
        t0 = time.monotonic()
        assert run_remote(t, "echo fresh", timeout=30).stdout == b"fresh\n"
        assert time.monotonic() - t0 < 10
    finally:
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM)


def _master_pid(cfg) -> int:
    return int(_check(cfg).stderr.split("pid=")[1].split(")")[0])


@pytest.mark.slow
def test_a_stalled_master_is_found_within_seconds_and_the_status_retried_on_a_fresh_connection(mux_config, homes):
    """A master that accepts and never answers held the next `status` for 125 s, then blamed the
    network. Now it is asked over its socket after 2 s, set aside, and the status made again."""
    home = homes.new()
    rgt = Cli(mux_config)
    assert rgt("install", "rgt-box", "--home", str(home)).exit_code == 0
    stopped = _master_pid(mux_config)
    os.kill(stopped, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        res = rgt("status", "rgt-box", "--home", str(home))
        took = time.monotonic() - t0
        assert res.exit_code == 0, res.output
        assert "rgt-box" in res.stdout and took < 15, (took, res.output)
        assert "did not answer within 4 s" in res.stderr and "new connection" in res.stderr, res.stderr
        assert "never came up" not in res.output
        assert _master_pid(mux_config) != stopped       # the status made a new master; later calls use it
    finally:
        os.kill(stopped, signal.SIGCONT)
        os.kill(stopped, signal.SIGTERM)


def test_a_slow_box_behind_a_live_master_is_waited_on_not_retried(mux_config):
    """Asking the master costs nothing on the wire: a command that takes longer than the 2 s is
    not a stall, and runs once."""
    t = Target("rgt-box", ssh_config=str(mux_config))
    assert run_remote(t, "true", timeout=30).rc == 0
    res = run_remote(t, "sleep 3; echo once", timeout=30)
    assert res.rc == 0 and res.stdout == b"once\n"


def test_ssh_close_ends_the_master(mux_config):
    t = Target("rgt-box", ssh_config=str(mux_config))
    assert run_remote(t, "true", timeout=30).rc == 0
    res = Cli(mux_config)("ssh-close", "rgt-box")
    assert res.exit_code == 0 and "closed" in res.stdout, res.output
    assert _check(mux_config).returncode != 0
    again = Cli(mux_config)("ssh-close", "rgt-box")
    assert again.exit_code == 0 and "no shared connection was open" in again.stdout
