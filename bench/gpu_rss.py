"""GPU box memory: the agent daemon's RSS against the floor, side by side in one run.

  python bench/gpu_rss.py                         # real libnvidia-ml.so.1 (a GPU box)
  python bench/gpu_rss.py --fake                  # builds tests/health/fakenvml (no GPU here)
  python bench/gpu_rss.py --nvml-lib PATH.so      # a given fake libnvidia-ml.so.1
  python bench/gpu_rss.py --python /usr/bin/python3 --seconds 30

Field figure (H100, the box's Python 3.12 with psutil, requests and nvidia-ml-py importable):
daemon 58.5 MiB while a run trained; floor 28.7 MiB (`python3 -S` 10.3 MiB, + nvmlInit). Goal: the
daemon within 15 MiB of the floor (python -S + import pynvml + nvmlInit).

Measured, each in its own process, over the same wall time:
  floor      python -S, sleeping
  floor+nvml python -S, pynvml imported, nvmlInit() done, sleeping
  daemon     python (site-packages on: what a user's `python3` is) -m boxagent daemon, one run
             on the GPUs sleeping, health sampled every second
  daemon -S  the same under python -S (how the .pyz runs)
The .pyz as installed (bytecode precompiled by `rgt install`) holds what `-m boxagent` holds; a
.pyz started without that cache compiles every module from source and keeps 8-11 MiB more.
RSS = VmRSS after --seconds, HWM = VmHWM; the daemon's sys.modules is dumped from inside it
(a timer in a wrapper), and the modules it holds beyond the floor+nvml process are listed,
largest packages first, so what bloats it has a name.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
MODS_DUMP = r'''
import json, os, runpy, sys, threading
def dump():
    with open(os.environ["RGT_BENCH_MODS"], "w") as fh:
        json.dump(sorted(sys.modules), fh)
t = threading.Timer(float(os.environ["RGT_BENCH_AT"]), dump)
t.daemon = True
t.start()
sys.argv = ["boxagent"] + sys.argv[1:]
runpy.run_module("boxagent", run_name="__main__", alter_sys=True)
'''
FLOOR_NVML = r'''
import json, os, sys, time
import pynvml
pynvml.nvmlInit()
with open(os.environ["RGT_BENCH_MODS"], "w") as fh:
    json.dump(sorted(sys.modules), fh)
time.sleep(600)
'''


def status_kib(pid: int, key: str) -> Optional[int]:
    try:
        with open("/proc/%d/status" % pid) as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def pynvml_dir(python: str) -> Optional[str]:
    code = ("import os, pynvml; f = pynvml.__file__; d = os.path.dirname(f); "
            "print(os.path.dirname(d) if os.path.basename(f) == '__init__.py' else d)")
    out = subprocess.run([python, "-c", code],
                         capture_output=True, text=True)
    return out.stdout.strip() or None if out.returncode == 0 else None


def measure(argv: List[str], env: Dict[str, str], seconds: float, cwd: str) -> Dict[str, Optional[float]]:
    err_path = Path(cwd) / ("stderr-%d.txt" % time.monotonic_ns())
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=err)
    try:
        time.sleep(seconds)
        rss, hwm = status_kib(proc.pid, "VmRSS"), status_kib(proc.pid, "VmHWM")
        alive = proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    if not alive:
        sys.stderr.write("%s exited early:\n%s\n" % (" ".join(argv)[:200], err_path.read_text()[-2000:]))
    return {"rss_mib": rss / 1024.0 if rss else None, "hwm_mib": hwm / 1024.0 if hwm else None}


def kill_stages(home: Path) -> None:
    """The stages the killed daemon left (they run in sessions of their own): by RGT_HOME."""
    mark = ("RGT_HOME=%s" % home).encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as fh:
                if mark in fh.read().split(b"\0"):
                    os.kill(int(name), 9)
        except OSError:
            continue


def submit_sleeping_run(python: str, env: Dict[str, str], work: Path) -> None:
    job = {"name": "bench", "workdir": str(work), "gpus": 1,
           "stage": [{"name": "train", "run": "sleep 600"}]}
    subprocess.run([python, "-m", "boxagent", "submit", "-"], input=json.dumps(job), env=env,
                   capture_output=True, text=True, check=True)


def daemon_env(base: Dict[str, str], home: Path, mods: Path, at: float, extra_path: Optional[str]) -> Dict[str, str]:
    env = dict(base, RGT_HOME=str(home), RGT_SAMPLE_EVERY="1", RGT_BENCH_MODS=str(mods), RGT_BENCH_AT=str(at))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), extra_path) if p)
    return env


def modules(path: Path) -> List[str]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return []


def extra_modules(mods: List[str], floor: List[str]) -> List[str]:
    """Top-level packages the daemon holds that the floor+nvml process does not, biggest first."""
    base = {m.split(".")[0] for m in floor}
    counts: Dict[str, int] = {}
    for m in mods:
        top = m.split(".")[0]
        if top not in base:
            counts[top] = counts.get(top, 0) + 1
    return ["%s(%d)" % (k, v) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])]


def build_fake(tmp: Path) -> Path:
    out = tmp / "fakenvml" / "libnvidia-ml.so.1"
    out.parent.mkdir()
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o", str(out),
                    str(REPO / "tests" / "health" / "fakenvml" / "fakenvml.c"), "-lpthread"], check=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--nvml-lib", help="a fake libnvidia-ml.so.1 (FAKE_NVML_STATE is made for it)")
    ap.add_argument("--fake", action="store_true", help="build and use the tests' fake libnvidia-ml.so.1")
    ap.add_argument("--seconds", type=float, default=12.0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rgt-gpu-rss-"))
    if args.fake:
        args.nvml_lib = str(build_fake(tmp))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if args.nvml_lib:
        sys.path.insert(0, str(REPO))
        from tests.health.conftest import healthy
        state = tmp / "nvml.json"
        state.write_text(json.dumps(healthy(1)))
        env.update(LD_LIBRARY_PATH=str(Path(args.nvml_lib).resolve().parent), FAKE_NVML_STATE=str(state))
    nv = pynvml_dir(args.python)
    if nv is None:
        print("Error: %s cannot import pynvml (nvidia-ml-py)\nHint: pip install nvidia-ml-py, or pass --python" % args.python)
        return 2
    rows = []
    floor = measure([args.python, "-S", "-c", "import time; time.sleep(600)"], env, args.seconds, str(tmp))
    rows.append(("floor: python -S", floor, []))
    fmods = tmp / "floor-mods.json"
    fenv = dict(env, PYTHONPATH=nv, RGT_BENCH_MODS=str(fmods))
    floor_nvml = measure([args.python, "-S", "-c", FLOOR_NVML], fenv, args.seconds, str(tmp))
    rows.append(("floor: python -S + nvmlInit", floor_nvml, []))
    wrapper = tmp / "dump_modules.py"
    wrapper.write_text(MODS_DUMP)
    for label, flags, extra in (("daemon: python (site on)", [], None), ("daemon: python -S (.pyz)", ["-S"], nv)):
        home, work, mods = tmp / ("home" + "".join(flags)), tmp / ("work" + "".join(flags)), tmp / ("mods%s.json" % "".join(flags))
        work.mkdir()
        denv = daemon_env(env, home, mods, args.seconds - 1.0, extra)
        submit_sleeping_run(args.python, denv, work)
        got = measure([args.python] + flags + [str(wrapper), "daemon"], denv, args.seconds, str(tmp))
        rows.append((label, got, extra_modules(modules(mods), modules(fmods))))
        kill_stages(home)
    ref = floor_nvml["rss_mib"]
    print("GPU-box RSS, side by side (%s, %s, %.0f s each)" % (args.python, "fake NVML" if args.nvml_lib else "real NVML", args.seconds))
    for label, m, extra in rows:
        delta = (m["rss_mib"] - ref) if (m["rss_mib"] is not None and ref) else None
        print("  %-30s RSS %6s MiB  HWM %6s MiB  %s" % (
            label, "%.1f" % m["rss_mib"] if m["rss_mib"] else "?", "%.1f" % m["hwm_mib"] if m["hwm_mib"] else "?",
            "floor+nvml %+.1f MiB (goal <= +15)" % delta if delta is not None and label.startswith("daemon") else ""))
        if extra:
            print("      beyond the floor's modules: %s" % ", ".join(extra[:25]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
