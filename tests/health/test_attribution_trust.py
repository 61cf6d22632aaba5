"""GPU faults are told to a stage only from facts a process cannot forge.

Field attack: any process that ran `env RGT_ATTEMPT_TOKEN=x RGT_RUN=victim …` passed as the
victim's stage: its own Xid 31 went into the victim stage's cause as "a bug in a kernel", it
raised no alert, and its 20 GiB of VRAM was not flagged as another tenant's. Here a process is
one of rgt's only by the attempt token's value, the attempt's cgroup or the shim's process tree,
and never when it started before the attempt's shim. Real processes, the fake libnvidia-ml.so.1
under the real nvidia-ml-py, kernel-log lines in a file (and a real cgroup as root)."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from boxagent.base.roots import Roots
from boxagent.health import HealthMonitor
from boxagent.health.part import HealthPart
from boxagent.health.tenants import read_owner
from boxagent.wire.status import RUN_FIELDS
from tests.health.conftest import healthy
from tests.realbox import job, wait_for

BUS0 = "0000:18:00"
PY = sys.executable
CLEAN_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def _ticks(pid):
    return Roots().process_start_ticks(pid)


def _xid31(log, pid, name="python3"):
    with open(log, "a") as fh:
        fh.write("4,99,99000000,-;NVRM: Xid (PCI:%s): 31, pid=%d, name=%s, Ch 00000008, intr 10000000\n"
                 % (BUS0, pid, name))


@pytest.fixture
def procs():
    made = []

    def start(argv, env=None):
        p = subprocess.Popen(argv, env=env if env is not None else CLEAN_ENV)
        made.append(p)
        return p
    yield start
    for p in made:
        p.kill()
        p.wait()


@pytest.fixture
def monitor(tmp_path, fake_nvml):
    log = tmp_path / "kmsg"
    log.write_text("")
    m = HealthMonitor(Roots(kmsg=str(log)), {"xid_wait_ms": 50}, {})
    yield m, log
    m.close()


def _attempt(run, stage, token, shim=None, cgroup=None):
    return {"run": run, "stage": stage, "token": token, "cgroup": cgroup,
            "shim_pid": shim.pid if shim is not None else None,
            "shim_start_ticks": _ticks(shim.pid) if shim is not None else None}


def test_claim_a_forged_attempt_token_does_not_pass_as_a_stage(fake_nvml, monitor, procs):
    """`env RGT_ATTEMPT_TOKEN=x RGT_RUN=victim`: its Xid is its own warning, its VRAM another
    tenant's, and the victim stage's story holds none of it."""
    m, log = monitor
    victim = _attempt("victim", "train", "0123456789abcdef")
    part = HealthPart(m, lambda: [], lambda: [("victim", "train")], lambda: {0: ("victim", "train")},
                      attempts=lambda: [victim])
    forger = procs(["sleep", "120"], dict(CLEAN_ENV, RGT_ATTEMPT_TOKEN="x", RGT_RUN="victim", RGT_STAGE="train"))
    s = healthy(1)
    s["gpus"][0]["processes"] = [{"pid": forger.pid, "used_memory": 20 << 30}]
    fake_nvml.write(s)
    anchor = part.anchor(time.time())
    part.sample(time.time())
    seen = {p["pid"]: p for p in part.last["gpus"][0]["processes"]}[forger.pid]
    assert seen["rgt"] is False and seen["run"] is None, seen
    assert "none of its stages' processes" in seen.get("note", ""), seen
    # its 20 GiB are another tenant's: the GPU's usable list and the run's status say so
    taken = {g[0]: g[2] for g in part.gpus()}
    assert taken[0] == 20 << 30
    block = part.status_block()
    assert [t["pid"] for t in block[RUN_FIELDS]["victim"]["gpu_tenants"]] == [forger.pid]
    _xid31(log, forger.pid, "sleep")
    alerts = [a for a in part.sample(time.time()) if a["type"] == "gpu_xid"]
    assert alerts and "rgt did not start" in alerts[0]["summary"] and str(forger.pid) in alerts[0]["summary"], alerts
    assert part.since(anchor, time.time(), [], "victim", "train", [0])["gpu_faults"] == []


def test_claim_the_attempt_tokens_value_proves_a_stage_process(fake_nvml, monitor, procs):
    m, log = monitor
    part = HealthPart(m, lambda: [], lambda: [("r1", "s1")], attempts=lambda: [_attempt("r1", "s1", "feedface00000001")])
    anchor = part.anchor(time.time())
    part.sample(time.time())
    # the environment's RGT_RUN says another run: the daemon's own record decides which stage
    stage = procs(["sleep", "120"], dict(CLEAN_ENV, RGT_ATTEMPT_TOKEN="feedface00000001", RGT_RUN="someone-else"))
    _xid31(log, stage.pid, "sleep")
    assert [a for a in part.sample(time.time()) if a["type"] == "gpu_xid"] == []
    got = part.since(anchor, time.time(), [], "r1", "s1", [0])["gpu_faults"]
    assert [(f["pid"], f["owner"]["run"], f["owner"]["by"]) for f in got] == [(stage.pid, "r1", "token")]


def test_claim_a_child_of_the_stage_shim_is_the_stages_even_with_a_cleared_environment(procs):
    """A launcher's worker that cleared its environment is still found, through the shim's
    process tree (pid and start time)."""
    shim = procs([PY, "-c", "import subprocess, sys; subprocess.run(['sleep', '120'], env={})"], CLEAN_ENV)
    child = wait_for(lambda: _child_of(shim.pid), 10, "the stand-in shim's child")
    owner = read_owner("/proc", child, attempts=[_attempt("r2", "train", "aa" * 8, shim=shim)])
    assert (owner["rgt"], owner["run"], owner["stage"], owner["by"]) == (True, "r2", "train", "process tree")
    # the same tree under a shim whose recorded start time is not this process's: not ours
    forged = dict(_attempt("r2", "train", "aa" * 8, shim=shim), shim_start_ticks=(_ticks(shim.pid) or 0) + 1)
    assert read_owner("/proc", child, attempts=[forged])["rgt"] is False


def test_claim_a_process_older_than_the_attempt_is_never_its_stage(procs):
    """The token leaked to a process that was already running: it started before the shim, so
    it cannot be one of the attempt's processes."""
    early = procs(["sleep", "120"], dict(CLEAN_ENV, RGT_ATTEMPT_TOKEN="cafe" * 4))
    time.sleep(0.02)    # the start time is in clock ticks (10 ms): the shim starts strictly later
    shim = procs(["sleep", "120"])
    wait_for(lambda: (_ticks(shim.pid) or 0) > (_ticks(early.pid) or 0) or None, 5, "a later start tick")
    owner = read_owner("/proc", early.pid, attempts=[_attempt("r3", "s", "cafe" * 4, shim=shim)])
    assert owner["rgt"] is False and owner["run"] is None


