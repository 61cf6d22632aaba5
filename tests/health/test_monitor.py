"""The whole `health` block on a fixture tree + the fake NVML: DESIGN's field names, exactly."""
from __future__ import annotations

import json

from boxagent.health import HealthMonitor
from tests.health.conftest import V1_MOUNTINFO, healthy, v1_memory_files

GiB = 1 << 30
DESIGN = {
    "health": {"sampled_at", "memory", "cpu", "disks", "gpu_source", "gpu_unavailable_reason", "gpus"},
    "memory": {"cgroup", "current_bytes", "max_bytes", "used_pct", "peak_bytes", "oom_kill",
               "host_total_bytes", "host_available_bytes"},
    "cpu": {"quota_cores", "pressure_some_avg10"},
    "disk": {"path", "role", "bytes_total", "bytes_used_pct", "inodes_total", "inodes_used_pct"},
}


def _tree(cgtree, used_gib):
    cgtree.proc_files("11:memory:/job\n4:cpu,cpuacct:/job\n0::/\n", V1_MOUNTINFO.format(root="/"))
    cgtree.files(cgtree.cgroup / "memory" / "job", v1_memory_files(int(used_gib * GiB), 10 * GiB, 9 * GiB, 0))
    cgtree.files(cgtree.cgroup / "cpu,cpuacct" / "job", {"cpu.cfs_quota_us": "250000\n", "cpu.cfs_period_us": "100000\n"})


def test_health_block_has_designs_fields(cgtree, fake_nvml, tmp_path):
    _tree(cgtree, 5)
    fake_nvml.write(healthy(2))
    profile = {"name": "autodl", "data_dir": str(tmp_path), "inode_caps": {str(tmp_path): 10 ** 9}}
    m = HealthMonitor(cgtree.roots(), {"xid_wait_ms": 50}, profile)
    try:
        h = m.sample(1_700_000_000.0, [(str(cgtree.proc), "state")])
        assert DESIGN["health"] <= set(h)
        assert DESIGN["memory"] <= set(h["memory"]) and DESIGN["cpu"] <= set(h["cpu"])
        assert all(DESIGN["disk"] <= set(d) for d in h["disks"])
        assert h["sampled_at"] == "2023-11-14T22:13:20.000Z"
        assert (h["memory"]["cgroup"], h["memory"]["used_pct"]) == ("v1", 50.0)
        assert h["cpu"]["quota_cores"] == 2.5 and m.cpu_quota_cores() == 2.5
        assert h["boot_id"] == "0d7f4a8e-1111-2222-3333-444455556666" and h["uptime_s"] == 12345.67
        assert [(d["role"], d["inodes_cap"]) for d in h["disks"]] == [("state", 10 ** 9), ("data", 10 ** 9)]
        assert h["gpu_source"] == "nvml" and len(h["gpus"]) == 2
        assert m.oom_kill_count() == 0
        json.dumps(h)                                  # status.json-ready as is
    finally:
        m.close()


def test_memory_pressure_walks_through_alerts_and_history(cgtree, tmp_path, monkeypatch):
    monkeypatch.setenv("RGT_NVML_LIB", str(tmp_path / "no-nvml.so"))
    _tree(cgtree, 5)
    m = HealthMonitor(cgtree.roots(), {"thresholds": {"memory_warn_pct": 80, "memory_hold_s": 0}}, {})
    mem = cgtree.cgroup / "memory" / "job"
    try:
        seen = []
        for i, used in enumerate([5, 8.2, 9.8, 9.0, 7.0]):
            cgtree.files(mem, {"memory.usage_in_bytes": "%d\n" % int(used * GiB)})
            h = m.sample(6000.0 + 10 * i, [])
            seen.append([(s["type"], s["severity"]) for s in m.alert_events(h, [("r", "s")])])
        assert seen == [[], [("memory_high", "warning")], [("memory_high", "critical")],
                        [("memory_high", "warning")], [("memory_high", "info")]]
        hist = m.history()
        assert hist["mem_used_pct"] == [98] and hist["step_s"] == 60
        assert m.active_alerts() == []
    finally:
        m.close()


def test_close_is_idempotent_and_sampling_after_close_still_works(fake_nvml, tmp_path):
    from boxagent.base.roots import Roots
    m = HealthMonitor(Roots(kmsg=str(tmp_path / "none")), {"xid_wait_ms": 50}, {})
    m.sample(1000.0, [])
    m.close()
    m.close()
    assert len(m.sample(1010.0, [])["gpus"]) == 8
    m.close()
