"""What a real H100 showed that the fake driver could not, one field failure per test: an
application's own Xid told to its stage (not the GPU's health), a hardware Xid critical, the
GPU's other tenants named, a device assert decided by its assertion. In-process, on the fake
libnvidia-ml.so.1 and kernel-log lines with pids (a file, or the real /dev/kmsg as root)."""
from __future__ import annotations

import os
import pathlib
import secrets
import subprocess
import threading
import time

import pytest

from boxagent.engine import slots
from boxagent.health import HealthMonitor, preflight, xidcatalog
from boxagent.health.part import HealthPart
from boxagent.health.tenants import redact_argv
from boxagent.base.roots import Roots
from boxagent.triage import build_rules, diagnose
from boxagent.triage.rules import ScanState
from tests.health.conftest import healthy

BUS0 = "0000:18:00"          # healthy()'s GPU 0 (00000000:18:00.0)


@pytest.fixture
def sleeper():
    """Start `sleep` processes, with or without a stage's environment; all killed after."""
    made = []

    def start(**env):
        p = subprocess.Popen(["sleep", "120"], env=dict(os.environ, **env) if env else
                             {"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        made.append(p)
        return p
    yield start
    for p in made:
        p.kill()
        p.wait()


@pytest.fixture
def gpu_monitor(tmp_path, fake_nvml):
    made = []

    def make(kmsg=None, **config):
        log = pathlib.Path(kmsg) if kmsg else tmp_path / "kmsg"
        if not kmsg:
            log.write_text("")
        m = HealthMonitor(Roots(kmsg=str(log)), dict({"xid_wait_ms": 50}, **config), {})
        made.append(m)
        return m, log
    yield make
    for m in made:
        m.close()


def _attempt(run, stage, token):
    """A running attempt as the daemon's engine describes it (engine/views.identities)."""
    return {"run": run, "stage": stage, "token": token, "cgroup": None, "shim_pid": None,
            "shim_start_ticks": None}


def _xid_line(code, pid, name="python3", bus=BUS0):
    return "NVRM: Xid (PCI:%s): %d, pid=%d, name=%s, Ch 00000008, intr 10000000" % (bus, code, pid, name)


def _append(log, line):
    with open(log, "a") as fh:
        fh.write("4,99,99000000,-;%s\n" % line)


def _xid_alerts(specs):
    return [s for s in specs if s["type"] == "gpu_xid"]


# -- an application's Xid belongs to its process and that process's stage --------------------
def test_xid31_by_a_stage_process_raises_no_gpu_alert_and_is_that_stages(fake_nvml, gpu_monitor, sleeper):
    fake_nvml.write(healthy(1))
    m, log = gpu_monitor()
    part = HealthPart(m, lambda: [], lambda: [("train-run", "train")],
                      attempts=lambda: [_attempt("train-run", "train", "abc")])
    anchor = part.anchor(time.time())
    part.sample(time.time())
    stage_proc = sleeper(RGT_ATTEMPT_TOKEN="abc", RGT_RUN="train-run", RGT_STAGE="train")
    _append(log, _xid_line(31, stage_proc.pid))
    specs = part.sample(time.time())
    assert _xid_alerts(specs) == [] and m.active_alerts() == []
    assert part.last["gpus"][0]["xid_last"] is None       # not `gpu0 ... Xid 31` on the status line
    mine = part.since(anchor, time.time(), [], "train-run", "train", [0])["gpu_faults"]
    assert [(f["code"], f["pid"], f["owner"]["run"], f["owner"]["stage"]) for f in mine] == [
        (31, stage_proc.pid, "train-run", "train")]
    assert part.since(anchor, time.time(), [], "other-run", "train", [0])["gpu_faults"] == []


def test_xid31_read_after_the_stage_process_exited_is_still_that_stages(fake_nvml, gpu_monitor, sleeper):
    """The kernel line is read after the process is gone: the pid book remembers it, because a
    sample saw it on the GPU while it ran."""
    s = healthy(1)
    stage_proc = sleeper(RGT_ATTEMPT_TOKEN="abc", RGT_RUN="r1", RGT_STAGE="s1")
    s["gpus"][0]["processes"] = [{"pid": stage_proc.pid, "used_memory": 1 << 30}]
    fake_nvml.write(s)
    m, log = gpu_monitor()
    part = HealthPart(m, lambda: [], lambda: [], attempts=lambda: [_attempt("r1", "s1", "abc")])
    anchor = part.anchor(time.time())
    part.sample(time.time())
    procs = part.last["gpus"][0]["processes"]
    assert [(p["rgt"], p["run"], p["stage"]) for p in procs] == [(True, "r1", "s1")]
    stage_proc.kill()
    stage_proc.wait()
    _append(log, _xid_line(31, stage_proc.pid))
    got = part.since(anchor, time.time(), [], "r1", "s1", [0])["gpu_faults"]
    assert got[0]["owner"]["run"] == "r1" and got[0]["owner"]["ended"] is True
    assert _xid_alerts(part.sample(time.time())) == []     # next run's sample: still no GPU alert


def test_xid31_logged_before_the_next_stage_but_read_after_it_started_is_not_the_next_stages(
        fake_nvml, gpu_monitor):
    """Field: the Xid 31 alert came 8 s after the faulting stage ended, under the next run."""
    fake_nvml.write(healthy(1))
    m, log = gpu_monitor()
    part = HealthPart(m, lambda: [], lambda: [("next-run", "train")])
    part.sample(time.time())
    uptime = float(open("/proc/uptime").read().split()[0])
    anchor = part.anchor(time.time())                      # the next stage starts now
    with open(log, "a") as fh:                             # logged 5 s ago, by a process now gone
        fh.write("4,99,%d,-;%s\n" % (int((uptime - 5.0) * 1e6), _xid_line(31, 4194001)))
    got = part.since(anchor, time.time() + 1, [], "next-run", "train", [0])["gpu_faults"]
    assert got == []
    assert [f["code"] for f in m.gpu_faults_since(anchor["at"] - 10)] == [31]


@pytest.mark.root
def test_xid31_of_a_process_rgt_did_not_start_is_its_warning_through_dev_kmsg(fake_nvml, gpu_monitor, sleeper):
    if not os.access("/dev/kmsg", os.R_OK | os.W_OK):
        pytest.skip("/dev/kmsg is not readable and writable here")
    fake_nvml.write(healthy(1))
    m, _ = gpu_monitor(kmsg="/dev/kmsg")
    part = HealthPart(m, lambda: [], lambda: [])
    part.sample(time.time())
    tenant = sleeper()
    token = secrets.token_hex(4)
    with open("/dev/kmsg", "w") as fh:
        fh.write("<4>%s rgt-test-%s\n" % (_xid_line(31, tenant.pid, "sleep"), token))
    mine = []
    deadline = time.time() + 5
    while time.time() < deadline and not mine:
        mine = [s for s in _xid_alerts(part.sample(time.time())) if s.get("pid") == tenant.pid]
    assert len(mine) == 1, mine
    alert = mine[0]
    assert alert["severity"] == "warning" and "class" not in alert
    assert "pid %d (sleep)" % tenant.pid in alert["summary"] and "rgt did not start" in alert["summary"]
    assert "the GPU is fine" in alert["summary"] and alert["run"] is None
    assert part.last["gpus"][0]["xid_last"] is None


def test_hardware_xid_is_a_critical_gpu_alert_where_nvidia_says_reset(fake_nvml, gpu_monitor):
    fake_nvml.write(healthy(1))
    m, log = gpu_monitor()
    m.sample(1000.0, [])
    for code in (119, 63, 140):
        _append(log, _xid_line(code, 1))
    specs = _xid_alerts(m.alert_events(m.sample(1010.0, []), [("r", "s")]))
    got = {s["code"]: (s["severity"], s.get("class")) for s in specs}
    assert got == {119: ("critical", "gpu_hardware"), 140: ("critical", "gpu_hardware"),
                   63: ("warning", "gpu_hardware")}      # 63: NVIDIA says IGNORE (a row remap noted)
    assert "RESET_GPU" in next(s for s in specs if s["code"] == 119)["summary"]


def test_stage_end_waits_for_an_xid_still_in_flight(fake_nvml, gpu_monitor):
    fake_nvml.write(healthy(1))
    m, _ = gpu_monitor()
    part = HealthPart(m, lambda: [], lambda: [])
    part.settle_s = 1.0
    anchor = part.anchor(time.time())
    part.sample(time.time())
    late = healthy(1)
    late["events"] = [{"gpu": 0, "xid": 31}]
    timer = threading.Timer(0.2, fake_nvml.write, (late,))
    timer.start()
    t0 = time.monotonic()
    faults = part.since(anchor, time.time(), [], "r", "s", [0])["gpu_faults"]
    waited = time.monotonic() - t0
    timer.join()
    assert [f["code"] for f in faults] == [31] and waited < 0.8
    t0 = time.monotonic()
    assert part.since(anchor, time.time(), [], "r", "cpu-stage", [])["gpu_faults"] == []
    assert time.monotonic() - t0 < 0.2                      # a stage without GPUs does not wait


# -- the catalog is the one list ----------------------------------------------------------------
def test_every_documented_xid_has_a_class_an_action_and_a_source():
    classes = {"application", "hardware", "driver", "engine", "info", "unused"}
    assert len(xidcatalog.CATALOG) >= 170 and {119, 120, 140, 143, 154, 172} <= set(xidcatalog.CATALOG)
    for code, row in xidcatalog.CATALOG.items():
        assert row.code == code and row.klass in classes and row.action and row.meaning, row
        assert "docs.nvidia.com" in row.source
    assert [c for c in (13, 31, 43) if xidcatalog.is_application(c)] == [13, 31, 43]
    assert xidcatalog.klass(999) == "unknown" and not xidcatalog.is_hardware(999)


def test_the_log_rule_the_precedence_and_the_sampler_agree_on_every_xid():
    """Before the catalog the three lists disagreed (63/64/119/120 hardware in one, not in another)."""
    rules = build_rules()
    for code in sorted(xidcatalog.CATALOG):
        line = b"[ 9.5] NVRM: Xid (PCI:0000:3b:00): %d, pid=1, name=python3, Ch 00000008\n" % code
        hits = rules.scan(line, 1, ScanState())
        cause = diagnose({"exit_code": 1, "gpu_faults": [{"type": "gpu_xid", "code": code, "gpu": 0}]})
        assert (cause["class"] == "gpu_hardware") == xidcatalog.is_hardware(code), code
        assert any(h["class"] == "gpu_hardware" for h in hits) == xidcatalog.is_hardware(code), code


# -- tenants ------------------------------------------------------------------------------------
def test_a_tenants_token_never_reaches_status():
    argv = ["python3", "serve.py", "--hf-token", "hf_SECRET", "--api_key=sk-SECRET", "WANDB_API_KEY=abc",
            "https://user:pw@example.com/x", "--port", "8000"]
    text = redact_argv(argv)
    assert "SECRET" not in text and "abc" not in text and "pw@" not in text
    assert text.startswith("python3 serve.py --hf-token *** --api_key=*** WANDB_API_KEY=***") and "--port 8000" in text


def _sample_with_tenant(pid, used, total=80 << 30):
    return {"gpus": [{"index": 0, "memory_total_bytes": total, "processes": [
        {"pid": pid, "used_memory_bytes": used, "visible": True, "rgt": False, "command": "python3 serve.py"}]},
        {"index": 1, "memory_total_bytes": total, "processes": []}]}


class _NoFaults:
    def hard_faults_present(self):
        return []


def test_preflight_refuses_gpu_memory_another_tenant_already_holds():
    sample = _sample_with_tenant(609, 22118000000)
    assert preflight.check({"gpus": 1}, sample, _NoFaults()) == []         # GPU 1 is free
    fails = preflight.check({"gpus": 2}, sample, _NoFaults())
    assert [f["kind"] for f in fails] == ["gpu_memory_taken"]
    assert "pid 609 (python3 serve.py) holds 22.1 GB" in fails[0]["evidence"][0]
    assert preflight.check({"gpus": 2, "max_gpu_memory_taken_pct": 50}, sample, _NoFaults()) == []


class _Run:
    def __init__(self, name):
        self.name, self.gpus = name, None

    def all_done(self):
        return False


def test_a_gpu_another_tenant_fills_is_handed_out_last_and_the_run_says_so():
    box = [slots.Gpu(0, "GPU-0", 22118000000, 80 << 30, "pid 609 (python3 serve.py) holds 22.1 GB"),
           slots.Gpu(1, "GPU-1", 0, 80 << 30, "")]
    specs = {"a": {"gpus": 1}, "b": {"gpus": 1}}
    starts = slots.plan([_Run("a"), _Run("b")], [], specs, box, None)
    assert [(s.run.name, [g.index for g in s.gpus], s.shared) for s in starts] == [
        ("a", [1], None),
        ("b", [0], "GPU 0 is 26% filled by processes rgt did not start: pid 609 (python3 serve.py) holds 22.1 GB")]


# -- the causes ---------------------------------------------------------------------------------
def test_cuda_oom_cause_names_the_gpus_other_tenants():
    tenant = {"gpu": 0, "pid": 609, "command": "python3 serve.py", "used_memory_bytes": 22118000000, "visible": True}
    hits = [{"class": "cuda_oom", "severity": "critical", "line_no": 3, "source": "builtin",
             "line": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"}]
    cause = diagnose({"exit_code": 1, "hits": hits, "gpu_tenants": [tenant]})
    assert cause["class"] == "cuda_oom"
    assert "GPU 0 is shared with a process rgt did not start: pid 609 (python3 serve.py) holds 22.1 GB" in cause["evidence"]
    assert cause["remediation"].startswith("another tenant holds memory on this GPU")


def test_device_assert_is_decided_by_the_error_and_the_kernels_assertion_not_torch_boilerplate(tmp_path):
    from tests.triage.conftest import watch_file
    log = tmp_path / "stage.log"
    log.write_text(
        "step 1 loss 2.30\n"
        "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:111: operator(): block: [0,0,0], thread: [0,0,0] "
        "Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.\n"
        "Traceback (most recent call last):\n  File \"/w/assert.py\", line 6, in <module>\n"
        "    torch.cuda.synchronize()\n"
        "torch.AcceleratorError: CUDA error: device-side assert triggered\n"
        "Search for `cudaErrorAssert' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html "
        "for more information.\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might "
        "be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\n")
    facts = watch_file(log).facts()
    facts["exit_code"] = 1
    cause = diagnose(facts)
    assert cause["decided_by"].startswith("log line 6: torch.AcceleratorError: CUDA error: device-side assert triggered")
    assert "IndexKernel.cu:111: Assertion `" in cause["decided_by"] and '"index out of bounds"` failed' in cause["decided_by"]
    assert not any("TORCH_USE_CUDA_DSA" in e or "CUDA_LAUNCH_BLOCKING=1" in e for e in cause["evidence"])


def test_the_status_screen_names_the_gpus_other_tenants():
    from tests.client.test_render import scenario
    from rgt_client.status.render import render_status
    st = scenario()
    st["health"]["gpus"] = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "util_pct": 3, "memory_used_bytes": 23e9,
                             "memory_total_bytes": 85e9, "temperature_c": 40, "power_w": 90, "xid_last": None,
                             "processes": [
                                 {"pid": 609, "used_memory_bytes": 22118000000, "visible": True, "rgt": False,
                                  "command": "python3 serve.py \x1b[31m"},
                                 {"pid": 4194000, "used_memory_bytes": 1 << 30, "visible": False, "rgt": False},
                                 {"pid": 77, "used_memory_bytes": 1 << 30, "visible": True, "rgt": True}]}]
    text = render_status(st, {"host": "box"})
    assert "other tenant: pid 609 (python3 serve.py" in text and "holds 22.1 GB" in text
    assert "other tenant: pid 4194000 (not visible from this container)" in text
    assert "pid 77" not in text and "\x1b" not in text
