"""GPU slots benchmark: a sweep of one-GPU runs on an 8-GPU box, side by side.

  python bench/gpu_slots.py            # 64 runs of a 2 s stage, in parallel; serial reference computed
  python bench/gpu_slots.py --full     # also runs the 64 one after another (the classic run_queue)

The box is the fake libnvidia-ml.so.1 (8 GPUs) under the real nvidia-ml-py, built with gcc; the
agent is the real daemon with its default tick. Reported, side by side:
  makespan       submit of the sweep -> its group_finished event
  ideal          runs x stage time / GPUs (no overhead at all)
  serial         the same runs one after another (gpus = "all"), measured with --full, else
                 runs x stage time (what the shell loop `for cell in ...; do python train.py; done`
                 cannot beat)
Goal: makespan within 10 % of ideal.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from boxagent.base.units import parse_iso_utc  # noqa: E402


def build_fake_nvml(out: Path) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if not gcc:
        sys.exit("gcc is needed to build the fake libnvidia-ml.so.1")
    lib = out / "libnvidia-ml.so.1"
    subprocess.run([gcc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(REPO / "tests/health/fakenvml/fakenvml.c"),
                    "-lpthread"], check=True)
    return lib


def eight_gpus() -> dict:
    gpus = [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-%08d-fake" % i, "pci_bus_id": "00000000:%02X:00.0" % (0x18 + i),
             "util_gpu": 0, "util_memory": 0, "memory_total": 85899345920, "memory_used": 0, "temperature": 40,
             "power_mw": 60000, "sm_clock": 1980, "sm_clock_max": 1980, "clocks_event_reasons": 0,
             "ecc_uncorrected": 0, "remapped": [0, 0, 0, 0], "processes": []} for i in range(8)]
    return {"driver_version": "550.54.15", "cuda_version": 12040, "gpus": gpus, "events": []}


def sweep(tmp: Path, lib: Path, state: Path, runs: int, stage_s: float, gpus) -> float:
    home, work = tmp / ("home-%s" % gpus), tmp / ("work-%s" % gpus)
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RGT_")}
    env.update(RGT_HOME=str(home), PYTHONPATH=str(REPO), RGT_NVML_LIB=str(lib), FAKE_NVML_STATE=str(state),
               RGT_KMSG_PATH=str(tmp / "kmsg"))
    agent = [sys.executable, "-m", "boxagent"]
    subprocess.run(agent + ["start"], env=env, check=True, capture_output=True)
    job = {"name": "cells", "workdir": str(work), "gpus": gpus,
           "matrix": {"CELL": [str(i) for i in range(runs)]},
           "stage": [{"name": "train", "run": "sleep %s" % stage_s}]}
    try:
        t0 = time.time()
        subprocess.run(agent + ["submit", "-"], input=json.dumps(job).encode(), env=env, check=True,
                       capture_output=True)
        while True:
            done = [json.loads(line) for line in (home / "events.jsonl").read_text().splitlines()
                    if '"group_finished"' in line]
            if done:
                return parse_iso_utc(done[0]["at"]) - t0
            time.sleep(0.05)
    finally:
        subprocess.run(agent + ["stop"], env=env, capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--full", action="store_true", help="also run the sweep one after another")
    ap.add_argument("--runs", type=int, default=64)
    ap.add_argument("--stage-s", type=float, default=2.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "kmsg").write_text("")
        lib = build_fake_nvml(tmp)
        state = tmp / "nvml.json"
        state.write_text(json.dumps(eight_gpus()))
        parallel = sweep(tmp, lib, state, args.runs, args.stage_s, 1)
        ideal = args.runs * args.stage_s / 8
        serial = sweep(tmp, lib, state, args.runs, args.stage_s, "all") if args.full else args.runs * args.stage_s
    print("%d one-GPU runs of a %gs stage on 8 GPUs" % (args.runs, args.stage_s))
    print("  %-34s %8.1f s" % ("rgt sweep (gpus = 1), makespan", parallel))
    print("  %-34s %8.1f s   rgt / ideal  = %.3f  (goal <= 1.10)" % ("ideal (runs x stage / 8)", ideal, parallel / ideal))
    print("  %-34s %8.1f s   rgt / serial = %.3f  (%s)" % (
        "one after another" + (" (measured)" if args.full else " (runs x stage)"), serial, parallel / serial,
        "measured with gpus = \"all\"" if args.full else "run --full to measure it"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
