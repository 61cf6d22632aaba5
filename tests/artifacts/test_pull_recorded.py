"""A verified pull is recorded in status.json (runs[].pull_verified: when, where, how many
files), and every screen that said "pull next" reads it: patrol said "pull next" after a
verified pull the box had recorded. Real sshd, real daemon."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rgt_client.status import statusdata
from tests.client.conftest import needs_daemon, stop_daemon, wait_for
from tests.client.test_e2e import install

pytestmark = [pytest.mark.ssh, pytest.mark.slow, needs_daemon]


@pytest.fixture
def done_box(rgt, tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    install(rgt, home)
    job = tmp_path / "job.toml"
    job.write_text('name = "r1"\nworkdir = %s\n[[stage]]\nname = "train"\nrun = "mkdir -p ck; echo w > ck/a.pt; '
                   'echo x > ck/b.pt"\n[artifacts]\ninclude = ["ck/**"]\n' % json.dumps(str(work)))
    assert rgt("run", "rgt-box", str(job), "--home", str(home)).exit_code == 0
    res = rgt("watch", "rgt-box", "r1", "--max-wait", "60s", "--home", str(home))
    assert res.exit_code == 0, res.output
    yield home
    stop_daemon(home)


def test_after_a_verified_pull_patrol_and_status_say_where_it_went_not_pull_next(rgt, done_box, tmp_path):
    home = done_box
    before = rgt("patrol", "rgt-box", "--home", str(home))
    assert "DONE" in before.stdout and "pull next: rgt-client pull rgt-box r1" in before.stdout, before.output
    dest = tmp_path / "pulled"
    res = rgt("pull", "rgt-box", "r1", str(dest), "--home", str(home))
    assert res.exit_code == 0, res.output
    patrol = rgt("patrol", "rgt-box", "--home", str(home))
    assert "pull next" not in patrol.stdout, patrol.stdout
    assert "pulled and verified at " in patrol.stdout and "into %s (2 files)" % dest in patrol.stdout, patrol.stdout
    status = rgt("status", "rgt-box", "--home", str(home))
    assert "pull      pulled and verified at" in status.stdout, status.stdout
    doc = json.loads(rgt("status", "rgt-box", "--json", "--home", str(home)).stdout)
    statusdata.validate(doc, "rgt-box")                      # the client's contract holds the new field
    run = next(r for r in doc["runs"] if r["name"] == "r1")
    assert run["pull_verified"]["files"] == 2 and run["pull_verified"]["dest"] == str(dest)
    assert run["pull_verified"]["current"] is True
    # the daemon's own status.json has it too (rewritten at its next tick)
    wait_for(lambda: any(r.get("pull_verified", {}).get("files") == 2
                         for r in json.loads((Path(home) / "status.json").read_text()).get("runs") or []), 20)
