"""Real failures through the real daemon (the core's `box`: python -m boxagent in a temp
RGT_HOME, fast ticks): the cause written into state.json is what the user will read.
The real cgroup OOM kill through the daemon is tests/health/test_oom_daemon.py."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from boxagent.base.procs import group_members
from boxagent.base.roots import Roots
from tests.realbox import job, wait_for
from tests.mounts import tmpfs

PY = sys.executable
FILL_BYTES = ("import time\nf = open('blob', 'wb')\nprint('step 1/10 loss 1.0', flush=True)\n"
              "try:\n    while True:\n        f.write(b'x' * 65536)\n        f.flush()\n"
              "except OSError:\n    time.sleep(1.5)   # let the health sampler see the full disk\n"
              "    raise\n")
FILL_INODES = ("import time\nprint('step 1/10 loss 1.0', flush=True)\ni = 0\n"
               "try:\n    while True:\n        open('f%d' % i, 'w').close()\n        i += 1\n"
               "except OSError:\n    time.sleep(1.5)\n    raise\n")
SLEEPER = "import time\nprint('step 1/100 loss 2.0', flush=True)\ntime.sleep(60)\n"


def _pidinfo(box, run, stage, attempt=1):
    p = box.home / "runs" / run / "stages" / ("%s.%d.pid" % (stage, attempt))
    return wait_for(lambda: p.exists() and json.loads(p.read_text()), 10, "the stage pid file")


def _command_pid(box, run, stage, marker):
    """The stage's python (not its shim): found in its process group by its argv."""
    pgid = _pidinfo(box, run, stage)["pgid"]

    def find():
        for pid in group_members(Roots(), pgid):
            try:
                argv = open("/proc/%d/cmdline" % pid, "rb").read()
            except OSError:
                continue
            if marker.encode() in argv and b"exec-stage" not in argv:
                return pid
        return None
    return wait_for(find, 10, "the stage command")


def _cause(box, run):
    state = box.wait_run(run, timeout=30)
    assert state["state"] in ("failed", "interrupted"), state
    return state["stages"][-1]["cause"]


@pytest.mark.root
@pytest.mark.slow
def test_real_disk_full_in_a_small_tmpfs(box):
    with tmpfs(box.tmp / "small", "size=2m,nr_inodes=1000") as mnt:
        (mnt / "fill.py").write_text(FILL_BYTES)
        box.submit(job("df", mnt, {"name": "train", "run": "%s fill.py" % PY}))
        box.start()
        cause = _cause(box, "df")
        assert cause["class"] == "disk_full", cause
        assert "No space left on device" in cause["evidence"][0]
        assert any("%s: 100%% of bytes used" % mnt in e for e in cause["evidence"]), cause
        assert cause["retryable"] is False


@pytest.mark.root
@pytest.mark.slow
def test_real_inode_exhaustion_with_bytes_free_is_inodes_full(box):
    with tmpfs(box.tmp / "few", "size=64m,nr_inodes=200") as mnt:
        (mnt / "fill.py").write_text(FILL_INODES)
        box.submit(job("inodes", mnt, {"name": "train", "run": "%s fill.py" % PY}))
        box.start()
        cause = _cause(box, "inodes")
        assert cause["class"] == "inodes_full", cause
        assert any("of inodes used while bytes are" in e for e in cause["evidence"]), cause


@pytest.mark.slow
def test_real_sigkill_from_outside_is_killed(box):
    (box.workdir / "sleeper.py").write_text(SLEEPER)
    box.submit(job("k9", box.workdir, {"name": "train", "run": "%s sleeper.py" % PY, "retries": 2}))
    box.start()
    box.wait_stage("k9", "train", "running")
    os.kill(_command_pid(box, "k9", "train", "sleeper.py"), signal.SIGKILL)
    cause = _cause(box, "k9")
    assert cause["class"] == "killed", cause
    assert "SIGKILL" in " ".join(cause["evidence"])
    assert cause["retryable"] is False
    assert box.stage("k9", "train")["attempt"] == 1          # a kill is not retried


