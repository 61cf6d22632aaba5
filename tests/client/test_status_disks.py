"""`status` shows one disk line per filesystem: the workdir of every run shown sits on the state
dir's disk on most boxes, and it printed six identical lines for one filesystem. Real sshd,
real daemon."""
from __future__ import annotations

import pytest

from tests.client.conftest import needs_daemon, stop_daemon
from tests.client.test_e2e import install

pytestmark = [pytest.mark.ssh, pytest.mark.slow, needs_daemon]


def test_status_shows_one_disk_line_for_runs_whose_workdirs_share_a_filesystem(rgt, tmp_path):
    home = tmp_path / "home"
    install(rgt, home)
    try:
        for i in range(3):
            work = tmp_path / ("work%d" % i)
            work.mkdir()
            res = rgt("run", "rgt-box", "--home", str(home), "--name", "r%d" % i, "--workdir", str(work), "--", "true")
            assert res.exit_code == 0, res.output
            assert rgt("watch", "rgt-box", "r%d" % i, "--max-wait", "60s", "--home", str(home)).exit_code == 0
        res = rgt("status", "rgt-box", "--home", str(home))
        disks = [line for line in res.stdout.splitlines() if line.startswith("  disk ")]
        assert len(disks) == 1, res.stdout
        assert "workdir" in disks[0] and "state" in disks[0] and "also " in disks[0], disks
    finally:
        stop_daemon(home)
