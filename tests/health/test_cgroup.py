"""cgroup discovery and reading on fixture trees written in the kernel's exact formats."""
from __future__ import annotations

import os

from boxagent.health.cgroup import (CgroupReader, find_cgroup, parse_cpu_max, parse_mountinfo,
                                    parse_proc_cgroup, parse_psi_some_avg10)
from tests.health.conftest import V1_MOUNTINFO, V2_MOUNTINFO, v1_memory_files, v2_files

V1_CGROUP = ("12:pids:/docker/abc\n11:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n"
             "1:name=systemd:/docker/abc\n0::/docker/abc\n")
GiB = 1 << 30


def _v1_tree(cgtree, mount_root="/", create_nested=True, limit=8 * GiB, oom_kill=3):
    cgtree.proc_files(V1_CGROUP, V1_MOUNTINFO.format(root=mount_root))
    mem = cgtree.cgroup / "memory"
    cpu = cgtree.cgroup / "cpu,cpuacct"
    if create_nested:
        mem, cpu = mem / "docker" / "abc", cpu / "docker" / "abc"
    cgtree.files(mem, v1_memory_files(6 * GiB, limit, 7 * GiB, oom_kill))
    cgtree.files(cpu, {"cpu.cfs_quota_us": "400000\n", "cpu.cfs_period_us": "100000\n"})
    return mem


def test_v1_nested_path_from_proc_self_cgroup(cgtree):
    mem = _v1_tree(cgtree)
    paths = find_cgroup(str(cgtree.proc), str(cgtree.cgroup))
    assert paths.version == "v1" and paths.memory_dir == str(mem)
    r = CgroupReader(paths, str(cgtree.proc))
    m = r.memory()
    assert m["cgroup"] == "v1"
    assert (m["current_bytes"], m["max_bytes"], m["peak_bytes"], m["oom_kill"]) == (6 * GiB, 8 * GiB, 7 * GiB, 3)
    assert m["used_pct"] == 75.0
    assert m["host_total_bytes"] == 263856712 * 1024 and m["host_available_bytes"] == 250000000 * 1024
    assert r.quota_cores() == 4.0 and r.oom_kill() == 3
    r.close()


def test_v1_unlimited_is_null_not_a_huge_number(cgtree):
    _v1_tree(cgtree, limit=9223372036854771712)
    r = CgroupReader(find_cgroup(str(cgtree.proc), str(cgtree.cgroup)), str(cgtree.proc))
    m = r.memory()
    assert m["max_bytes"] is None and m["used_pct"] is None


def test_v1_old_kernel_without_oom_kill_line(cgtree):
    _v1_tree(cgtree, oom_kill=None)
    r = CgroupReader(find_cgroup(str(cgtree.proc), str(cgtree.cgroup)), str(cgtree.proc))
    assert r.memory()["oom_kill"] is None and r.oom_kill() is None


def test_container_path_not_visible_falls_back_to_mount_root(cgtree):
    # Docker without a cgroup namespace: /proc/self/cgroup says /docker/abc, but the mount
    # shows only that cgroup at its root (mountinfo root "/docker/abc" or, on some runtimes, "/").
    for mount_root in ("/docker/abc", "/"):
        mem = _v1_tree(cgtree, mount_root=mount_root, create_nested=False)
        paths = find_cgroup(str(cgtree.proc), str(cgtree.cgroup))
        assert paths.memory_dir == str(mem), mount_root
        assert CgroupReader(paths, str(cgtree.proc)).memory()["current_bytes"] == 6 * GiB


def test_v2_nested_with_max_and_missing_peak(cgtree):
    cgtree.proc_files("0::/user.slice/job-42.scope\n", V2_MOUNTINFO.format(root="/"))
    d = cgtree.cgroup / "user.slice" / "job-42.scope"
    cgtree.files(d, v2_files(512 << 20, "max", None, 0, "max 100000"))
    paths = find_cgroup(str(cgtree.proc), str(cgtree.cgroup))
    assert paths.version == "v2" and paths.memory_dir == str(d)
    r = CgroupReader(paths, str(cgtree.proc))
    m = r.memory()
    assert m["max_bytes"] is None and m["peak_bytes"] is None and m["used_pct"] is None
    assert m["current_bytes"] == 512 << 20 and m["oom_kill"] == 0
    assert r.quota_cores() is None
    c = r.cpu()
    assert c["pressure_some_avg10"] == 1.25 and c["host_load1"] == 3.5


def test_v2_limited_and_oom_kill_rises_between_reads(cgtree):
    cgtree.proc_files("0::/\n", V2_MOUNTINFO.format(root="/kubepods/pod1/c1"))
    cgtree.files(cgtree.cgroup, v2_files(3 * GiB, str(4 * GiB), 4 * GiB, 1, "150000 100000"))
    r = CgroupReader(find_cgroup(str(cgtree.proc), str(cgtree.cgroup)), str(cgtree.proc))
    m = r.memory()
    assert (m["max_bytes"], m["used_pct"], m["peak_bytes"], m["oom_kill"]) == (4 * GiB, 75.0, 4 * GiB, 1)
    assert r.quota_cores() == 1.5
    # The file changes under the open fd (pread at 0 re-reads): a kill shows up.
    cgtree.files(cgtree.cgroup, {"memory.events": "low 0\nhigh 0\nmax 30\noom 2\noom_kill 2\n"})
    assert r.oom_kill() == 2


def test_no_cgroup_at_all(cgtree):
    cgtree.proc_files("", "")
    paths = find_cgroup(str(cgtree.proc), str(cgtree.cgroup))
    assert paths.version == "none"
    m = CgroupReader(paths, str(cgtree.proc)).memory()
    assert m["cgroup"] == "none" and m["current_bytes"] is None and m["host_total_bytes"] is not None


def test_parsers_take_kernel_formats():
    v1, v2 = parse_proc_cgroup(V1_CGROUP)
    assert v1["memory"] == "/docker/abc" and v1["cpuacct"] == "/docker/abc" and v2 == "/docker/abc"
    mounts = parse_mountinfo(V1_MOUNTINFO.format(root="/"))
    assert [m["fstype"] for m in mounts] == ["cgroup", "cgroup", "cgroup2"]
    assert "memory" in mounts[0]["controllers"]
    assert parse_cpu_max("max 100000") is None and parse_cpu_max("50000 100000") == 0.5
    assert parse_psi_some_avg10("some avg10=0.00 avg60=0.00 avg300=0.00 total=0") == 0.0
    assert parse_psi_some_avg10(None) is None


def test_this_machines_own_cgroup_reads():
    """The real /proc and /sys/fs/cgroup: whatever the version, the sample is well-formed."""
    paths = find_cgroup("/proc", "/sys/fs/cgroup")
    r = CgroupReader(paths, "/proc")
    m = r.memory()
    assert m["cgroup"] in ("v1", "v2", "none")
    if paths.version != "none":
        assert os.path.isdir(paths.memory_dir)
        assert isinstance(m["current_bytes"], int) and m["current_bytes"] > 0
    assert m["host_total_bytes"] > 0
    r.close()
