"""What a real H100 showed, replayed through the real daemon on the fake libnvidia-ml.so.1:
the faulting stage's own Xid in its cause and nowhere else, and the GPU's other tenants named
in status and in a cuda_oom cause. The driver's kernel log is a plain file here (RGT_KMSG_PATH);
tests/health/test_gpu_truth.py writes through the real /dev/kmsg."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.realbox import job, wait_for
from tests.health.conftest import healthy

PY = sys.executable


@pytest.fixture
def box(tmp_path):
    from tests.realbox import Box
    b = Box(tmp_path)
    yield b
    b.cleanup()

# The stage joins the fake NVML's process list (as CUDA would make it a compute process), waits
# until the daemon's status shows it, then faults the way the H100 did: the driver logs Xid 31
# with its pid, torch raises the CUDA error, the process exits 1.
XID31_STAGE = r"""
import json, os, sys, time
state = os.environ["FAKE_NVML_STATE"]
s = json.load(open(state))
s["gpus"][0]["processes"] = [{"pid": os.getpid(), "used_memory": 2 << 30}]
open(state + ".tmp", "w").write(json.dumps(s)); os.replace(state + ".tmp", state)
status = os.path.join(os.environ["RGT_HOME"], "status.json")
for _ in range(400):
    try:
        procs = json.load(open(status))["health"]["gpus"][0]["processes"]
        if any(p["pid"] == os.getpid() and p.get("rgt") for p in procs):
            break
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        pass
    time.sleep(0.05)
print("step 1/10 loss 1.0", flush=True)
with open(os.environ["KMSG"], "a") as fh:
    fh.write("NVRM: Xid (PCI:0000:%s): 31, pid=%d, name=python3, Ch 00000008, intr 10000000. "
             "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f5a_00000000\n" % (os.environ["BUS"], os.getpid()))
print("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", flush=True)
sys.exit(1)
"""

OOM_STAGE = r"""
import sys, time
time.sleep(1.2)     # two samples: the daemon has seen the other tenant
print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total "
      "capacity of 79.19 GiB of which 1.2 GiB is free. Process 609 has 20.60 GiB memory in use.", flush=True)
sys.exit(1)
"""


def _gpu_box(box, fake_nvml_lib, scenario):
    state = box.tmp / "nvml.json"
    state.write_text(json.dumps(scenario))
    kmsg = box.tmp / "kmsg"
    kmsg.write_text("")
    bus = scenario["gpus"][0]["pci_bus_id"].split(":", 1)[1][:7].lower()
    box.env.update(RGT_KMSG_PATH=str(kmsg), RGT_NVML_LIB=str(fake_nvml_lib), FAKE_NVML_STATE=str(state),
                   KMSG=str(kmsg), BUS=bus)
    return state


@pytest.mark.slow
def test_xid31_from_a_stage_is_in_its_cause_not_a_gpu_alert(box, fake_nvml_lib):
    _gpu_box(box, fake_nvml_lib, healthy(1))
    (box.workdir / "oob.py").write_text(XID31_STAGE)
    box.submit(job("oob", box.workdir, {"name": "train", "run": "%s oob.py" % PY}, gpus=1))
    box.start()
    state = box.wait_run("oob", timeout=30)
    cause = state["stages"][-1]["cause"]
    assert cause["class"] != "gpu_hardware", cause
    own = [e for e in cause["evidence"] if "by this stage's process (Xid 31" in e]
    assert own and "illegal memory access" in own[0] and "not a failing GPU" in own[0], cause
    assert "name=python3" not in own[0] and "(python3)" in own[0]
    # nowhere else: no GPU alert, no event, nothing on the GPU's line of the status
    wait_for(lambda: box.status_file().get("health") is not None, 10, "a status with health")
    status = box.status_file()
    assert [a for a in status["alerts"] if a["type"] == "gpu_xid"] == []
    assert status["health"]["gpus"][0]["xid_last"] is None
    assert box.events("gpu_xid") == []


@pytest.mark.slow
def test_foreign_vram_holder_is_named_in_status_and_in_the_cuda_oom_cause(box, fake_nvml_lib, tmp_path):
    tenant = subprocess.Popen(["sleep", "300"])     # a process rgt did not start, holding 20.6 GiB
    try:
        s = healthy(1)
        s["gpus"][0]["processes"] = [{"pid": tenant.pid, "used_memory": 22118000000},
                                     {"pid": 4194000, "used_memory": 1 << 30}]   # another container's
        _gpu_box(box, fake_nvml_lib, s)
        (box.workdir / "oom.py").write_text(OOM_STAGE)
        box.submit(job("oom", box.workdir, {"name": "train", "run": "%s oom.py" % PY}, gpus=1))
        box.start()
        box.wait_stage("oom", "train", "running")
        status = wait_for(lambda: (lambda st: st if (st.get("runs") or [{}])[0].get("gpu_tenants") else None)(
            box.status_file()), 15, "the run's status naming its GPU's other tenants")
        procs = {p["pid"]: p for p in status["health"]["gpus"][0]["processes"]}
        assert procs[tenant.pid]["rgt"] is False and procs[tenant.pid]["command"] == "sleep 300"
        assert procs[4194000]["rgt"] is False and procs[4194000]["visible"] is False
        assert "another container" in procs[4194000]["note"]
        assert {t["pid"] for t in status["runs"][0]["gpu_tenants"]} == {tenant.pid, 4194000}
        started = box.events("run_started")
        assert started and "filled by processes rgt did not start" in started[0].get("gpu_shared", ""), started
        state = box.wait_run("oom", timeout=30)
        cause = state["stages"][-1]["cause"]
        assert cause["class"] == "cuda_oom", cause
        named = [e for e in cause["evidence"] if "rgt did not start" in e]
        assert any("pid %d (sleep 300) holds 22.1 GB" % tenant.pid in e for e in named), cause
        assert "another tenant holds memory" in cause["remediation"]
    finally:
        tenant.kill()
        tenant.wait()
