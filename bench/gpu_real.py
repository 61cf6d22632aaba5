"""The real-GPU check: what an H100 showed, replayed under the shipped agent (rgt-agent.pyz).

  python bench/gpu_real.py                        # a machine with an NVIDIA GPU and torch/CuPy
  python bench/gpu_real.py --python /usr/bin/python3
  python bench/gpu_real.py --dry-run              # no GPU: the fake libnvidia-ml.so.1 and
                                                  # stages that print what torch printed

Runs in a few minutes; as root the kernel log (/dev/kmsg) gives the Xid lines their pids.
  A  a device-side assert (torch: an index out of range)   the cause quotes the kernel's
                                                           assertion, not torch's boilerplate
  B  a kernel writing outside its buffer (CuPy RawKernel,  the driver's Xid 31 is in that stage's
     else Triton) -> Xid 31                                evidence; no GPU alert; no `Xid 31` on
                                                           the GPU's status line
  C  a process rgt did not start holding VRAM, then a run  status names it (rgt: false, command,
     that hits CUDA OOM beside it                          memory), the run's status says so, and
                                                           the cuda_oom cause names it
  D  the daemon's RSS while a run trains, beside python -S + nvmlInit (goal: within 15 MiB)
Prints each check's result and the evidence it read; exit 0 when every check that could run
passed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

ASSERT_TORCH = """
import torch
x = torch.zeros(10, device="cuda")
i = torch.tensor([20], device="cuda")
print("step 1/10 loss 1.0", flush=True)
y = x[i]
torch.cuda.synchronize()
"""
OOB_CUPY = r"""
import cupy
k = cupy.RawKernel(r'extern "C" __global__ void oob(float* p) { p[1ull << 40] = 1.0f; }', "oob")
a = cupy.zeros(1, dtype=cupy.float32)
print("step 1/10 loss 1.0", flush=True)
k((1,), (1,), (a,))
cupy.cuda.Device().synchronize()
"""
OOB_TRITON = r"""
import torch, triton, triton.language as tl
@triton.jit
def oob(p):
    tl.store(p + (1 << 40), 1.0)
