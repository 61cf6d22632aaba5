"""A sweep through the client on a box of 4 (fake) GPUs: `run` of a [matrix] job says what it
queued and how to cancel it all, `status` and `patrol` say which run holds which GPU, and
`cancel GROUP` ends every run of the sweep."""
from __future__ import annotations

import json

import pytest

from tests.client.conftest import Cli, needs_daemon, stop_daemon, wait_for
from tests.client.test_e2e import _state
from tests.health.conftest import healthy

pytestmark = [needs_daemon]

JOB = '''name = "abl"
workdir = %(workdir)s
gpus = 1
[matrix]
LR = ["1e-3", "3e-4"]
SEED = ["1", "2"]
[[stage]]
name = "train"
run = "echo $LR $SEED; sleep 60"
'''


@pytest.fixture
def gpu_home(tmp_path, fake_nvml_lib, monkeypatch):
    state = tmp_path / "nvml.json"
    state.write_text(json.dumps(healthy(4)))
    (tmp_path / "kmsg").write_text("")
    # `local` runs the agent on this machine with this environment: the daemon sees 4 fake GPUs
    monkeypatch.setenv("RGT_NVML_LIB", str(fake_nvml_lib))
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    monkeypatch.setenv("RGT_KMSG_PATH", str(tmp_path / "kmsg"))
    home = tmp_path / "box home"
    rgt = Cli(None)
    res = rgt("install", "local", "--home", str(home), "--sample-every", "1s")
    assert res.exit_code == 0, res.output
    yield rgt, home
    stop_daemon(home)


def test_a_sweep_through_the_client(gpu_home, tmp_path):
    rgt, home = gpu_home
    work = tmp_path / "work"
    work.mkdir()
    job = tmp_path / "abl.toml"
    job.write_text(JOB % {"workdir": json.dumps(str(work))})
    res = rgt("run", "local", str(job), "--home", str(home))
    assert res.exit_code == 0, res.output
    assert "submitted sweep abl to local: 4 run(s) (abl-1 .. abl-4)" in res.stdout, res.stdout
    assert "rgt-client cancel local abl" in res.stdout
    wait_for(lambda: all(_state(home, "abl-%d" % i) == "running" for i in range(1, 5)), 30)

    def busy():
        out = rgt("status", "local", "--home", str(home)).stdout
        return out if "4/4 GPUs busy" in out else None
    text = wait_for(busy, 20)
    held = next(ln for ln in text.splitlines() if "GPUs busy" in ln)
    # first fit in submission order: each run on the lowest free index
    assert held.split(": ", 1)[1] == "0 abl-1, 1 abl-2, 2 abl-3, 3 abl-4", held
    patrol = rgt("patrol", "local", "--home", str(home))
    assert patrol.exit_code == 0 and "HEALTHY" in patrol.stdout and "4/4 GPUs busy" in patrol.stdout, patrol.output

    res = rgt("cancel", "local", "abl", "--home", str(home))
    assert res.exit_code == 0 and "sweep abl:" in res.stdout, res.output
    wait_for(lambda: all(_state(home, "abl-%d" % i) == "cancelled" for i in range(1, 5)), 30)


def test_cancel_of_a_finished_sweep_and_of_no_such_name(gpu_home, tmp_path):
    rgt, home = gpu_home
    work = tmp_path / "work"
    work.mkdir()
    job = tmp_path / "quick.toml"
    job.write_text((JOB % {"workdir": json.dumps(str(work))}).replace("abl", "quick").replace("sleep 60", "true"))
    assert rgt("run", "local", str(job), "--home", str(home)).exit_code == 0
    wait_for(lambda: all(_state(home, "quick-%d" % i) == "succeeded" for i in range(1, 5)), 30)
    res = rgt("cancel", "local", "quick", "--home", str(home))
    assert res.exit_code == 0 and "none of its 4 run(s) is live" in res.stdout, res.output
    res = rgt("cancel", "local", "nosuch", "--home", str(home))
    assert res.exit_code == 2 and "no run 'nosuch'" in res.output and "quick-1" in res.output, res.output


def test_install_max_parallel_reaches_the_box_and_a_bad_value_stops_before_it(tmp_path):
    rgt, home = Cli(None), tmp_path / "home"
    try:
        res = rgt("install", "local", "--home", str(home), "--max-parallel", "3")
        assert res.exit_code == 0, res.output
        assert json.loads((home / "config.json").read_text())["max_parallel"] == 3
        before = (home / "config.json").read_text()
        for bad in ("0", "two"):
            res = rgt("install", "local", "--home", str(home), "--max-parallel", bad)
            assert res.exit_code == 2 and "Error:" in res.output and "max-parallel" in res.output, res.output
        assert (home / "config.json").read_text() == before
    finally:
        stop_daemon(home)
