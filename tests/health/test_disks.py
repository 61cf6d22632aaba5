"""Disk bytes vs inodes: real tmpfs mounts with size= and nr_inodes=, filled until the kernel
says ENOSPC; the sampler tells the two exhaustions apart (disk_low vs inodes_low)."""
from __future__ import annotations

import errno
import os

import pytest

from boxagent.health.alerts import AlertBook
from boxagent.health.disks import cap_for, sample_disks, stat_disk
from tests.mounts import tmpfs


def _fill_bytes(path):
    with open(os.path.join(path, "big"), "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * (256 << 10))
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def _fill_inodes(path):
    i = 0
    while True:
        try:
            open(os.path.join(path, "f%d" % i), "wb").close()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            return i
        i += 1


def _alert_types(disks):
    book = AlertBook()
    return sorted({s["type"] for s in book.evaluate({"disks": disks}, [], [], 1000.0)})


@pytest.mark.root
def test_tmpfs_bytes_full_is_disk_low_not_inodes(tmp_path):
    with tmpfs(tmp_path / "bytes", "size=4m,nr_inodes=1000") as mnt:
        _fill_bytes(mnt)
        d = stat_disk(str(mnt), "workdir")
        assert d["bytes_used_pct"] >= 99 and d["bytes_free"] < (64 << 10)
        assert d["inodes_used_pct"] < 5
        assert _alert_types([d]) == ["disk_low"]


@pytest.mark.root
def test_tmpfs_inodes_full_while_bytes_free_is_inodes_low(tmp_path):
    with tmpfs(tmp_path / "inodes", "size=64m,nr_inodes=200") as mnt:
        made = _fill_inodes(mnt)
        assert 150 < made < 200
        d = stat_disk(str(mnt), "workdir")
        assert d["inodes_used_pct"] >= 99 and d["inodes_free"] == 0
        assert d["bytes_used_pct"] < 5      # df -h looks fine: exactly the trap
        assert _alert_types([d]) == ["inodes_low"]


def test_inode_cap_counts_even_when_statvfs_says_more(tmp_path):
    st = os.statvfs(str(tmp_path))
    if st.f_files == 0:
        pytest.skip("this filesystem reports no inode counts")
    used = st.f_files - st.f_ffree
    cap = used + 10  # e.g. AutoDL's autodl-fs: ~200K however many inodes NFS reports
    d = sample_disks([(str(tmp_path), "durable")], {str(tmp_path.parent): cap})[0]
    assert d["inodes_cap"] == cap and d["inodes_total"] == cap
    assert d["inodes_free"] <= 10 and d["inodes_used_pct"] > 90


def test_cap_for_picks_the_deepest_capped_dir(tmp_path):
    caps = {str(tmp_path): 100, str(tmp_path / "a"): 50}
    assert cap_for(str(tmp_path / "a" / "b"), caps) == 50
    assert cap_for(str(tmp_path / "x"), caps) == 100
    assert cap_for("/elsewhere", caps) is None


def test_missing_dir_is_an_entry_with_the_error(tmp_path):
    disks = sample_disks([(str(tmp_path / "gone"), "data"), (str(tmp_path), "state"), (str(tmp_path), "workdir")])
    assert len(disks) == 2  # the same path twice is reported once
    assert disks[0]["error"] and disks[0]["bytes_total"] is None
    assert disks[1]["role"] == "state" and disks[1]["bytes_total"] > 0
    assert _alert_types(disks) == []


def test_hung_network_mount_does_not_freeze_the_sampler(tmp_path):
    """A dead NFS server blocks statvfs forever; the fake stat below blocks until released."""
    import threading
    import time

    from boxagent.health.disks import DiskSampler
    nfs, local = tmp_path / "nfs", tmp_path / "local"
    nfs.mkdir()
    local.mkdir()
    proc = tmp_path / "proc" / "self"
    proc.mkdir(parents=True)
    (proc / "mountinfo").write_text(
        "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
        "2 1 0:50 / %s rw - nfs4 server:/export rw,vers=4.1\n" % nfs)
    release, calls = threading.Event(), []

    def statfn(path):
        calls.append(path)
        if path == str(nfs):
            release.wait(30)          # the hang (bounded so the test never leaks a thread forever)
        return os.statvfs(path), os.stat(path).st_dev

    ds = DiskSampler(str(tmp_path / "proc"), timeout_s=0.2, statfn=statfn)
    t0 = time.monotonic()
    first = ds.sample([(str(nfs), "durable"), (str(local), "workdir")])
    assert time.monotonic() - t0 < 2.0
    assert first[0]["timed_out"] and "did not answer" in first[0]["error"] and first[0]["fstype"] == "nfs4"
    assert first[1]["bytes_total"] > 0 and first[1]["fstype"] == "ext4"
    ds.sample([(str(nfs), "durable")])          # still hung: no second request piles up
    assert calls.count(str(nfs)) == 1
    book = AlertBook()
    assert [s["type"] for s in book.evaluate({"disks": first}, [], [], 1.0)] == ["disk_unresponsive"]
    release.set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        again = ds.sample([(str(nfs), "durable")])[0]
        if not again.get("timed_out"):
            break
    assert again["bytes_total"] > 0 and not again.get("error")