a = torch.zeros(1, device="cuda")
print("step 1/10 loss 1.0", flush=True)
oob[(1,)](a)
torch.cuda.synchronize()
"""
HOLDER_TORCH = """
import sys, time, torch
free, total = torch.cuda.mem_get_info()
x = torch.empty(int(total * float(sys.argv[1])) // 4, dtype=torch.float32, device="cuda")
print("holding", x.numel() * 4, flush=True)
time.sleep(600)
"""
OOM_TORCH = """
import time, torch
free, total = torch.cuda.mem_get_info()
print("step 1/10 loss 1.0", flush=True)
time.sleep(3)                       # the agent samples the other tenant beside us
x = torch.empty(int(free * 1.1) // 4, dtype=torch.float32, device="cuda")
"""
TRAIN_TORCH = """
import time, torch
a = torch.randn(4096, 4096, device="cuda")
t0 = time.time()
while time.time() - t0 < 60:
    a = (a @ a).tanh()
    torch.cuda.synchronize()
"""
# --dry-run: the stages print what torch 2.11 printed on the H100, and play the driver (the kernel
# log line with their pid, their row in the fake NVML's process list).
FAKE_GPU_STAGE = r"""
import json, os, sys, time
state = os.environ["FAKE_NVML_STATE"]
s = json.load(open(state))
s["gpus"][0]["processes"] = [p for p in s["gpus"][0]["processes"] if p["pid"] != os.getpid()] + [
    {"pid": os.getpid(), "used_memory": 2 << 30}]
open(state + ".tmp", "w").write(json.dumps(s)); os.replace(state + ".tmp", state)
time.sleep(2.5)
print("step 1/10 loss 1.0", flush=True)
xid = int(sys.argv[1])
if xid:
    with open(os.environ["RGT_KMSG_PATH"], "a") as fh:
        fh.write("NVRM: Xid (PCI:0000:18:00): %d, pid=%d, name=python3, Ch 00000008\n" % (xid, os.getpid()))
sys.stdout.write(open(sys.argv[2]).read())
s = json.load(open(state))         # the process is gone: NVML no longer lists it
s["gpus"][0]["processes"] = [p for p in s["gpus"][0]["processes"] if p["pid"] != os.getpid()]
open(state + ".tmp", "w").write(json.dumps(s)); os.replace(state + ".tmp", state)
sys.exit(1)
"""
FAKE_OUTPUT = {
    "assert": ("/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:111: operator(): block: [0,0,0], thread: [0,0,0] "
               "Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.\n"
               "Traceback (most recent call last):\n  File \"assert.py\", line 7, in <module>\n"
               "torch.AcceleratorError: CUDA error: device-side assert triggered\n"
               "Search for `cudaErrorAssert' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"
               " for more information.\nCUDA kernel errors might be asynchronously reported at some other API call, "
               "so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
               "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"),
    "oob": "cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered\n",
    "oom": ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 60.00 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 57.1 GiB is free. Process %(holder)s has 20.60 GiB memory in use.\n"),
}


class Agent:
    """The shipped agent in a temp RGT_HOME, driven through its own commands."""

    def __init__(self, python: str, pyz: Path, home: Path, env: Dict[str, str]):
        self.python, self.pyz, self.home, self.env = python, pyz, home, env

    def run(self, *args: str, stdin: Optional[str] = None) -> subprocess.CompletedProcess:
        return subprocess.run([self.python, str(self.pyz)] + list(args), input=stdin, capture_output=True,
                              text=True, env=self.env, timeout=60)

    def submit(self, name: str, workdir: Path, command: str, gpus: Any = 1) -> None:
        job = {"name": name, "workdir": str(workdir), "gpus": gpus, "stage": [{"name": "main", "run": command}]}
        out = self.run("submit", "-", stdin=json.dumps(job))
        if out.returncode != 0:
            raise RuntimeError("submit %s: %s" % (name, out.stderr))

    def status(self) -> Dict[str, Any]:
        try:
            return json.loads((self.home / "status.json").read_text())
        except (OSError, ValueError):
            return {}

    def wait_run(self, name: str, timeout: float = 180) -> Dict[str, Any]:
        path = self.home / "runs" / name / "state.json"
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                st = json.loads(path.read_text())
                if st.get("state") in ("succeeded", "failed", "cancelled", "interrupted"):
                    return st
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        raise RuntimeError("run %s did not end in %ds" % (name, timeout))

    def events(self, etype: str) -> List[Dict[str, Any]]:
        try:
            lines = (self.home / "events.jsonl").read_text().splitlines()
        except OSError:
            return []
        return [e for e in (json.loads(x) for x in lines if x.strip()) if e.get("type") == etype]


class Report:
    def __init__(self) -> None:
        self.rows: List[tuple] = []

    def check(self, scenario: str, what: str, ok: Optional[bool], seen: str) -> None:
        self.rows.append((scenario, what, ok, seen))
        mark = {True: "PASS", False: "FAIL", None: "SKIP"}[ok]
        print("  [%s] %s: %s\n         saw: %s" % (mark, scenario, what, seen[:400]), flush=True)

    def failed(self) -> bool:
        return any(ok is False for _, _, ok, _ in self.rows)


def gpu_alerts(agent: Agent) -> List[Dict[str, Any]]:
    return [a for a in agent.status().get("alerts") or [] if a.get("type") == "gpu_xid"]


def scenario_assert(agent: Agent, work: Path, cmd: str, rep: Report) -> None:
    agent.submit("assert", work, cmd)
    st = agent.wait_run("assert")
    cause = st["stages"][-1].get("cause") or {}
    decided = str(cause.get("decided_by"))
    rep.check("A device assert", "the deciding line names the CUDA error and the kernel's assertion",
              "device-side assert triggered" in decided and "Assertion `" in decided, decided)
    rep.check("A device assert", "torch's boilerplate decides nothing",
              "TORCH_USE_CUDA_DSA" not in decided, decided)
    own = [e for e in cause.get("evidence") or [] if "this stage's process (Xid" in e]
    rep.check("A device assert", "its own Xid (43 on an H100) is in its evidence, when the driver logged one",
              bool(own) if own or (agent.status().get("health") or {}).get("xid_sources", {}).get("kernel_log") else None,
              "; ".join(own) or "no Xid reached the agent")


def scenario_oob(agent: Agent, work: Path, cmd: Optional[str], rep: Report) -> None:
    if cmd is None:
        rep.check("B out-of-bounds write", "Xid 31 told to its stage", None, "neither CuPy nor Triton importable")
        return
    agent.submit("oob", work, cmd)
    st = agent.wait_run("oob")
    cause = st["stages"][-1].get("cause") or {}
    own = [e for e in cause.get("evidence") or [] if "by this stage's process (Xid 31" in e]
    rep.check("B out-of-bounds write", "Xid 31 is in the faulting stage's evidence", bool(own),
              "; ".join(own) or json.dumps(cause)[:300])
    time.sleep(3)                                     # a few samples later: nothing box-wide
    gpus = (agent.status().get("health") or {}).get("gpus") or [{}]
    rep.check("B out-of-bounds write", "no GPU alert and no Xid on the GPU's status line",
              not gpu_alerts(agent) and not gpus[0].get("xid_last"),
              "alerts %s, xid_last %s" % (gpu_alerts(agent), gpus[0].get("xid_last")))


def scenario_tenant(agent: Agent, work: Path, holder: subprocess.Popen, cmd: str, rep: Report) -> None:
    deadline, procs = time.time() + 60, []
    while time.time() < deadline:
        procs = [p for g in (agent.status().get("health") or {}).get("gpus") or [] for p in g.get("processes") or []
                 if p.get("pid") == holder.pid]
        if procs:
            break
        time.sleep(0.5)
    rep.check("C other tenant", "status names the holder (rgt: false, command, memory)",
              bool(procs) and procs[0].get("rgt") is False and bool(procs[0].get("used_memory_bytes")), json.dumps(procs))
    agent.submit("oom", work, cmd)
    st = agent.wait_run("oom")
    cause = st["stages"][-1].get("cause") or {}
    named = [e for e in cause.get("evidence") or [] if "pid %d" % holder.pid in e]
    rep.check("C other tenant", "the cuda_oom cause names it with its memory",
              cause.get("class") == "cuda_oom" and bool(named), "%s: %s" % (cause.get("class"), "; ".join(named)))
    started = [e for e in agent.events("run_started") if e.get("run") == "oom"]
    rep.check("C other tenant", "the run's start says its GPU is shared (beyond 10%)",
              bool(started) and bool(started[-1].get("gpu_shared")), json.dumps(started[-1:])[:300])


def scenario_rss(agent: Agent, work: Path, cmd: str, python: str, env: Dict[str, str], rep: Report) -> None:
    spec = importlib.util.spec_from_file_location("gpu_rss", str(REPO / "bench" / "gpu_rss.py"))
    rss = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rss)  # type: ignore[union-attr]
    nv = rss.pynvml_dir(python)
    floor = rss.measure([python, "-S", "-c", rss.FLOOR_NVML], dict(env, PYTHONPATH=nv or "",
                        RGT_BENCH_MODS=str(work / "floor-mods.json")), 6.0, str(work)) if nv else {"rss_mib": None}
    agent.submit("train", work, cmd)
    time.sleep(15)
    pid = (agent.status().get("agent") or {}).get("pid")
    daemon = rss.status_kib(pid, "VmRSS") / 1024.0 if pid and rss.status_kib(pid, "VmRSS") else None
    agent.run("cancel", "train")
    ok = None if daemon is None or floor["rss_mib"] is None else daemon - floor["rss_mib"] <= 15.0
    rep.check("D memory", "the daemon within 15 MiB of python -S + nvmlInit while a run trains", ok,
              "daemon %s MiB, floor %s MiB" % (daemon and round(daemon, 1), floor["rss_mib"] and round(floor["rss_mib"], 1)))


def setup(args: argparse.Namespace, tmp: Path) -> tuple:
    from rgt_client.box.bundle import build_agent
    pyz, sha = build_agent(tmp / "rgt-agent.pyz")
    # as `rgt install` leaves it: the build's sha beside it and its bytecode compiled once (without
    # that cache every start compiles ~110 modules from source: +8-11 MiB of RSS for good)
    (tmp / "agent.sha256").write_text(sha + "\n")
    subprocess.run([args.python, str(pyz), "--rgt-precompile"], check=True, timeout=120)
    env = dict(os.environ, RGT_HOME=str(tmp / "home"), RGT_SAMPLE_EVERY="1")
    env.pop("PYTHONPATH", None)
    if args.dry_run:
        import shutil
        from tests.health.conftest import healthy
        lib = tmp / "fakenvml" / "libnvidia-ml.so.1"
        lib.parent.mkdir()
        subprocess.run([shutil.which("cc") or "gcc", "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o", str(lib),
                        str(REPO / "tests" / "health" / "fakenvml" / "fakenvml.c"), "-lpthread"], check=True)
        state = tmp / "nvml.json"
        state.write_text(json.dumps(healthy(1)))
        (tmp / "kmsg").write_text("")
        env.update(LD_LIBRARY_PATH=str(lib.parent), FAKE_NVML_STATE=str(state), RGT_KMSG_PATH=str(tmp / "kmsg"))
    return Agent(args.python, pyz, tmp / "home", env), sha


def commands(args: argparse.Namespace, work: Path, holder_pid: Optional[int]) -> Dict[str, Optional[str]]:
    py = args.python
    if args.dry_run:
        (work / "stage.py").write_text(FAKE_GPU_STAGE)
        out = {}
        for name, text in FAKE_OUTPUT.items():
            (work / (name + ".txt")).write_text(text % {"holder": holder_pid} if "%(" in text else text)
        for name, xid in (("assert", 43), ("oob", 31), ("oom", 0)):
            out[name] = "%s stage.py %d %s.txt" % (py, xid, name)
        out["train"] = "sleep 60"
        return out
    for name, text in (("assert", ASSERT_TORCH), ("oob_cupy", OOB_CUPY), ("oob_triton", OOB_TRITON),
                       ("oom", OOM_TORCH), ("train", TRAIN_TORCH)):
        (work / (name + ".py")).write_text(text)
    has = lambda mod: subprocess.run([py, "-c", "import " + mod], capture_output=True).returncode == 0  # noqa: E731
    oob = "%s oob_cupy.py" % py if has("cupy") else ("%s oob_triton.py" % py if has("triton") else None)
    return {"assert": "%s assert.py" % py, "oob": oob, "oom": "%s oom.py" % py, "train": "%s train.py" % py}


def start_holder(args: argparse.Namespace, agent: Agent, work: Path) -> subprocess.Popen:
    """A process rgt did not start, holding about a quarter of GPU 0 (no RGT_* in its env)."""
    env = {k: v for k, v in agent.env.items() if not k.startswith("RGT_")}
    if args.dry_run:
        holder = subprocess.Popen(["sleep", "600"], env=env)
        state = Path(agent.env["FAKE_NVML_STATE"])
        s = json.loads(state.read_text())
        s["gpus"][0]["processes"] = [{"pid": holder.pid, "used_memory": 22118000000}]
        state.write_text(json.dumps(s))
        return holder
    (work / "holder.py").write_text(HOLDER_TORCH)
    return subprocess.Popen([args.python, "holder.py", "0.25"], env=env, cwd=str(work), stdout=subprocess.DEVNULL)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=sys.executable, help="the box's python3 with torch (and CuPy/Triton)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: the fake NVML and recorded torch output")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rgt-gpu-real-"))
    work = tmp / "work"
    work.mkdir()
    agent, sha = setup(args, tmp)
    holder: Optional[subprocess.Popen] = None
    rep = Report()
    print("rgt real-GPU check: agent %s (sha256 %s), %s, %s" % (agent.pyz, sha[:12], args.python,
                                                              "DRY RUN (fake NVML)" if args.dry_run else "real driver"))
    try:
        out = agent.run("start")
        if out.returncode != 0:
            print("Error: the agent did not start: %s\nHint: run it by hand: %s %s start" % (out.stderr.strip(), args.python, agent.pyz))
            return 2
        holder = start_holder(args, agent, work)
        cmds = commands(args, work, holder.pid)
        scenario_assert(agent, work, cmds["assert"], rep)
        scenario_oob(agent, work, cmds["oob"], rep)
        scenario_tenant(agent, work, holder, cmds["oom"], rep)
        holder.kill()
        scenario_rss(agent, work, cmds["train"], args.python, agent.env, rep)
    finally:
        if holder is not None:
            holder.kill()
        agent.run("stop")
    print("%d checks: %d passed, %d failed, %d skipped" % (
        len(rep.rows), sum(1 for r in rep.rows if r[2] is True), sum(1 for r in rep.rows if r[2] is False),
        sum(1 for r in rep.rows if r[2] is None)))
    return 1 if rep.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
