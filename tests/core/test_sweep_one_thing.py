"""A sweep is one thing: submitted as one request (a cut submit or a daemon killed while it
expands leaves nothing or the whole sweep), its name apart from run names (`cancel` of a name that
is both asks which), and `group` no job key (a job could join another job's sweep)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.realbox import job, wait_for

CELLS = {"A": [str(i) for i in range(20)], "B": [str(i) for i in range(15)]}      # 300 runs


def _sweep(box, name="abl", cells=CELLS, run="sleep 60"):
    return job(name, box.workdir, {"name": "s", "run": run}, matrix=cells)


def _inbox(box):
    return sorted(p.name for p in (box.home / "inbox").glob("*.json"))


def _runs_of(box, group):
    out = []
    for p in (box.home / "runs").glob("*/state.json"):
        try:
            if json.loads(p.read_text()).get("group") == group:
                out.append(p.parent.name)
        except ValueError:
            pass
    return sorted(out)


def _daemon(box):
    """A daemon we hold the Popen of, not waited for: it expands the sweep before its first status."""
    proc = subprocess.Popen([sys.executable, "-m", "boxagent", "daemon"], env=box.env, cwd=str(box.tmp),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    box.daemons.append(proc)
    return proc


@pytest.mark.slow
def test_a_sweep_submit_cut_partway_leaves_nothing_or_the_whole_sweep(box):
    out = box.submit(_sweep(box))
    assert out.returncode == 0, out.stderr
    assert len(_inbox(box)) == 1                   # the whole sweep, as one request file
    proc = _daemon(box)
    wait_for(lambda: _runs_of(box, "abl"), 20, "the daemon expanding the sweep", interval=0.005)
    proc.send_signal(signal.SIGKILL)               # killed while it expands (or just after)
    proc.wait(10)
    cut = len(_runs_of(box, "abl"))
    _daemon(box)
    wait_for(lambda: len(_runs_of(box, "abl")) == 300 and not _inbox(box), 90, "the whole sweep queued")
    print("runs when the daemon was killed: %d of 300" % cut)
    assert len(set(_runs_of(box, "abl"))) == 300
    out = box.agent("cancel", "abl", "--wait", "30", timeout=90)
    assert out.returncode == 0, out.stderr
    ended = box.wait_event("group_finished", timeout=60)
    assert "0 of 300 succeeded" in ended["summary"]


def test_group_is_not_a_user_key_so_a_job_cannot_join_another_sweep(box):
    intruder = job("intruder", box.workdir, {"name": "s", "run": "true"}, group="abl", matrix={"A": "1"})
    out = box.submit(intruder)
    assert out.returncode == 2
    assert out.stderr.startswith("Error: ") and "group" in out.stderr and "\nHint: " in out.stderr


def test_cancel_of_a_name_that_is_both_a_run_and_a_sweep_asks_which(box):
    box.start()
    assert box.submit(job("abl", box.workdir, {"name": "s", "run": "sleep 60"}, gpus=0)).returncode == 0
    assert box.submit(_sweep(box, "abl", {"A": ["1", "2"]}, "sleep 60")).returncode == 0
    wait_for(lambda: len(_runs_of(box, "abl")) == 2, 20, "the sweep queued")
    out = box.agent("cancel", "abl")
    assert out.returncode == 2 and "both a run and a sweep" in out.stderr
    assert "--group abl" in out.stderr and "--run abl" in out.stderr
    out = box.agent("cancel", "--group", "abl", "--wait", "20")
    assert out.returncode == 0 and "sweep abl" in out.stdout, out.stdout + out.stderr
    assert {box.run_state(n)["state"] for n in ("abl-1", "abl-2")} == {"cancelled"}
    assert box.run_state("abl")["state"] in ("queued", "running")     # the plain run goes on
    out = box.agent("cancel", "--run", "abl", "--wait", "20")
    assert out.returncode == 0 and box.wait_run("abl")["state"] == "cancelled"