@pytest.mark.root
def test_claim_a_process_in_the_attempts_cgroup_is_the_stages(procs, tmp_path):
    from boxagent.engine import contain
    roots = Roots()
    cg = contain.make_cgroup(roots)
    if cg is None:
        pytest.skip("this box lets no attempt cgroup be made (needs root and a writable cgroup tree)")
    try:
        p = procs(["sleep", "120"])
        with open(os.path.join(cg, "cgroup.procs"), "w") as fh:
            fh.write(str(p.pid))
        owner = read_owner("/proc", p.pid, attempts=[_attempt("r4", "s", "beef" * 4, cgroup=cg)])
        assert (owner["rgt"], owner["run"], owner["by"]) == (True, "r4", "cgroup")
        other = procs(["sleep", "120"])
        assert read_owner("/proc", other.pid, attempts=[_attempt("r4", "s", "beef" * 4, cgroup=cg)])["rgt"] is False
    finally:
        for pid in open(os.path.join(cg, "cgroup.procs")).read().split():
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass
        wait_for(lambda: not open(os.path.join(cg, "cgroup.procs")).read().strip() or None, 5, "cgroup empty")
        contain.remove_cgroup(cg)


def test_claim_the_attempt_token_is_not_readable_from_its_cgroup_name(tmp_path):
    """Every user of the box can read a process's cgroup path: an attempt's cgroup named after
    its token handed the token to anyone (a `nobody` process then passed as the stage)."""
    import json as _json
    from tests.realbox import Box
    b = Box(tmp_path)
    try:
        b.submit(job("cgname", b.workdir, {"name": "s", "run": "cat /proc/self/cgroup; sleep 1"}))
        b.start()
        b.wait_run("cgname")
        pid_file = next((b.home / "runs" / "cgname" / "stages").glob("s.*.pid"))
        held = _json.loads(pid_file.read_text())["contain"]
        log = next((b.home / "runs" / "cgname" / "logs").glob("s.*.log")).read_text()
        assert held["token"] and held["token"] not in log
        assert not held.get("cgroup") or held["token"] not in held["cgroup"]
    finally:
        b.cleanup()


