"""NVML scenarios through the REAL pynvml and the fake libnvidia-ml.so.1 (C, built by gcc)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from boxagent.health import HealthMonitor
from boxagent.health.nvml import Nvml
from boxagent.base.roots import Roots
from tests.health.conftest import ecc_increase, healthy, one_lost, throttling, xid79

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DESIGN_GPU_FIELDS = {"index", "name", "uuid", "util_pct", "memory_used_bytes", "memory_total_bytes",
                     "temperature_c", "power_w", "sm_clock_mhz", "sm_clock_max_mhz", "throttle_reasons",
                     "ecc_uncorrected", "remapped_rows_pending", "lost", "xid_last"}


@pytest.fixture
def monitor(tmp_path):
    mons = []

    def make(**config):
        config.setdefault("xid_wait_ms", 50)
        m = HealthMonitor(Roots(kmsg=str(tmp_path / "kmsg-none")), config, {})
        mons.append(m)
        return m
    yield make
    for m in mons:
        m.close()


def _types(specs):
    return [(s["type"], s["severity"]) for s in specs]


def test_healthy_x8_fields_and_handles_opened_once(fake_nvml, monitor, tmp_path):
    inits, handles = fake_nvml.calls("nvmlInitWithFlags"), fake_nvml.calls("nvmlDeviceGetHandleByIndex_v2")
    names = fake_nvml.calls("nvmlDeviceGetName")
    m = monitor()
    for t in range(3):
        s = m.sample(1000.0 + 10 * t, [(str(tmp_path), "state")])
        assert m.alert_events(s, []) == []
    assert s["gpu_source"] == "nvml" and s["gpu_unavailable_reason"] is None
    assert s["driver_version"] == "550.54.15" and s["cuda_version"] == "12.4"
    assert len(s["gpus"]) == 8
    g = s["gpus"][3]
    assert DESIGN_GPU_FIELDS <= set(g)
    assert (g["index"], g["uuid"], g["pci_bus_id"]) == (3, "GPU-00000003-fake", "00000000:3B:00.0")
    assert (g["util_pct"], g["temperature_c"], g["power_w"]) == (95, 62, 512.0)
    assert g["memory_total_bytes"] == 85899345920 and g["throttle_reasons"] == [] and g["lost"] is False
    assert fake_nvml.calls("nvmlInitWithFlags") - inits == 1
    assert fake_nvml.calls("nvmlDeviceGetHandleByIndex_v2") - handles == 8
    assert fake_nvml.calls("nvmlDeviceGetName") - names == 8       # static fields read once
    assert m.active_alerts() == []


def test_not_supported_fields_become_null_and_the_sample_survives(fake_nvml, monitor):
    s = healthy(2)
    s["gpus"][0]["errors"] = {"nvmlDeviceGetPowerUsage": "NOT_SUPPORTED",
                              "nvmlDeviceGetTotalEccErrors": "NOT_SUPPORTED",
                              "nvmlDeviceGetRemappedRows": "NO_PERMISSION"}
    del s["gpus"][1]["temperature"]           # absent in the state = NOT_SUPPORTED
    fake_nvml.write(s)
    g0, g1 = monitor().sample(1000.0, [])["gpus"]
    assert g0["power_w"] is None and g0["ecc_uncorrected"] is None and g0["remapped_rows_pending"] is None
    assert g0["util_pct"] == 95 and g0["lost"] is False
    assert g1["temperature_c"] is None and g1["power_w"] == 512.0


def test_throttling_enters_after_two_samples_and_leaves_after_three(fake_nvml, monitor):
    fake_nvml.write(throttling())
    m = monitor()
    s = m.sample(1000.0, [])
    assert s["gpus"][1]["throttle_reasons"] == ["sw_thermal_slowdown", "hw_thermal_slowdown"]
    assert m.alert_events(s, []) == []                       # one sample is not a trend
    specs = m.alert_events(m.sample(1010.0, []), [("r", "train")])
    assert _types(specs) == [("gpu_throttle", "warning")]
    assert specs[0]["gpu"] == 1 and specs[0]["run"] == "r"
    fake_nvml.write(healthy(2))
    assert m.alert_events(m.sample(1020.0, []), []) == []
    assert m.alert_events(m.sample(1030.0, []), []) == []
    specs = m.alert_events(m.sample(1040.0, []), [])
    assert _types(specs) == [("gpu_throttle", "info")] and specs[0]["resolved"]


def test_hot_and_slow_sm_clock_without_reason_bits_is_throttle(fake_nvml, monitor):
    s = healthy(1)
    s["gpus"][0].update(temperature=85, sm_clock=1200, sm_clock_max=1980)  # 61 % of max at 85 C
    fake_nvml.write(s)
    m = monitor(thresholds={"throttle_enter_samples": 1})
    specs = m.alert_events(m.sample(1000.0, []), [])
    assert _types(specs) == [("gpu_throttle", "warning")]
    assert "SM clock 1200 of 1980 MHz at 85 C" in specs[0]["evidence"]


def test_xid79_event_from_the_nvml_thread(fake_nvml, monitor):
    fake_nvml.write(xid79())
    m = monitor()
    t0 = time.time()
    deadline = t0 + 5
    specs = []
    while time.time() < deadline and not specs:
        s = m.sample(time.time(), [])
        specs = [x for x in m.alert_events(s, [("r", "train")]) if x["type"] == "gpu_xid"]
        time.sleep(0.05)
    assert s["xid_sources"]["nvml_events"] is True and s["xid_sources"]["nvml_events_gpus"] == [0, 1, 2, 3]
    assert len(specs) == 1
    x = specs[0]
    assert (x["severity"], x["class"], x["code"], x["gpu"], x["source"]) == ("critical", "gpu_hardware", 79, 3, "nvml")
    assert "fallen off the bus" in x["summary"] and "re-rent" in x["summary"]
    s = m.sample(time.time(), [])
    assert s["gpus"][3]["xid_last"]["code"] == 79 and s["gpus"][3]["xid_last"]["source"] == "nvml"
    faults = m.gpu_faults_since(t0)
    assert [(f["type"], f["code"], f["hardware"]) for f in faults] == [("gpu_xid", 79, True)]
    assert m.gpu_faults_since(time.time() + 60) == []


def test_ecc_uncorrected_increase_is_critical(fake_nvml, monitor):
    before, after = ecc_increase(0, 2)
    fake_nvml.write(before)
    m = monitor()
    assert m.alert_events(m.sample(1000.0, []), []) == []
    fake_nvml.write(after)
    specs = m.alert_events(m.sample(1010.0, []), [])
    assert _types(specs) == [("gpu_ecc", "critical")]
    assert "0 -> 2" in specs[0]["summary"]
    assert [f["type"] for f in m.gpu_faults_since(1005.0)] == ["gpu_ecc"]


def test_remapping_pending_is_a_warning(fake_nvml, monitor):
    s = healthy(1)
    s["gpus"][0]["remapped"] = [0, 1, 1, 0]
    fake_nvml.write(s)
    m = monitor()
    specs = m.alert_events(m.sample(1000.0, []), [])
    assert _types(specs) == [("gpu_ecc", "warning")] and "remapping pending" in specs[0]["summary"]


def test_one_gpu_lost_is_an_entry_and_a_critical_alert(fake_nvml, monitor):
    fake_nvml.write(one_lost())
    m = monitor()
    s = m.sample(1000.0, [])
    lost = [g for g in s["gpus"] if g["lost"]]
    assert [g["index"] for g in lost] == [5] and lost[0]["util_pct"] is None
    assert all(g["util_pct"] == 95 for g in s["gpus"] if not g["lost"])
    specs = m.alert_events(s, [])
    assert _types(specs) == [("gpu_lost", "critical")] and specs[0]["class"] == "gpu_hardware"
    assert [f["type"] for f in m.gpu_faults_since(999.0)] == ["gpu_lost"]
    assert m.hard_faults_present()[0]["gpu"] == 5


def test_gpu_lost_before_we_got_a_handle(fake_nvml, monitor):
    s = healthy(2)
    s["gpus"][1]["errors"] = {"nvmlDeviceGetHandleByIndex_v2": "GPU_IS_LOST"}
    fake_nvml.write(s)
    gpus = monitor().sample(1000.0, [])["gpus"]
    assert [g["lost"] for g in gpus] == [False, True]


def test_processes_outside_our_pid_namespace_are_reported(fake_nvml, monitor):
    s = healthy(1)
    s["gpus"][0]["processes"] = [{"pid": os.getpid(), "used_memory": 1 << 30},
                                 {"pid": 4194000, "used_memory": 30 << 30}]
    fake_nvml.write(s)
    procs = monitor().sample(1000.0, [])["gpus"][0]["processes"]
    assert [(p["pid"], p["used_memory_bytes"], p["visible"], p["rgt"]) for p in procs] == [
        (os.getpid(), 1 << 30, True, True),            # the agent's own process (here: the test)
        (4194000, 30 << 30, False, False)]             # another container's: named as such
    assert "another container" in procs[1]["note"]


def test_driver_not_loaded_gives_no_gpus_and_the_reason(fake_nvml, monitor):
    s = healthy(2)
    s["errors"] = {"nvmlInitWithFlags": "DRIVER_NOT_LOADED"}
    fake_nvml.write(s)
    h = monitor().sample(1000.0, [])
    assert h["gpus"] == [] and h["gpu_source"] == "none"
    assert "Driver Not Loaded" in h["gpu_unavailable_reason"]


def test_library_missing_in_process(monkeypatch, tmp_path, monitor):
    monkeypatch.setenv("RGT_NVML_LIB", str(tmp_path / "nope" / "libnvidia-ml.so.1"))
    h = monitor().sample(1000.0, [])
    assert h["gpus"] == [] and h["gpu_source"] == "none" and "not found" in h["gpu_unavailable_reason"]


SAMPLE_CHILD = ("import json,time\nfrom boxagent.health import HealthMonitor\nfrom boxagent.base.roots import Roots\n"
                "m=HealthMonitor(Roots(kmsg='/nonexistent'),{},{})\ns=m.sample(time.time(),[])\nm.close()\n"
                "print(json.dumps({k:s[k] for k in ('gpu_source','gpu_unavailable_reason','gpus')}))\n")


def _child(env):
    out = subprocess.run([sys.executable, "-c", SAMPLE_CHILD], env=env, capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_subprocess_finds_the_fake_through_ld_library_path(fake_nvml):
    fake_nvml.write(one_lost())
    res = _child(fake_nvml.subprocess_env(PYTHONPATH=REPO))
    assert res["gpu_source"] == "nvml" and len(res["gpus"]) == 8 and res["gpus"][5]["lost"] is True


def test_subprocess_library_missing(tmp_path):
    env = dict(os.environ, PYTHONPATH=REPO, LD_LIBRARY_PATH=str(tmp_path))
    env.pop("RGT_NVML_LIB", None)
    if any(os.path.exists(os.path.join(d, "libnvidia-ml.so.1"))
           for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")):
        pytest.skip("a real libnvidia-ml.so.1 is installed on this machine")
    res = _child(env)
    assert res == {"gpu_source": "none", "gpus": [], "gpu_unavailable_reason":
                   "libnvidia-ml.so.1 not found (no NVIDIA driver on this box or not mapped into the container)"}


def test_nvml_start_is_idempotent_and_shutdown_allows_restart(fake_nvml):
    n = Nvml()
    assert n.start() and n.start()
    assert len(n.gpus) == 8
    n.shutdown()
    assert n.sample() and n.available
    n.shutdown()
