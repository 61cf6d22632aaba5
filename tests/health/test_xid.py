"""Kernel-log Xid lines: parsing (hex bus ids), the incremental kmsg reader, the real /dev/kmsg,
and how kernel Xids join NVML's (matched to our GPUs by bus id, deduplicated)."""
from __future__ import annotations

import os
import secrets
import time

import pytest

from boxagent.health import HealthMonitor
from boxagent.health.xid import KmsgReader, normalize_bus_id, parse_xid_line
from boxagent.base.roots import Roots
from tests.health.conftest import healthy, xid79


def test_xid_with_hex_bus_id():
    p = parse_xid_line("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.")
    assert p["code"] == 79 and p["pci_bus_id"] == "0000:3b:00"
    assert p["detail"].startswith("pid=1234")
    for bus, norm in (("PCI:0000:af:00", "0000:af:00"), ("PCI:0000:DB:00", "0000:db:00"),
                      ("0000:3B:00.0", "0000:3b:00"), ("PCI:0001:c1:00", "0001:c1:00")):
        assert parse_xid_line("[ 12.3] NVRM: Xid (%s): 48, pid='<unknown>', DBE" % bus)["pci_bus_id"] == norm


def test_not_an_xid_line():
    for line in ("NVRM: loading NVIDIA UNIX x86_64 Kernel Module 550.54.15",
                 "python[123]: Xid 79 mentioned in a log",   # no NVRM prefix: not the driver
                 "NVRM: Xid (PCI:0000:3b:00): nope"):
        assert parse_xid_line(line) is None


def test_bus_id_forms_normalize_alike():
    assert normalize_bus_id("00000000:3B:00.0") == normalize_bus_id("PCI:0000:3b:00") == "0000:3b:00"
    assert normalize_bus_id(None) is None


