"""Known-failure retrieval benchmark: searching the index the agent ships with a 1 MB log tail,
side by side with `grep -c` over the same tail and with the rule scan of it.

  python bench/triage_known.py               # 1 MB tail, median of 7 runs
  python bench/triage_known.py --size 4 --runs 11

The tail is a training log's end: progress lines (tqdm bars redrawn with \\r, step lines,
metric dicts, INFO lines with paths and timestamps, so most tokens are numbers and paths the
tokenizer drops), failure lines from the field corpus sprinkled in, and a traceback at the end.
Rows, each the MEDIAN of --runs runs on the same text (page-cached file for the others):
  grep -c (reference)        `grep -c -i error TAIL`: one process reading the bytes
  rule scan (python)         the agent's own scan of the same file (scan_file, engine python)
  retrieval, warm            known.index.search(text): tokenize the tail, BM25 over the index
  retrieval, cold            the same in a fresh interpreter, the index read and unpacked first
Wall and CPU time are both shown: the box may be shared, and then the wall clock measures the
neighbours too.
Goal: retrieval under 50 ms on a 1 MB tail. The agent searches only the lines the rules kept
(the last 20 lines and the lines they hit: a few KB), and never when a rule is certain; this
measures the worst case, the whole tail. The last lines print the ratios.
"""
from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from boxagent.triage.known import index as K  # noqa: E402
from boxagent.triage.scanfile import scan_file  # noqa: E402

FIELD = REPO / "tests" / "triage" / "field" / "cases"


def build_tail(size: int, seed: int = 7) -> str:
    rnd = random.Random(seed)
    fails = [ln for p in sorted(FIELD.glob("*/*.log"))
             for ln in p.read_text(errors="replace").splitlines()[-2:] if ln.strip()]
    out: List[str] = []
    n, step = 0, 0
    while n < size:
        step += 1
        k = rnd.random()
        if k < 0.3:
            line = "\r".join("Epoch %d: %3d%%|%s| %d/1000 [00:%02d<00:%02d, %.2fit/s, loss=%.4f]" % (
                step // 100, j * 5, "#" * (j // 2), j * 50, j, 59 - j, 2 + rnd.random(), rnd.random())
                for j in range(20))
        elif k < 0.6:
            line = "step %d/1000000 loss %.4f lr 3.0e-4 grad_norm %.3f tok/s %d" % (
                step, rnd.random() * 3, rnd.random(), rnd.randint(100000, 200000))
        elif k < 0.85:
            line = "{'loss': %.4f, 'grad_norm': %.4f, 'learning_rate': 2.9e-05, 'epoch': %.2f}" % (
                rnd.random(), rnd.random(), step / 1e4)
        elif k < 0.995:
            line = ("[2024-05-03 11:%02d:%02d,%03d] INFO - step %d: saved checkpoint to "
                    "/root/autodl-tmp/ckpt/step_%d.pt (sha %08x)" % (
                        step % 60, step % 60, step % 1000, step, step, rnd.getrandbits(32)))
        else:
            line = rnd.choice(fails)
        out.append(line)
        n += len(line) + 1
    text = "\n".join(out)[-size:]
    return text + "\nTraceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n" \
                  "RuntimeError: CUDA error: an illegal memory access was encountered\n"


def median_s(fn: Callable[[], object], runs: int, clock: Callable[[], float] = time.perf_counter) -> float:
    times = []
    for _ in range(runs):
        t = clock()
        fn()
        times.append(clock() - t)
    return statistics.median(times)


# cold: the agent has imported triage (diagnose runs in it) but never read the index
COLD = ("import sys, time; sys.path.insert(0, %r); text = open(%r).read(); import boxagent.triage; "
        "t, c = time.perf_counter(), time.process_time(); "
        "from boxagent.triage.known import index as K; K.search(text); "
        "print(time.perf_counter() - t, time.process_time() - c)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=float, default=1.0, help="tail size in MB")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--out", default="/tmp/rgt-bench-known-tail.log")
    a = ap.parse_args()
    text = build_tail(int(a.size * (1 << 20)))
    path = Path(a.out)
    path.write_text(text)
    K.load()                                    # warm: the index read once per process
    grep = median_s(lambda: subprocess.run(["grep", "-c", "-i", "error", str(path)],
                                           stdout=subprocess.DEVNULL), a.runs)
    scan = median_s(lambda: scan_file(str(path), engine="python"), a.runs)
    warm = median_s(lambda: K.search(text), a.runs)
    # CPU time too: on a shared machine the wall clock measures the neighbours as well
    scan_cpu = median_s(lambda: scan_file(str(path), engine="python"), a.runs, time.process_time)
    warm_cpu = median_s(lambda: K.search(text), a.runs, time.process_time)
    colds = [[float(x) for x in subprocess.run(
        [sys.executable, "-S", "-c", COLD % (str(REPO), str(path))], capture_output=True, text=True,
        check=True).stdout.split()] for _ in range(a.runs)]
    cold, cold_cpu = statistics.median(c[0] for c in colds), statistics.median(c[1] for c in colds)
    top = K.search(text, 3)
    print("tail: %.1f MB (%d lines); index: %d documents, %d bytes packed" % (
        len(text.encode()) / (1 << 20), text.count("\n"), len(K.load().docs), len(K.read_data() or b"")))
    for name, s, cpu in (("grep -c (reference)", grep, None), ("rule scan (python)", scan, scan_cpu),
                         ("retrieval, warm", warm, warm_cpu), ("retrieval, cold (index read)", cold, cold_cpu)):
        print("  %-30s %8.1f ms wall%s" % (name, s * 1000, "  %8.1f ms CPU" % (cpu * 1000) if cpu else ""))
    print("nearest: %s" % ", ".join("%s (%s, %.2f)" % (d.source[:40], d.cls, s) for d, s in top))
    print("ratios: retrieval warm / grep -c = %.2fx; retrieval warm / rule scan = %.2fx; "
          "cold / grep -c = %.2fx" % (warm / grep, warm / scan, cold / grep))
    print("ratio on CPU time: retrieval warm / rule scan = %.2fx" % (warm_cpu / scan_cpu))
    print("goal: retrieval under 50 ms on a 1 MB tail: warm %.1f ms wall, %.1f ms CPU -> %s" % (
        warm * 1000, warm_cpu * 1000, "met" if warm_cpu < 0.05 else "NOT met"))
    print("command: python bench/triage_known.py --size %g --runs %d" % (a.size, a.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
