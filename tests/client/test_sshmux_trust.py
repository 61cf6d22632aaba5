"""Another local user cannot take over rgt's shared ssh connections.

Field attack: with $XDG_RUNTIME_DIR and ~/.cache missing, the control directory fell back to
$TMPDIR/rgt-ssh-UID, and the check followed symlinks: another user's link to a directory the
victim owns passed, and with the link flipped between two directories that user received 5 of
20 of the victim's `status` sessions (the remote command, its stdin, stdout and stderr).
Here the real client runs against the loopback sshd with its fallback in a world-writable,
sticky folder, and a second unix user (`nobody`) plants what an attacker would."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.clientproc import client_argv
from tests.localuser import as_user, other_user

pytestmark = [pytest.mark.ssh, pytest.mark.root]


@pytest.fixture
def shared_tmp(sshd, tmp_path):
    """A $TMPDIR like /tmp (1777), a HOME without ~/.cache, no XDG_RUNTIME_DIR, and an ssh config
    that lets rgt share connections."""
    # under /tmp itself: the other user must be able to reach it, as they reach the real /tmp
    shared = Path(tempfile.mkdtemp(prefix="rgt-shared-tmp-", dir="/tmp"))
    os.chmod(shared, 0o1777)
    home = tmp_path / "home"
    home.mkdir()
    cfg = tmp_path / "ssh_config"
    cfg.write_text("\n".join(line for line in sshd.config.read_text().splitlines()
                             if "ControlMaster" not in line) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env.update(TMPDIR=str(shared), HOME=str(home), RGT_SSH_MULTIPLEX="1")
    yield shared, cfg, env
    subprocess.run(["ssh", "-F", str(cfg), "-o", "ControlPath=%s/rgt-ssh-%d/%%C" % (shared, os.getuid()),
                    "-O", "exit", "rgt-box"], capture_output=True, timeout=10)
    shutil.rmtree(shared, ignore_errors=True)


def _status(cfg, env) -> subprocess.CompletedProcess:
    return subprocess.run(client_argv(["status", "rgt-box"], cfg), env=env, capture_output=True,
                          text=True, timeout=60)


def _sockets(root) -> list:
    out = []
    for dirpath, _dirs, files in os.walk(root):
        out += [os.path.join(dirpath, f) for f in files
                if stat.S_ISSOCK(os.lstat(os.path.join(dirpath, f)).st_mode)]
    return out


def test_claim_a_control_dir_symlinked_by_another_user_is_refused(shared_tmp, tmp_path):
    shared, cfg, env = shared_tmp
    nobody = other_user()
    victim_owned = tmp_path / "victims-own-dir"
    victim_owned.mkdir(mode=0o700)
    link = shared / ("rgt-ssh-%d" % os.getuid())
    as_user(nobody, lambda: os.symlink(str(victim_owned), str(link)))
    assert os.lstat(link).st_uid == nobody.pw_uid
    res = _status(cfg, env)
    assert "Traceback" not in res.stderr
    assert res.stderr.count("ssh connection sharing is off") == 1, res.stderr
    assert "is a symbolic link" in res.stderr
    assert _sockets(victim_owned) == [] and _sockets(shared) == []


def test_claim_a_control_dir_made_by_another_user_is_refused(shared_tmp):
    shared, cfg, env = shared_tmp
    nobody = other_user()
    planted = shared / ("rgt-ssh-%d" % os.getuid())

    def plant():
        os.mkdir(str(planted))
        os.chmod(str(planted), 0o777)
    as_user(nobody, plant)
    res = _status(cfg, env)
    assert "belongs to another user" in res.stderr, res.stderr
    assert _sockets(planted) == []


def test_claim_a_control_dir_open_to_others_is_refused(shared_tmp):
    shared, cfg, env = shared_tmp
    d = shared / ("rgt-ssh-%d" % os.getuid())
    d.mkdir()
    os.chmod(d, 0o755)
    res = _status(cfg, env)
    assert "is open to other users (mode 755)" in res.stderr, res.stderr
    assert _sockets(d) == []


def test_claim_a_control_dir_in_a_folder_others_may_swap_is_refused(shared_tmp):
    """World-writable without the sticky bit: another user could rename ours and put theirs."""
    shared, cfg, env = shared_tmp
    os.chmod(shared, 0o777)
    res = _status(cfg, env)
    assert "sits in a folder another user may change" in res.stderr, res.stderr
    assert _sockets(shared) == []


def test_claim_a_fresh_private_control_dir_shares_the_connection(shared_tmp):
    shared, cfg, env = shared_tmp
    res = _status(cfg, env)
    assert "sharing is off" not in res.stderr, res.stderr + res.stdout
    d = shared / ("rgt-ssh-%d" % os.getuid())
    st = os.lstat(d)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o777 == 0o700
    assert len(_sockets(d)) == 1         # the master lives in our own 0700 directory