def test_kmsg_reader_on_a_file_history_then_increments(tmp_path):
    log = tmp_path / "kmsg"
    log.write_text("6,1,1000000,-;old line\n4,2,2500000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1\n")
    r = KmsgReader(str(log))
    assert r.open() == [(1.0, "old line"), (2.5, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1")]
    assert r.read_new() == []
    with open(log, "a") as fh:
        fh.write("4,3,3000000,-;NVRM: Xid (PCI:0000:af:00): 13, half")
    assert r.read_new() == []                                # not a whole line yet
    with open(log, "a") as fh:
        fh.write(" done\n plain continuation\nno header line\n")
    assert r.read_new() == [(3.0, "NVRM: Xid (PCI:0000:af:00): 13, half done"), (None, "no header line")]
    r.close()


def test_kmsg_unreadable_is_reported_not_raised(tmp_path):
    r = KmsgReader(str(tmp_path / "missing"))
    assert r.open() == [] and not r.readable and "missing" in r.error
    assert r.read_new() == []


def _kmsg_write(line: str) -> None:
    with open("/dev/kmsg", "w") as fh:
        fh.write(line + "\n")


@pytest.mark.root
def test_real_dev_kmsg_xid_line_parsed_to_79():
    if not os.access("/dev/kmsg", os.R_OK | os.W_OK):
        pytest.skip("/dev/kmsg is not readable and writable here")
    token = "rgt-test-" + secrets.token_hex(6)
    r = KmsgReader("/dev/kmsg")
    r.open()
    assert r.readable
    try:
        _kmsg_write("<4>NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus. %s" % token)
        deadline, mine = time.time() + 5, []
        while time.time() < deadline and not mine:
            mine = [m for _, m in r.read_new() if token in m]
        assert len(mine) == 1
        p = parse_xid_line(mine[0])
        assert p["code"] == 79 and p["pci_bus_id"] == "0000:3b:00" and p["bus_raw"] == "PCI:0000:3b:00"
    finally:
        r.close()


@pytest.fixture
def kmsg_monitor(tmp_path):
    made = []

    def make(lines=""):
        log = tmp_path / "kmsg"
        log.write_text(lines)
        m = HealthMonitor(Roots(kmsg=str(log)), {"xid_wait_ms": 50}, {})
        made.append(m)
        return m, log
    yield make
    for m in made:
        m.close()


def _append(log, line):
    with open(log, "a") as fh:
        fh.write("4,99,99000000,-;%s\n" % line)


def test_kernel_xid_for_our_gpu_alerts_other_tenants_do_not(fake_nvml, kmsg_monitor):
    fake_nvml.write(healthy(8))           # GPU 3 sits at 3B:00
    m, log = kmsg_monitor()
    m.sample(1000.0, [])
    _append(log, "NVRM: Xid (PCI:0000:3b:00): 79, pid=77, GPU has fallen off the bus.")
    _append(log, "NVRM: Xid (PCI:0000:c1:00): 79, pid=88, another tenant's GPU")
    s = m.sample(1010.0, [])
    specs = [x for x in m.alert_events(s, [("r", "s")]) if x["type"] == "gpu_xid"]
    assert [(x["gpu"], x["code"], x["source"], x["severity"]) for x in specs] == [(3, 79, "kmsg", "critical")]
    assert s["gpus"][3]["xid_last"]["source"] == "kmsg"
    assert s["xid_sources"]["kernel_log"] is True and s["xid_sources"]["kernel_log_other_gpus"] == 1


def test_non_hardware_xid_is_a_warning(fake_nvml, kmsg_monitor):
    fake_nvml.write(healthy(8))
    m, log = kmsg_monitor()
    m.sample(1000.0, [])
    _append(log, "NVRM: Xid (PCI:0000:18:00): 13, pid=77, Graphics Exception")
    specs = m.alert_events(m.sample(1010.0, []), [])
    assert [(x["type"], x["severity"], x["code"]) for x in specs] == [("gpu_xid", "warning", 13)]
    assert "class" not in specs[0]


def test_same_xid_from_nvml_and_kernel_is_one_fault(fake_nvml, kmsg_monitor):
    fake_nvml.write(xid79())                         # NVML event: Xid 79 on GPU 3
    m, log = kmsg_monitor()
    deadline = time.time() + 5
    while time.time() < deadline and not m.gpu_faults_since(0):
        m.sample(time.time(), [])
        time.sleep(0.05)
    _append(log, "NVRM: Xid (PCI:0000:3b:00): 79, pid=77, GPU has fallen off the bus.")
    m.sample(time.time(), [])
    faults = m.gpu_faults_since(0)
    assert len(faults) == 1 and faults[0]["source"] == "nvml+kmsg"


def test_xid_since_boot_is_a_hard_fault_but_not_a_new_alert(fake_nvml, kmsg_monitor):
    fake_nvml.write(healthy(8))
    m, _ = kmsg_monitor("4,5,5000000,-;NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE\n")
    s = m.sample(1000.0, [])
    assert m.alert_events(s, []) == []
    hard = m.hard_faults_present()
    assert [(f["code"], f["gpu"], f["source"]) for f in hard] == [(48, 3, "kmsg")]
    assert m.gpu_faults_since(0) == []                # not a fault of any stage


def test_kernel_xids_ignored_when_this_box_has_no_nvidia_library(monkeypatch, tmp_path, kmsg_monitor):
    monkeypatch.setenv("RGT_NVML_LIB", str(tmp_path / "absent.so"))
    m, log = kmsg_monitor("4,5,5000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1\n")
    m.sample(1000.0, [])
    _append(log, "NVRM: Xid (PCI:0000:3b:00): 79, pid=77")
    assert m.alert_events(m.sample(1010.0, []), []) == [] and m.hard_faults_present() == []


def test_kernel_xids_count_when_nvml_itself_is_broken(fake_nvml, kmsg_monitor):
    s = healthy(1)
    s["errors"] = {"nvmlInitWithFlags": "UNKNOWN"}  # driver there, NVML failing (a GPU fell off)
    fake_nvml.write(s)
    m, log = kmsg_monitor()
    m.sample(1000.0, [])
    _append(log, "NVRM: Xid (PCI:0000:3b:00): 79, pid=77")
    specs = m.alert_events(m.sample(1010.0, []), [])
    assert [(x["type"], x["severity"], x["gpu"]) for x in specs] == [("gpu_xid", "critical", None)]
