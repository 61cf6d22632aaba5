"""End to end over the real sshd, when things go wrong: a failing stage, cancel, resume,
patrol's RUN-FAILED and AGENT-DOWN, watch giving up, status with the daemon dead."""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from rgt_client import exitcodes
from tests.client.conftest import Cli, needs_daemon, stop_daemon, wait_for
from tests.client.test_e2e import _state, install

pytestmark = [pytest.mark.ssh, needs_daemon]
PY38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"


@pytest.fixture(scope="module")
def trouble(sshd, tmp_path_factory):
    base = tmp_path_factory.mktemp("trouble")
    home = base / "trouble home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RGT_CLIENT_CONFIG_DIR", str(base / "client-config"))
        rgt = Cli(sshd.config)
        # the box's python: 3.8 where the machine has it (install's box-side scripts, the daemon
        # and logs --follow all run under it), else this one
        res = install(rgt, home, "--deps", "--deps-timeout", "0.05s",
                      *(["--python", PY38] if Path(PY38).exists() else []))
        yield rgt, home, res
    stop_daemon(home)


def test_deps_that_do_not_finish_in_time_never_fail_the_install(trouble):
    out = trouble[2].stdout
    assert "warning  pip install of psutil/requests/watchdog failed" in out and "did not finish within" in out
    assert "daemon   running" in out


@pytest.mark.slow
def test_failure_cancel_resume_and_patrol(trouble, tmp_path):
    rgt, home, _ = trouble
    res = rgt("run", "rgt-box", "--home", str(home), "--name", "bad", "--workdir", str(tmp_path), "--",
              "echo about to fail; exit 3")
    assert res.exit_code == 0, res.output
    res = rgt("watch", "rgt-box", "bad", "--every", "0.2s", "--max-wait", "30s", "--home", str(home))
    assert res.exit_code == exitcodes.RUN_FAILED, res.output
    status = rgt("status", "rgt-box", "--home", str(home))
    assert "✗ main" in status.stdout and "cause:" in status.stdout
    res = rgt("run", "rgt-box", "--home", str(home), "--name", "long", "--workdir", str(tmp_path), "--",
              "sleep 30")
    wait_for(lambda: _state(home, "long") == "running", 20)
    res = rgt("patrol", "rgt-box", "--home", str(home))
    assert res.exit_code == exitcodes.RUN_FAILED and "RUN-FAILED" in res.stdout, res.output
    res = rgt("cancel", "rgt-box", "long", "--home", str(home))
    assert res.exit_code == 0, res.output
    assert wait_for(lambda: _state(home, "long") == "cancelled", 20)
    res = rgt("resume", "rgt-box", "long", "--home", str(home))
    assert res.exit_code == 0, res.output
    wait_for(lambda: _state(home, "long") in ("queued", "running"), 20)
    rgt("cancel", "rgt-box", "long", "--home", str(home))


def test_logs_follow_streams_until_the_run_ends(trouble, tmp_path):
    """Under the box's Python 3.8 where installed: the follow script runs there."""
    rgt, home, _ = trouble
    rgt("run", "rgt-box", "--home", str(home), "--name", "talk", "--workdir", str(tmp_path), "--",
        "for i in 1 2 3 4; do echo line-$i; sleep 0.3; done")
    res = rgt("logs", "rgt-box", "talk", "--follow", "--max-wait", "30s", "--home", str(home))
    assert res.exit_code == 0, res.output
    assert [ln for ln in res.stdout.splitlines() if ln.startswith("line-")] == ["line-1", "line-2", "line-3", "line-4"]


def test_logs_follow_prints_a_header_when_the_chain_moves_to_the_next_stage(trouble, tmp_path):
    """It printed the next stage's lines straight after the last one's, with nothing between."""
    rgt, home, _ = trouble
    job = tmp_path / "two.toml"
    job.write_text('name = "two"\nworkdir = %s\n[[stage]]\nname = "first"\nrun = "echo a-1; sleep 1; echo a-2"\n'
                   '[[stage]]\nname = "second"\nrun = "echo b-1; sleep 0.5; echo b-2"\n' % json.dumps(str(tmp_path)))
    assert rgt("run", "rgt-box", str(job), "--home", str(home)).exit_code == 0
    res = rgt("logs", "rgt-box", "two", "--follow", "--max-wait", "30s", "--home", str(home))
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    i = lines.index("==> second (attempt 1) <==")
    assert "a-2" in lines[:i] and lines[i + 1:i + 3] == ["b-1", "b-2"], lines


@pytest.mark.slow
def test_watch_gives_up_with_6_and_agent_down_is_3(trouble, tmp_path):
    """Last in this file: it stops the daemon."""
    rgt, home, _ = trouble
    rgt("run", "rgt-box", "--home", str(home), "--name", "slow", "--workdir", str(tmp_path), "--", "sleep 20")
    t0 = time.monotonic()
    res = rgt("watch", "rgt-box", "slow", "--every", "0.2s", "--max-wait", "1s", "--home", str(home))
    assert res.exit_code == exitcodes.GAVE_UP and "gave up" in res.stdout
    assert re.search(r"run slow was not finished when last seen \d+s ago: slow running stage main", res.stdout), \
        res.stdout
    assert time.monotonic() - t0 < 10
    stop_daemon(home)
    res = rgt("status", "rgt-box", "--home", str(home))
    assert res.exit_code == exitcodes.AGENT_DOWN and "agent NOT running" in res.stdout and "run slow" in res.stdout
    res = rgt("watch", "rgt-box", "slow", "--every", "0.1s", "--max-wait", "30s", "--home", str(home))
    assert res.exit_code == exitcodes.AGENT_DOWN, res.output
    res = rgt("patrol", "rgt-box", "--home", str(home))
    assert res.exit_code == exitcodes.AGENT_DOWN and "AGENT-DOWN" in res.stdout
