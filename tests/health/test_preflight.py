"""The preflight gate: each declared check, hard GPU faults already present, bad values."""
from __future__ import annotations

from boxagent.health import HealthMonitor, preflight
from boxagent.base.roots import Roots
from tests.health.conftest import one_lost

GiB = 1 << 30


def _sample(**kw):
    s = {"disks": [{"path": "/data", "role": "workdir", "bytes_total": 100 * GiB, "bytes_free": 10 * GiB,
                    "inodes_total": 1000000, "inodes_free": 50000, "inodes_cap": None},
                   {"path": "/home/me/.rgt", "role": "state", "bytes_total": GiB, "bytes_free": 1,
                    "inodes_total": 10, "inodes_free": 0}],
         "gpus": [{"index": 0, "temperature_c": 45, "lost": False}, {"index": 1, "temperature_c": 86, "lost": False}],
         "gpu_unavailable_reason": None}
    s.update(kw)
    return s


class _Mon:
    def __init__(self, faults=()):
        self.faults = list(faults)

    def hard_faults_present(self):
        return self.faults


def _kinds(failures):
    return [f["kind"] for f in failures]


def test_everything_fine_means_go():
    assert preflight.check({"gpus": 2, "min_free_disk": "5G", "min_free_inodes": 1000}, _sample(), _Mon()) == []
    assert preflight.check({}, _sample(), _Mon()) == []


def test_disk_and_inodes_checked_where_the_job_writes():
    f = preflight.check({"min_free_disk": "50G", "min_free_inodes": 100000}, _sample(), _Mon())
    assert _kinds(f) == ["disk", "inodes"]           # the full state dir is not the job's disk
    assert "/data" in f[0]["summary"] and "grow the disk" in f[0]["remediation"]
    assert f[1]["evidence"] == ["statvfs /data: 50000 inodes free of 1000000"]
    assert preflight.check({"min_free_disk": 50 * GiB}, _sample(), _Mon())[0]["kind"] == "disk"  # jobspec parsed


def test_not_enough_gpus_and_hot_gpu_say_re_rent():
    f = preflight.check({"gpus": 4, "max_gpu_temp_c": 80.0}, _sample(), _Mon())
    assert _kinds(f) == ["gpus", "gpu_temp"]
    assert all("re-rent another box" in x["remediation"] for x in f)
    assert "GPU 1 is at 86 C" in f[1]["summary"]


def test_no_nvml_with_gpus_wanted_names_the_reason():
    f = preflight.check({"gpus": 1}, _sample(gpus=[], gpu_unavailable_reason="libnvidia-ml.so.1 not found"), _Mon())
    assert _kinds(f) == ["gpus"] and "libnvidia-ml.so.1 not found" in f[0]["evidence"]


def test_hard_faults_already_present_fail_any_preflight():
    xid = {"type": "gpu_xid", "code": 79, "gpu": 3, "hardware": True, "summary": "Xid 79 (GPU has fallen off the bus) on PCI:0000:3b:00 since boot",
           "evidence": ["NVRM: Xid (PCI:0000:3b:00): 79, pid=1"]}
    s = _sample(gpus=[{"index": 0, "lost": True, "pci_bus_id": "00000000:18:00.0"}])
    f = preflight.check({"gpus": 0}, s, _Mon([xid, dict(xid)]))
    assert _kinds(f) == ["gpu_lost", "gpu_xid"]       # the same Xid twice is one failure
    assert f[1]["evidence"] == ["NVRM: Xid (PCI:0000:3b:00): 79, pid=1"]


def test_invalid_values_are_one_clear_failure():
    f = preflight.check({"gpus": "two"}, _sample(), _Mon())
    assert _kinds(f) == ["invalid"] and "gpus" in f[0]["summary"]
    assert _kinds(preflight.check({"min_free_disk": "lots"}, _sample(), _Mon())) == ["invalid"]


def test_with_the_real_monitor_and_a_lost_gpu(fake_nvml, tmp_path):
    fake_nvml.write(one_lost())
    m = HealthMonitor(Roots(kmsg=str(tmp_path / "none")), {"xid_wait_ms": 50}, {})
    try:
        s = m.sample(1000.0, [(str(tmp_path), "workdir")])
        f = preflight.check({"gpus": 8, "min_free_disk": "1K"}, s, m)
        assert _kinds(f) == ["gpus", "gpu_lost"]       # 7 of 8 usable; the lost one named once
        assert "GPU 5 is lost" in f[1]["summary"]
    finally:
        m.close()
