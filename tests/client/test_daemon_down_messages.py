"""What the client says about a run while the box's daemon is down: one message per action,
each true. Seen on a box whose daemon had stopped: `cancel` printed that the cancel was queued,
then `Error: cancel on HOST failed: exit 3` with no hint (the cancel was honoured later), and
`logs` of a queued run said "no run named ..." while `status` listed it."""
from __future__ import annotations

import json

import pytest

from rgt_client import exitcodes
from tests.client.conftest import Cli, needs_daemon, stop_daemon

pytestmark = [needs_daemon]

JOB = '''name = "q1"
workdir = %(workdir)s
[[stage]]
name = "train"
run = "echo hi"
'''


@pytest.fixture(scope="module")
def down_box(tmp_path_factory):
    base = tmp_path_factory.mktemp("down")
    home, work = base / "box home", base / "work"
    work.mkdir()
    rgt = Cli(None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RGT_CLIENT_CONFIG_DIR", str(base / "client-config"))
        res = rgt("install", "local", "--home", str(home), "--profile", "local")
        assert res.exit_code == 0, res.output
        stop_daemon(home)
        job = base / "job.toml"
        job.write_text(JOB % {"workdir": json.dumps(str(work))})
        sub = rgt("run", "local", str(job), "--home", str(home))
        assert sub.exit_code == 0, sub.output
        yield rgt, home, base
    stop_daemon(home)


def test_logs_of_a_queued_run_while_the_daemon_is_down(down_box):
    rgt, home, _ = down_box
    status = rgt("status", "local", "--home", str(home))
    assert "run q1  queued" in status.stdout, status.output
    res = rgt("logs", "local", "q1", "--home", str(home))
    assert "no run named" not in res.output
    assert "run q1 is queued and has no stage log yet" in res.stderr and "Hint:" in res.stderr


def test_cancel_while_the_daemon_is_down_says_one_thing(down_box):
    rgt, home, _ = down_box
    res = rgt("cancel", "local", "q1", "--home", str(home))
    assert res.exit_code == exitcodes.AGENT_DOWN
    assert "cancel of run q1 queued, but the daemon is not running" in res.stdout
    assert "rgt-client install local" in res.stdout
    assert "Error:" not in res.output and "failed" not in res.output, res.output
