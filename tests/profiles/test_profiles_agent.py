"""The agent's view of a profile (boxagent.base.profile): watched dirs, inode caps, thresholds,
state dir, stage env hints, proxy env, extra rules; and end to end through the health sampler."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from boxagent.base import profile as AP
from boxagent.base.home import Home
from rgt_client.profiles import catalog as P

REPO = Path(__file__).resolve().parents[2]


def test_watched_dirs_roles_existing_only_and_deduped(tmp_path):
    data, durable, extra = tmp_path / "data", tmp_path / "durable", tmp_path / "extra"
    for d in (data, durable, extra):
        d.mkdir()
    prof = {"data_dir": str(data), "durable_dir": str(durable),
            "watch": [str(extra), str(data), str(tmp_path / "missing")]}
    assert AP.watched_dirs(prof) == [(str(data), "data"), (str(durable), "durable"), (str(extra), "extra")]


def test_watched_dirs_expand_globs_and_vars(tmp_path, monkeypatch):
    (tmp_path / "nfs" / "fs-a").mkdir(parents=True)
    (tmp_path / "nfs" / "fs-b").mkdir()
    monkeypatch.setenv("RGT_TEST_SCRATCH", str(tmp_path))
    monkeypatch.delenv("RGT_TEST_UNSET", raising=False)
    prof = {"durable_dir": str(tmp_path / "nfs" / "*"), "data_dir": "$RGT_TEST_UNSET/data",
            "watch": ["$RGT_TEST_SCRATCH/nfs"]}
    got = AP.watched_dirs(prof)
    assert got == [(str(tmp_path / "nfs" / "fs-a"), "durable"), (str(tmp_path / "nfs" / "fs-b"), "durable"),
                   (str(tmp_path / "nfs"), "extra")]


def test_inode_caps_thresholds_state_dir_hints():
    prof = P.load_profile("autodl")
    assert AP.inode_caps(prof) == {"/root/autodl-fs": 200000}
    assert AP.thresholds(prof)["inodes_warn_pct"] == 80
    assert AP.thresholds(prof, {"inodes_warn_pct": 70, "bad": "x"}) == {"inodes_warn_pct": 70}
    assert AP.stage_env_hints(prof) == {"HF_HOME": "/root/autodl-tmp/hf", "HF_ENDPOINT": "https://hf-mirror.com"}
    assert AP.state_dir(prof) == os.path.expanduser("~/.rgt")
    assert AP.state_dir(P.load_profile("runpod")) in (None, "/workspace/.rgt")  # None unless /workspace exists
    assert AP.state_dir(P.load_profile("kubernetes")) is None


def test_malformed_profile_fields_are_ignored_not_fatal():
    """config.json can be hand-edited on the box: bad fields are dropped, never a crash."""
    bad = {"data_dir": 5, "watch": "notalist", "inode_caps": {"/x": "many", "/y": True, "/z": 10},
           "thresholds": [1], "hf": "mirror", "proxy": {"hook": 3, "env": {"A": 1}},
           "rule": [{"class": "x"}, "junk", {"class": "disk_full", "pattern": "ENOSPC", "severity": "loud"}]}
    assert AP.watched_dirs(bad) == []
    assert AP.inode_caps(bad) == {"/z": 10}
    assert AP.thresholds(bad) == {}
    assert AP.stage_env_hints(bad) == {}
    assert AP.proxy_env(bad) == {}
    assert AP.rules(bad) == [{"class": "disk_full", "pattern": "ENOSPC", "severity": "warning",
                              "retryable": False, "remediation": ""}]


def test_rules_from_shipped_profile_compile():
    import re
    rules = AP.rules(P.load_profile("autodl"))
    assert {r["class"] for r in rules} == {"disk_full", "network_transient"}
    line = "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded"
    assert any(re.search(r["pattern"], line) and r["class"] == "network_transient" for r in rules)


def test_load_reads_config_and_defaults(tmp_path):
    home = Home(str(tmp_path))
    assert AP.load(home) == {"name": "generic-ssh"}
    (tmp_path / "config.json").write_text(json.dumps({"profile": {"name": "autodl", "platform": "AutoDL"}}))
    assert AP.name(AP.load(home)) == "autodl"
    (tmp_path / "config.json").write_text("{not json")
    assert AP.load(home) == {"name": "generic-ssh"}


def test_proxy_hook_is_sourced_for_its_proxy_variables(tmp_path):
    # Shaped like AutoDL's /etc/network_turbo: prints a message and exports proxies.
    hook = tmp_path / "network_turbo"
    hook.write_text('echo "设置成功"\nexport http_proxy=http://10.0.0.7:12798 && '
                    'export https_proxy=http://10.0.0.7:12798\nexport UNRELATED=1\n')
    prof = {"proxy": {"hook": str(hook), "env": {"no_proxy": "localhost"}}}
    assert AP.proxy_env(prof) == {"http_proxy": "http://10.0.0.7:12798",
                                  "https_proxy": "http://10.0.0.7:12798", "no_proxy": "localhost"}
    assert AP.proxy_env({"proxy": {"hook": "source " + str(hook)}})["https_proxy"] == "http://10.0.0.7:12798"
    assert AP.proxy_env({"proxy": {"hook": str(tmp_path / "absent")}}) == {}
    assert AP.proxy_env({"proxy": {"url": "http://p:3128"}}) == {"http_proxy": "http://p:3128",
                                                                "https_proxy": "http://p:3128"}


def test_hung_proxy_hook_is_bounded(tmp_path):
    """A hook that never returns (and leaves a grandchild holding the pipe) must not hang the
    agent: the whole process group is killed at the timeout."""
    hook = tmp_path / "hang"
    hook.write_text("sleep 60 &\nexport https_proxy=http://x:1\nwait\n")
    t0 = time.monotonic()
    assert AP.hook_env(str(hook), timeout=0.5) == {}
    assert time.monotonic() - t0 < 10


def test_agent_profile_module_is_stdlib_only_and_py38(tmp_path):
    py38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"
    exe = py38 if os.path.exists(py38) else sys.executable
    prof = {"data_dir": str(tmp_path), "inode_caps": {str(tmp_path): 10}, "hf": {"endpoint": "https://m"}}
    code = ("import json, sys, boxagent.base.profile as p; prof = json.loads(sys.argv[1]); "
            "print(json.dumps([p.watched_dirs(prof), p.inode_caps(prof), p.stage_env_hints(prof), "
            "'psutil' in sys.modules, 'requests' in sys.modules]))")
    out = subprocess.run([exe, "-S", "-c", code, json.dumps(prof)], capture_output=True, text=True,
                         timeout=30, env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [[[str(tmp_path), "data"]], {str(tmp_path): 10},
                                      {"HF_ENDPOINT": "https://m"}, False, False]


def _monitor(profile):
    from boxagent.health import HealthMonitor
    from boxagent.base.roots import Roots
    return HealthMonitor(Roots.from_env(), {"sample_every": 1}, profile)


def test_health_sampler_watches_the_profile_data_dir_with_its_inode_cap(tmp_path):
    """End to end: the monitor takes the profile's dirs and caps through boxagent.base.profile."""
    data = tmp_path / "autodl-tmp"
    data.mkdir()
    mon = _monitor({"name": "x", "data_dir": str(data), "inode_caps": {str(data): 1000}})
    try:
        disks = mon.sample(time.time(), [])["disks"]
    finally:
        mon.close()
    entry = [d for d in disks if d["path"] == str(data)]
    assert entry and entry[0]["role"] == "data"
    st = os.statvfs(str(data))
    if st.f_files and st.f_files <= 1000:
        pytest.skip("this filesystem already has <= 1000 inodes")
    assert entry[0]["inodes_total"] == 1000
    assert entry[0]["inodes_cap"] == 1000


@pytest.mark.root
def test_inode_cap_raises_the_inodes_alert_on_a_real_tmpfs(tmp_path):
    """A tmpfs with plenty of inodes but a profile cap of 40: 38 files put it over the warn
    threshold, as autodl-fs at ~200K files does while statvfs says "3 % used"."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,nr_inodes=100000", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount tmpfs: %s" % r.stderr.strip())
    try:
        for i in range(38):
            (mnt / ("f%d" % i)).write_bytes(b"x")
        mon = _monitor({"name": "x", "durable_dir": str(mnt), "inode_caps": {str(mnt): 40}})
        try:
            sample = mon.sample(time.time(), [])
            specs = mon.alert_events(sample, [])
        finally:
            mon.close()
        entry = [d for d in sample["disks"] if d["path"] == str(mnt)][0]
        assert entry["inodes_total"] == 40 and entry["inodes_used_pct"] >= 90
        assert any(s["type"] == "inodes_low" and str(mnt) in s["summary"] for s in specs), specs
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