def _child_of(pid):
    try:
        kids = pathlib.Path("/proc/%d/task/%d/children" % (pid, pid)).read_text().split()
    except OSError:
        return None
    return int(kids[0]) if kids else None


# -- through the real daemon ----------------------------------------------------------------------
FORGER = r"""
import json, os, sys, time
state = os.environ["FAKE_NVML_STATE"]
s = json.load(open(state))
s["gpus"][0]["processes"] = s["gpus"][0].get("processes", []) + [{"pid": os.getpid(), "used_memory": 20 << 30}]
open(state + ".tmp", "w").write(json.dumps(s)); os.replace(state + ".tmp", state)
time.sleep(float(sys.argv[1]))
with open(os.environ["KMSG"], "a") as fh:
    fh.write("NVRM: Xid (PCI:0000:%s): 31, pid=%d, name=python3, Ch 00000008, intr 10000000\n"
             % (os.environ["BUS"], os.getpid()))
time.sleep(60)
"""


@pytest.fixture
def box(tmp_path):
    from tests.realbox import Box
    b = Box(tmp_path)
    yield b
    b.cleanup()


@pytest.mark.slow
def test_claim_a_forger_beside_a_real_stage_gets_its_own_alert_not_the_stages_cause(box, fake_nvml_lib):
    state = box.tmp / "nvml.json"
    s = healthy(1)
    state.write_text(json.dumps(s))
    kmsg = box.tmp / "kmsg"
    kmsg.write_text("")
    bus = s["gpus"][0]["pci_bus_id"].split(":", 1)[1][:7].lower()
    box.env.update(RGT_KMSG_PATH=str(kmsg), RGT_NVML_LIB=str(fake_nvml_lib), FAKE_NVML_STATE=str(state),
                   KMSG=str(kmsg), BUS=bus)
    (box.workdir / "forger.py").write_text(FORGER)
    box.submit(job("victim", box.workdir, {"name": "train", "run": "sleep 4; echo 'RuntimeError: boom'; exit 1"},
                   gpus=1))
    box.start()
    box.wait_stage("victim", "train", "running")
    env = dict(os.environ, FAKE_NVML_STATE=str(state), KMSG=str(kmsg), BUS=bus,
               RGT_ATTEMPT_TOKEN="x", RGT_RUN="victim", RGT_STAGE="train")
    forger = subprocess.Popen([PY, str(box.workdir / "forger.py"), "1.0"], env=env)
    try:
        st = box.wait_run("victim", timeout=40)
        cause = st["stages"][-1]["cause"]
        assert not [e for e in cause["evidence"] if "by this stage's process" in e], cause
        wait_for(lambda: [a for a in box.status_file().get("alerts") or [] if a["type"] == "gpu_xid"] or None,
                 15, "the forger's Xid as a GPU alert")
        status = box.status_file()
        alert = [a for a in status["alerts"] if a["type"] == "gpu_xid"][0]
        assert str(forger.pid) in alert["summary"] and "rgt did not start" in alert["summary"], alert
        procs = {p["pid"]: p for p in status["health"]["gpus"][0]["processes"]}
        assert procs[forger.pid]["rgt"] is False, procs
    finally:
        forger.kill()
        forger.wait()
