"""`rgt-agent probe [--json]` as a real subprocess: from the source tree, bare (-S), and as the
shipped single file whose bundled pynvml loads the fake libnvidia-ml.so.1 via LD_LIBRARY_PATH."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.health.conftest import healthy, one_lost


def _env(fake_nvml, tmp_path, **extra):
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("4,5,5000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n")
    extra.setdefault("RGT_KMSG_PATH", str(kmsg))
    return fake_nvml.subprocess_env(**extra)


def test_probe_json_with_eight_fake_gpus(agent, fake_nvml, tmp_path, rgt_home):
    fake_nvml.write(healthy(8))
    out = agent("probe", "--json", "--path", str(tmp_path), env=_env(fake_nvml, tmp_path))
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["schema"] == "rgt.probe/1"
    assert r["python"]["version"].startswith("3.") and set(r["deps"]) == {"psutil", "requests", "watchdog", "pynvml"}
    assert r["deps"]["pynvml"] is True
    assert r["cgroup"]["version"] in ("v1", "v2", "none")
    assert (r["gpu"]["source"], r["gpu"]["count"], r["gpu"]["driver_version"], r["gpu"]["cuda_version"]) == ("nvml", 8, "550.54.15", "12.4")
    assert [d["role"] for d in r["disks"]][:2] == ["state", "extra"]
    assert r["disks"][0]["path"] == str(rgt_home) and r["disks"][0]["inodes_total"] > 0
    assert r["kernel_log"]["readable"] is True
    # Xid 79 on GPU 3's bus (3B:00) already in the kernel log: the box is broken, say so
    assert [f["code"] for f in r["kernel_log"]["hard_faults_since_boot"]] == [79]
    assert any("hardware fault since boot" in w for w in r["warnings"])


def test_probe_human_output_names_the_lost_gpu(agent, fake_nvml, tmp_path):
    fake_nvml.write(one_lost())
    out = agent("probe", env=_env(fake_nvml, tmp_path, RGT_KMSG_PATH=str(tmp_path / "absent")))
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    for head in ("python:", "deps:", "memory:", "cpu:", "gpus:    8, driver 550.54.15, CUDA 12.4", "disks:", "kernel log: not readable"):
        assert head in text, head
    assert "gpu4 NVIDIA H100 80GB HBM3 00000000:9A:00.0  ok  util 95%  62 C" in text
    assert "gpu5 - -  LOST" in text        # a lost GPU answers nothing, not even its name
    assert "warning: GPU 5 is LOST: re-rent another box" in text
    assert out.stderr == b""


def test_probe_bare_interpreter_from_source_has_no_pynvml(agent, tmp_path):
    out = agent("probe", "--json", bare=True, env={"RGT_KMSG_PATH": str(tmp_path / "absent")})
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["deps"] == {"psutil": False, "requests": False, "watchdog": False, "pynvml": False}
    assert r["gpu"]["gpus"] == [] and r["gpu"]["unavailable_reason"] == "pynvml (nvidia-ml-py) is not importable"


def test_shipped_pyz_bare_uses_its_bundled_pynvml_on_the_fake(agent_pyz, fake_nvml, tmp_path, rgt_home):
    fake_nvml.write(healthy(2))
    env = _env(fake_nvml, tmp_path, RGT_HOME=str(rgt_home))
    out = subprocess.run([sys.executable, "-S", str(agent_pyz), "probe", "--json"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["deps"]["pynvml"] is True and r["deps"]["psutil"] is False
    assert r["gpu"]["count"] == 2 and r["gpu"]["gpus"][1]["uuid"] == "GPU-00000001-fake"
