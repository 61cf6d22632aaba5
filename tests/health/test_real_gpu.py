"""Against a REAL NVIDIA driver, when this machine has one (the device tool's H200 box)."""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time

import pytest

from boxagent.health import HealthMonitor
from boxagent.health.nvml import Nvml
from boxagent.health.xid import XidEventThread
from boxagent.base.roots import Roots

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _real_nvml_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        return True
    except OSError:
        return False


pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not _real_nvml_present(), reason="no real NVIDIA driver (libnvidia-ml.so.1) here")]


@pytest.fixture(autouse=True)
def _no_fake(monkeypatch):
    monkeypatch.delenv("RGT_NVML_LIB", raising=False)


def test_real_gpus_sample_with_units():
    n = Nvml()
    assert n.start(), n.reason
    try:
        gpus = n.sample()
        assert gpus and n.driver_version and n.cuda_version
        for g in gpus:
            assert g["lost"] is False and g["name"] and g["uuid"].startswith("GPU-")
            assert g["memory_total_bytes"] > (1 << 30) and 0 <= g["util_pct"] <= 100
            assert 0 < g["temperature_c"] < 120 and g["sm_clock_max_mhz"] > 0
            assert isinstance(g["throttle_reasons"], list)
            assert g["power_w"] is None or g["power_w"] > 0
    finally:
        n.shutdown()


def test_real_xid_thread_starts_and_stops_promptly():
    n = Nvml()
    assert n.start()
    t = XidEventThread(n, wait_ms=200)
    try:
        started = t.start()
        if not started:
            pytest.skip("this driver/GPU does not deliver Xid events: %s" % t.error)
        n_gpus = len(n.sample())
        assert sorted(t.registered) == list(range(n_gpus)), "Xid events must be registered on every GPU"
        time.sleep(0.5)
        # A healthy box posts no Xid in half a second: one now is a broken GPU, worth failing on.
        assert t.drain() == [] and t.error is None, (t.error, t.registered)
    finally:
        t0 = time.time()
        t.stop()
        assert time.time() - t0 < 2.0
        n.shutdown()


def test_real_monitor_tick_is_cheap(tmp_path):
    m = HealthMonitor(Roots(kmsg=str(tmp_path / "none")), {"xid_wait_ms": 200}, {})
    try:
        m.sample(time.time(), [(str(tmp_path), "state")])
        costs = []
        for _ in range(20):
            costs.append(m.sample(time.time(), [(str(tmp_path), "state")])["sample_ms"])
        assert sorted(costs)[10] < 50, costs
    finally:
        m.close()


def test_real_probe_json():
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("RGT_NVML_LIB", None)
    out = subprocess.run([sys.executable, "-m", "boxagent", "probe", "--json"], capture_output=True, text=True,
                         env=env, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["gpu"]["source"] == "nvml" and r["gpu"]["count"] >= 1
    uuids = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=60)
    if uuids.returncode == 0:       # the agent sees the very GPUs the driver's own tool lists
        assert sorted(g["uuid"] for g in r["gpu"]["gpus"]) == sorted(uuids.stdout.split())
    print(json.dumps(r["gpu"], indent=1))
