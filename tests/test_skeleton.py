"""The skeleton's own guarantees: the single-file agent is reproducible and runs bare."""
from __future__ import annotations

import hashlib
import subprocess
import sys


def test_bundle_is_byte_for_byte_reproducible(tmp_path):
    from rgt_client.box.bundle import build_agent
    p1, s1 = build_agent(tmp_path / "a.pyz")
    p2, s2 = build_agent(tmp_path / "b.pyz")
    assert s1 == s2 == hashlib.sha256(p1.read_bytes()).hexdigest()
    assert p1.read_bytes() == p2.read_bytes()


def test_pyz_carries_pynvml_and_runs_without_site_packages(agent_pyz):
    import zipfile
    assert "pynvml.py" in zipfile.ZipFile(agent_pyz).namelist()
    out = subprocess.run([sys.executable, "-S", str(agent_pyz), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("rgt-agent ")
