"""A REAL cgroup OOM kill: a child memory cgroup with a 64 MB limit, a process that allocates
past it, and the sampler (pointed at that cgroup through its normal discovery) sees oom_kill go
up, raises the critical alert and attributes it to the running stage."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from boxagent.health import HealthMonitor
from boxagent.base.roots import Roots
from tests.health import realcg

LIMIT = 64 << 20
# Touch every page so the memory is really charged to the cgroup; stop at 1 GiB either way.
HOG = ("import sys\nchunks=[]\nfor i in range(128):\n"
       "    b=bytearray(8<<20)\n    for j in range(0,len(b),4096): b[j]=1\n    chunks.append(b)\n"
       "print('survived', flush=True)\n")


def _run_in(cg: realcg.ChildCgroup, code: str) -> subprocess.CompletedProcess:
    # The shell joins the cgroup first, then becomes python: nothing runs outside the limit.
    cmd = 'echo $$ > "%s" && exec "%s" -c "$HOG"' % (cg.procs_file, sys.executable)
    return subprocess.run(["sh", "-c", cmd], env={"HOG": code, "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.root
@pytest.mark.slow
def test_real_cgroup_oom_kill_is_seen_and_attributed(tmp_path):
    version, why = realcg.usable()
    if version is None:
        pytest.skip(why)
    cg = realcg.ChildCgroup(version, LIMIT)
    mon = None
    try:
        roots = Roots(proc=str(cg.proc_tree(tmp_path)), kmsg=str(tmp_path / "no-kmsg"))
        mon = HealthMonitor(roots, {}, {})
        t0 = time.time()
        first = mon.sample(t0, [(str(tmp_path), "state")])
        assert first["memory"]["cgroup"] == version
        assert first["memory"]["max_bytes"] == LIMIT
        assert first["memory"]["oom_kill"] == 0
        assert mon.alert_events(first, [("run1", "train")]) == []
        before = mon.oom_kill_count()

        proc = _run_in(cg, HOG)
        assert "survived" not in proc.stdout
        assert proc.returncode in (-9, 137), (proc.returncode, proc.stderr)

        assert mon.oom_kill_count() >= before + 1          # the stage-end delta the daemon records
        second = mon.sample(t0 + 10, [(str(tmp_path), "state")])
        assert second["memory"]["oom_kill"] >= 1
        assert second["memory"]["peak_bytes"] >= LIMIT * 0.9
        # held while the stage may be dying of it; an alert once it is clear nobody claims it
        assert [s for s in mon.alert_events(second, [("run1", "train")]) if s["type"] == "oom_kill"] == []
        third = mon.sample(t0 + 20, [(str(tmp_path), "state")])
        specs = mon.alert_events(third, [("run1", "train")])
        oom = [s for s in specs if s["type"] == "oom_kill"]
        assert len(oom) == 1
        assert oom[0]["severity"] == "critical" and oom[0]["class"] == "cgroup_oom"
        assert (oom[0]["run"], oom[0]["stage"]) == ("run1", "train")
        assert any("oom_kill 0 -> " in e for e in oom[0]["evidence"])
        assert [a["type"] for a in mon.active_alerts()] == ["oom_kill"]
    finally:
        if mon is not None:
            mon.close()
        cg.destroy()
    assert not cg.dir.exists()
