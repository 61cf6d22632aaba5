"""Detection: fixture trees and environments per platform, through the agent's detect_facts()
(root/proc overrides) and the client's detect()."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from boxagent.base import profile as agentprof
from rgt_client.profiles import catalog as P

REPO = Path(__file__).resolve().parents[2]


def _tree(root: Path, paths, proc_env=None) -> Path:
    for p in paths:
        target = root / p.lstrip("/")
        if p.endswith(".conf"):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("# fixture\n")
        else:
            target.mkdir(parents=True, exist_ok=True)
    proc = root / "proc" / "1"
    proc.mkdir(parents=True, exist_ok=True)
    (proc / "environ").write_bytes(b"".join(b"%s=%s\0" % (k.encode(), v.encode())
                                            for k, v in (proc_env or {}).items()))
    return root


CASES = [
    # (platform, paths in the tree, ssh session env, pid-1 env)
    ("autodl", ["/root/autodl-tmp", "/root/autodl-fs", "/etc/network_turbo"], {}, {}),
    ("autodl", ["/root/autodl-tmp"], {}, {}),
    ("runpod", ["/workspace"], {"RUNPOD_POD_ID": "abc123"}, {}),
    ("vastai", ["/workspace"], {"VAST_CONTAINERLABEL": "C.123"}, {}),
    ("lambda", ["/lambda/nfs/myfs"], {}, {}),
    ("paperspace", ["/storage", "/notebooks"], {}, {}),
    ("paperspace", [], {"PAPERSPACE_NOTEBOOK_ID": "n1"}, {}),
    ("gpushare", ["/hy-tmp", "/hy-netdisk"], {}, {}),
    ("featurize", ["/home/featurize", "/cloud"], {}, {}),
    ("lanrui", ["/home/user/datadisk"], {}, {}),
    ("slurm", [], {"SLURM_JOB_ID": "42"}, {}),
    ("slurm", ["/etc/slurm/slurm.conf"], {}, {}),
    ("kubernetes", ["/var/run/secrets/kubernetes.io/serviceaccount"], {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, {}),
    # RunPod/vast put their variables in the container's init env; ssh sessions miss them.
    ("runpod", ["/workspace"], {}, {"RUNPOD_POD_ID": "abc123", "PATH": "/bin"}),
    ("vastai", [], {}, {"VAST_CONTAINERLABEL": "C.9"}),
]


@pytest.mark.parametrize("expected,paths,env,pid1", CASES,
                         ids=["%s-%d" % (c[0], i) for i, c in enumerate(CASES)])
def test_detect_platform_from_fixture_tree(tmp_path, expected, paths, env, pid1):
    root = _tree(tmp_path, paths, pid1)
    facts = agentprof.detect_facts(root=str(root), environ=env, proc_root=str(root / "proc"))
    name, reason = P.detect({"platform_facts": facts})
    assert name == expected, reason
    assert "also looked like" not in reason or expected in ("runpod", "kubernetes")


@pytest.mark.parametrize("paths", [[], ["/workspace"], ["/storage"], ["/mnt"], ["/cloud"], ["/notebooks"]],
                         ids=["bare", "workspace-only", "storage-only", "mnt-only", "cloud-only", "notebooks-only"])
def test_ambiguous_markers_fall_back_to_generic_ssh(tmp_path, paths):
    """/workspace, /storage, /mnt exist on many unrelated boxes: never enough on their own."""
    root = _tree(tmp_path, paths)
    facts = agentprof.detect_facts(root=str(root), environ={}, proc_root=str(root / "proc"))
    name, reason = P.detect(facts)
    assert name == "generic-ssh"
    assert "no platform marker" in reason


def test_platform_variable_beats_orchestrator(tmp_path):
    """A RunPod pod that also sees KUBERNETES_SERVICE_HOST is RunPod; the runner-up is named."""
    root = _tree(tmp_path, ["/workspace"])
    facts = agentprof.detect_facts(root=str(root), proc_root=str(root / "proc"),
                                   environ={"RUNPOD_POD_ID": "x", "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    name, reason = P.detect(facts)
    assert name == "runpod"
    assert "$RUNPOD_POD_ID is set" in reason and "kubernetes" in reason


def test_reason_names_the_markers(tmp_path):
    root = _tree(tmp_path, ["/root/autodl-tmp", "/root/autodl-fs"])
    facts = agentprof.detect_facts(root=str(root), environ={}, proc_root=str(root / "proc"))
    name, reason = P.detect(facts)
    assert name == "autodl"
    assert "/root/autodl-tmp exists" in reason and "/root/autodl-fs exists" in reason


def test_facts_carry_variable_names_never_values(tmp_path):
    """PAPERSPACE_API_KEY is a secret: the probe reports that it is set, not its value."""
    root = _tree(tmp_path, [], {"PAPERSPACE_API_KEY": "sk-pid1-secret"})
    facts = agentprof.detect_facts(root=str(root), proc_root=str(root / "proc"),
                                   environ={"PAPERSPACE_API_KEY": "sk-session-secret", "HOME": "/root"})
    text = json.dumps(facts)
    assert "sk-session" not in text and "sk-pid1" not in text
    assert facts["env"] == {"PAPERSPACE_API_KEY": True}
    assert P.detect(facts)[0] == "paperspace"


def test_detect_accepts_lists_and_bad_input():
    assert P.detect({"paths": ["/hy-tmp"], "env": []})[0] == "gpushare"
    assert P.detect({"paths": {"/hy-tmp": False}})[0] == "generic-ssh"
    assert P.detect({})[0] == "generic-ssh"
    assert P.detect("garbage")[0] == "generic-ssh"  # type: ignore[arg-type]


def test_every_detect_marker_is_probed():
    """The agent only reports what it was told to look for: each profile's markers must be in
    boxagent.base.profile's probe lists, or detection silently never matches."""
    for name in P.list_profiles():
        d = P.load_profile(name).get("detect") or {}
        for path in d.get("paths", []) + d.get("weak_paths", []):
            assert path in agentprof.PROBE_PATHS, (name, path)
        for var in d.get("env", []):
            if var.endswith("*"):
                assert var[:-1] in agentprof.PROBE_ENV_PREFIXES, (name, var)
            else:
                assert var in agentprof.PROBE_ENV, (name, var)


def test_detect_facts_on_python38_bare_interpreter(tmp_path):
    py38 = "/root/.pyenv/versions/3.8.18/bin/python3.8"
    if not os.path.exists(py38):
        pytest.skip("Python 3.8 is not installed at %s" % py38)
    root = _tree(tmp_path, ["/hy-tmp"])
    code = ("import json, boxagent.base.profile as p; print(json.dumps(p.detect_facts(root=%r, environ={}, "
            "proc_root=%r)))" % (str(root), str(root / "proc")))
    out = subprocess.run([py38, "-S", "-c", code], capture_output=True, text=True, timeout=30,
                         env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")})
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)
    assert facts["paths"]["/hy-tmp"] is True
    assert P.detect(facts)[0] == "gpushare"