@pytest.mark.slow
def test_pgrep_self_match(box):
    """The trap: `pgrep -f CMD` as a liveness check also matches a look-alike (or itself) and
    never says "gone". rgt identifies the stage by pid + start time: when the stage's whole
    process group is killed (shim included: no exit status), it is reported gone at once,
    with the evidence that decides how, while a decoy with the same command line lives on."""
    (box.workdir / "sleeper.py").write_text(SLEEPER)
    box.submit(job("self", box.workdir, {"name": "train", "run": "%s sleeper.py" % PY}))
    box.start()
    box.wait_stage("self", "train", "running")
    info = _pidinfo(box, "self", "train")
    decoy = subprocess.Popen([PY, "sleeper.py"], cwd=str(box.workdir), stdout=subprocess.DEVNULL)
    try:
        t0 = time.monotonic()
        os.killpg(info["pgid"], signal.SIGKILL)
        if info.get("shim_pid") and info["shim_pid"] != info["pgid"]:
            try:
                os.killpg(info["shim_pid"], signal.SIGKILL)
            except OSError:
                pass
        cause = _cause(box, "self")
        assert time.monotonic() - t0 < 10
        assert subprocess.run(["pgrep", "-f", "sleeper.py"], capture_output=True).returncode == 0
        assert cause["class"] == "killed", cause
        assert "no reboot" in cause["summary"] or "SIGKILL" in " ".join(cause["evidence"]), cause
    finally:
        decoy.kill()
        decoy.wait()


@pytest.mark.slow
def test_simulated_reboot_is_machine_restart_never_oom(box):
    (box.workdir / "sleeper.py").write_text(SLEEPER)
    box.submit(job("reboot", box.workdir, {"name": "train", "run": "%s sleeper.py" % PY}))
    d1 = box.daemon()
    box.wait_stage("reboot", "train", "running")
    wait_for(lambda: (box.home / "runs/reboot/logs/train.1.log").exists() and
             b"step 1/100" in (box.home / "runs/reboot/logs/train.1.log").read_bytes(), 10, "output")
    info = _pidinfo(box, "reboot", "train")
    d1.send_signal(signal.SIGKILL)
    d1.wait(5)
    os.killpg(info["pgid"], signal.SIGKILL)          # a reboot takes every process with it
    if info.get("shim_pid"):
        try:
            os.killpg(info["shim_pid"], signal.SIGKILL)
        except OSError:
            pass
    with open(box.home / "runs/reboot/logs/train.1.log", "ab") as fh:
        fh.write(b"Killed\n" + b"\0" * 512)          # a confusing tail: still not an OOM
    box.boot_id_path.write_text("boot-after-restart\n")
    box.daemon()
    cause = _cause(box, "reboot")
    assert cause["class"] == "machine_restart", cause
    assert cause["evidence"][0] == "boot_id changed while the stage ran"
    assert cause["retryable"] is True


@pytest.mark.slow
def test_xid79_during_a_stage_outranks_the_cuda_error_it_prints(box, fake_nvml_lib):
    from tests.health.conftest import healthy
    state = box.tmp / "nvml.json"
    state.write_text(json.dumps(healthy(1)))          # GPU 0 at 00000000:18:00.0 -> use its bus
    bus = healthy(1)["gpus"][0]["pci_bus_id"].split(":", 1)[1][:7].lower()
    kmsg = box.tmp / "kmsg"
    kmsg.write_text("")
    box.env.update(RGT_KMSG_PATH=str(kmsg), RGT_NVML_LIB=str(fake_nvml_lib), FAKE_NVML_STATE=str(state))
    script = ("import os, sys, time\nprint('step 1/10 loss 1.0', flush=True)\n"
              "while not os.path.exists('flag'):\n    time.sleep(0.05)\n"
              "raise RuntimeError('CUDA error: unspecified launch failure')\n")
    (box.workdir / "gpu.py").write_text(script)
    box.submit(job("xid", box.workdir, {"name": "train", "run": "%s gpu.py" % PY}))
    box.start()
    box.wait_stage("xid", "train", "running")
    with open(kmsg, "a") as fh:
        fh.write("NVRM: Xid (PCI:0000:%s): 79, pid=4242, name=python, GPU has fallen off the bus.\n" % bus)
    box.wait_event("gpu_xid", timeout=15)
    (box.workdir / "flag").write_text("")
    cause = _cause(box, "xid")
    assert cause["class"] == "gpu_hardware", cause
    assert "79" in cause["evidence"][0]
    assert any("CUDA error: unspecified launch failure" in e for e in cause["evidence"])
