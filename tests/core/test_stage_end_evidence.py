"""A stage's cause is read from the box as it is when the stage ends.

Real faults are fast: a stage that dies of an Xid dies within milliseconds of it, and one that
runs out of inodes dies at the first failed open. Each test here kills its stage less than a
second after the fault, with the periodic health sample set far apart (30 s), so only the
reading taken at the stage's end can name the cause. With the last periodic sample instead,
inode exhaustion was called disk_full, a kernel-log Xid 79 was nonzero_exit.
"""
from __future__ import annotations

import json
import sys

import pytest

from tests.realbox import job
from tests.health.conftest import healthy
from tests.mounts import tmpfs

PY = sys.executable
SLOW_SAMPLE = {"RGT_SAMPLE_EVERY": "30"}
MANY_FILES = ("import sys\nprint('epoch 1/10 loss 1.0', flush=True)\n"
              "for i in range(500):\n    open('sample_%d.json' % i, 'w').close()\n")
BIG_WRITE = ("print('epoch 1/10 loss 1.0', flush=True)\n"
             "with open('ckpt.pt', 'wb') as f:\n    f.write(b'x' * (8 << 20))\n")
CUDA_CRASH = "raise RuntimeError('CUDA error: unspecified launch failure')\n"


def _cause(box, name):
    run = box.wait_run(name, timeout=30)
    assert run["state"] == "failed", run
    return run["stages"][0]["cause"]


@pytest.mark.root
def test_inode_exhaustion_a_moment_before_the_end_is_inodes_full(box):
    box.env.update(SLOW_SAMPLE)
    with tmpfs(box.tmp / "few", "size=64m,nr_inodes=40") as mnt:
        (mnt / "fill.py").write_text(MANY_FILES)
        box.submit(job("inodes", mnt, {"name": "prep", "run": "%s fill.py" % PY}))
        box.start()
        cause = _cause(box, "inodes")
    assert cause["class"] == "inodes_full", cause
    assert any("of inodes used while bytes are" in e for e in cause["evidence"]), cause


@pytest.mark.root
def test_byte_exhaustion_a_moment_before_the_end_is_disk_full(box):
    box.env.update(SLOW_SAMPLE)
    with tmpfs(box.tmp / "small", "size=1m,nr_inodes=1000") as mnt:
        (mnt / "save.py").write_text(BIG_WRITE)
        box.submit(job("bytes", mnt, {"name": "train", "run": "%s save.py" % PY}))
        box.start()
        cause = _cause(box, "bytes")
    assert cause["class"] == "disk_full", cause
    assert any("100% of bytes used" in e for e in cause["evidence"]), cause


@pytest.mark.root
def test_a_silent_stage_that_filled_its_tmpfs_is_disk_full_by_the_fact(box):
    # `dd` filling the workdir's filesystem with its errors sent to /dev/null, then `exit 1`:
    # the log says nothing; statvfs at the stage's end decides, and the cause names it
    box.env.update(SLOW_SAMPLE)
    with tmpfs(box.tmp / "silent", "size=1m,nr_inodes=1000") as mnt:
        box.submit(job("silent", mnt, {"name": "fill", "run": "dd if=/dev/zero of=fill bs=64k "
                                       "2>/dev/null; echo working; exit 1"}))
        box.start()
        cause = _cause(box, "silent")
    assert cause["class"] == "disk_full", cause
    assert "100% of bytes used at the stage's end" in cause["decided_by_fact"], cause
    assert cause["confidence"] == "high"


def _gpu_box(box, fake_nvml_lib, events=()):
    state = box.tmp / "nvml.json"
    scenario = healthy(1)
    scenario["gpus"][0]["pci_bus_id"] = "00000000:3B:00.0"        # a bus id with a hex letter
    scenario["events"] = list(events)
    state.write_text(json.dumps(scenario))
    kmsg = box.tmp / "kmsg"
    kmsg.write_text("")
    box.env.update(SLOW_SAMPLE, RGT_KMSG_PATH=str(kmsg), RGT_NVML_LIB=str(fake_nvml_lib),
                   FAKE_NVML_STATE=str(state))
    return state, kmsg


def test_kernel_log_xid79_on_this_boxs_bus_just_before_the_crash_is_gpu_hardware(box, fake_nvml_lib):
    _state, kmsg = _gpu_box(box, fake_nvml_lib)
    # the kernel logs the Xid; the CUDA error follows at once in the job
    script = ("with open(%r, 'a') as k:\n    k.write('NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, "
              "GPU has fallen off the bus.\\n')\n" % str(kmsg)) + CUDA_CRASH
    (box.workdir / "gpu.py").write_text(script)
    box.submit(job("kxid", box.workdir, {"name": "train", "run": "%s gpu.py" % PY}))
    box.start()
    cause = _cause(box, "kxid")
    assert cause["class"] == "gpu_hardware", cause
    assert "79" in cause["evidence"][0]
    assert any("CUDA error: unspecified launch failure" in e for e in cause["evidence"]), cause


def test_nvml_xid_event_just_before_the_crash_is_gpu_hardware(box, fake_nvml_lib):
    state, _kmsg = _gpu_box(box, fake_nvml_lib)
    # the driver posts Xid 79 as an NVML event; the job crashes 0.2 s later
    script = ("import json, os, time\nst = json.load(open(%r))\nst['events'] = [{'gpu': 0, 'xid': 79}]\n"
              "json.dump(st, open(%r + '.tmp', 'w'))\nos.replace(%r + '.tmp', %r)\ntime.sleep(0.2)\n"
              % (str(state), str(state), str(state), str(state))) + CUDA_CRASH
    (box.workdir / "gpu.py").write_text(script)
    box.submit(job("nxid", box.workdir, {"name": "train", "run": "%s gpu.py" % PY}))
    box.start()
    cause = _cause(box, "nxid")
    assert cause["class"] == "gpu_hardware", cause
    assert "79" in cause["evidence"][0], cause           # the kernel log is empty: NVML's event it is
