"""The test cluster itself: the exact reason when it cannot run, a fast start, and a stop that
leaves no daemon, slurmstepd or job process behind."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.slurm import cluster as clustermod
from tests.slurm.cluster import ClusterUnavailable, start_cluster

REPO = Path(__file__).resolve().parents[2]


def test_missing_binaries_are_named(monkeypatch, tmp_path):
    monkeypatch.setattr(clustermod, "_which", lambda name: None if name in ("slurmd", "munged") else "/bin/" + name)
    with pytest.raises(ClusterUnavailable) as exc:
        start_cluster(tmp_path)
    assert str(exc.value) == ("Slurm/munge binaries not found: munged, slurmd (Debian: apt-get install "
                              "slurmctld slurmd slurm-client munge)")


def test_not_root_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(clustermod, "_which", lambda name: "/bin/" + name)
    monkeypatch.setattr(clustermod.os, "geteuid", lambda: 1000)
    with pytest.raises(ClusterUnavailable, match="needs root"):
        start_cluster(tmp_path)


@pytest.mark.skipif(os.geteuid() != 0, reason="start_cluster refuses before munged without root")
def test_munged_that_refuses_is_named_and_nothing_is_left(monkeypatch, tmp_path):
    if clustermod.missing_binaries():
        pytest.skip("slurmd -C is needed before munged starts: %s missing" % clustermod.missing_binaries())
    fake = tmp_path / "bin" / "munged"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'munged: Error: Keyfile is insecure: group-writable permissions' >&2\nexit 1\n")
    fake.chmod(0o755)
    real = clustermod._which
    monkeypatch.setattr(clustermod, "_which", lambda name: str(fake) if name == "munged" else real(name))
    with pytest.raises(ClusterUnavailable) as exc:
        start_cluster(tmp_path / "c")
    assert "munged did not start (exit 1)" in str(exc.value) and "Keyfile is insecure" in str(exc.value)


@pytest.mark.slurm
def test_session_cluster_started_fast(slurm):
    assert slurm.start_s < 10, slurm.start_s
    assert slurm.run("sinfo", "-h", "-o", "%P %T").stdout.split()[1::2] == ["idle"] * len(slurm.partitions)


@pytest.mark.slurm
def test_stop_leaves_nothing_running(slurm, tmp_path):
    """A second cluster with a job still running at stop(): its daemons, slurmstepd and the
    job's processes are all gone afterwards (slurmstepd outlives a stopped slurmd)."""
    other = start_cluster(tmp_path / "c2")
    try:
        script = tmp_path / "job.sh"
        script.write_text("#!/bin/bash\nsleep 300\n")
        job = other.sbatch(["sbatch", "--parsable", "--output=/dev/null", str(script)])
        other.wait_state(job, ["RUNNING"], timeout=60)
        pids = {name: p.pid for name, p in other.procs.items()}
    finally:
        other.stop()
    assert not _carriers(str(other.conf))
    for name, pid in pids.items():
        assert not Path("/proc/%d" % pid).exists() or _zombie(pid), name
    assert slurm.run("sinfo", "-h", "-o", "%P %T").stdout.split()[1::2] == ["idle"] * len(slurm.partitions)


@pytest.mark.slurm
def test_daemons_die_with_a_killed_test_process(slurm, tmp_path):
    """pytest killed with SIGKILL runs no teardown: the daemons still go (PR_SET_PDEATHSIG)."""
    code = ("import sys, time; sys.path.insert(0, %r)\n"
            "from pathlib import Path\n"
            "from tests.slurm.cluster import start_cluster\n"
            "c = start_cluster(Path(%r))\n"
            "print(' '.join(str(p.pid) for p in c.procs.values()), flush=True)\n"
            "time.sleep(300)\n") % (str(REPO), str(tmp_path / "c3"))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 3
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.1)
    assert all(_gone(p) for p in pids)


def _gone(pid: int) -> bool:
    return not Path("/proc/%d" % pid).exists() or _zombie(pid)


def _carriers(conf: str, timeout: float = 10) -> list:
    needle = ("SLURM_CONF=%s\0" % conf).encode()
    deadline = time.monotonic() + timeout
    found = []
    while time.monotonic() < deadline:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                try:
                    if needle in Path("/proc/%s/environ" % entry).read_bytes() + b"\0" and not _zombie(int(entry)):
                        found.append(int(entry))
                except OSError:
                    pass
        if not found:
            return found
        time.sleep(0.2)
    return found


def _zombie(pid: int) -> bool:
    try:
        return Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
