"""Triage benchmark: scanning a big training log with the full rule set vs `grep -E -c`.

  python bench/triage_scan.py              # two 64 MB synthetic logs in /tmp (a few minutes)
  python bench/triage_scan.py --full       # 256 MB each
  python bench/triage_scan.py --size 32    # any size in MB
  python bench/triage_scan.py --full --only tail --runs 3   # the issue's figure: 256 MB, one log

Three logs. Two are mostly progress, with failure lines from tests/triage/corpus sprinkled in:
  mixed     tqdm bars redrawn with \\r, Lightning/HF/plain step lines, INFO logging
            (about 1 failure line in 20k lines);
  progress  tqdm bars as tqdm writes them (per-epoch bars redrawn with \\r, and bars a logger
            printed one update per line), Lightning validation bars, HF metric dicts, and the
            innocent words a long run prints everywhere (`val_MeanSquaredError=0.05`,
            `val_error`, `ConnectionPool`, NCCL INFO lines); a caught traceback now and then.
The third is what most failed runs look like:
  tail      short progress lines only (a tqdm bar a logger printed one update per line, epoch
            and step summaries), and the failure at the very end (a traceback, a CUDA OOM).
Rows per log, each the MEDIAN of --runs runs on the same page-cached file, run in turns:
  grep -E -c (reference)     the same alternation of all rule patterns (RuleSet.alternation())
  grep -E -c, no vocabulary  the same without the vocabulary tables' rules (what grep cost
                             before them: the reference grew with the tables too)
  rgt-agent triage (auto)    the CLI users run: on a file this size grep -F on the rules' literals
                             finds candidate lines, the rules run on those only, lines are counted
                             meanwhile, the tail is read for progress
  rgt-agent triage (python)  the pure-python engine (a box without grep)
  rgt-agent triage, empty    the same CLI on an empty log: its start-up, part of every row above
Goals: rgt (auto) >= 0.5x grep's throughput, rgt (python) >= 0.15x. Wall and CPU time are both
shown (CPU sums rgt's process and its grep): the box may be shared. The last lines print each
ratio against its goal and the command that measured it.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from boxagent.triage import vocab  # noqa: E402
from boxagent.triage.rules import build_rules  # noqa: E402

CORPUS = REPO / "tests" / "triage" / "corpus"
BLOCKS = " ▏▎▍▌▋▊▉█"


def failure_lines() -> List[bytes]:
    out = []
    for p in sorted(CORPUS.glob("*.log")):
        if p.name.startswith(("innocent", "nonzero", "machine_restart")):
            continue
        out += [l for l in p.read_bytes().split(b"\n")[-3:] if l.strip()]
    return out


def progress_line(rnd: random.Random, step: int) -> bytes:
    kind = rnd.random()
    if kind < 0.35:       # a tqdm bar redrawn 20 times before its newline
        parts = []
        for k in range(20):
            done = (step * 20 + k) % 1000
            parts.append("Epoch %d: %3d%%|%-10s| %d/1000 [%02d:%02d<%02d:%02d, %.2fit/s, v_num=3, "
                         "train_loss=%.3f]" % (step // 50, done // 10, "#" * (done // 100), done,
                                               k, step % 60, 9 - k % 10, 59 - step % 60,
                                               2 + rnd.random(), rnd.random() * 3))
        return ("\r" + "\r".join(parts)).encode()
    if kind < 0.6:
        return ("step %d/1000000 loss %.4f lr 3.0e-4 grad_norm %.3f tok/s %d"
                % (step, rnd.random() * 3, rnd.random() * 2, rnd.randint(100000, 200000))).encode()
    if kind < 0.85:
        return ("{'loss': %.4f, 'grad_norm': %.4f, 'learning_rate': 2.9e-05, 'epoch': %.2f}"
                % (rnd.random(), rnd.random(), step / 1e4)).encode()
    return ("[2024-05-03 11:%02d:%02d,%03d] INFO - step %d: eval accuracy %.4f, val_error %.4f, "
            "saved checkpoint to /root/autodl-tmp/ckpt/step_%d.pt" % (
                step % 60, step % 60, step % 1000, step, rnd.random(), rnd.random(), step)).encode()


def tqdm_bar(desc: str, n: int, total: int, elapsed: float, rate: float, postfix: str) -> str:
    """tqdm's own default format (tqdm 4.x format_meter, 10-cell bar, unicode blocks)."""
    frac = n / total
    cells = frac * 10
    full, part = int(cells), int((cells - int(cells)) * 8)
    bar = ("█" * full + (BLOCKS[part] if full < 10 else "")).ljust(10)
    left = (total - n) / rate
    return "%s: %3d%%|%s| %d/%d [%02d:%02d<%02d:%02d, %5.2fit/s%s]" % (
        desc, frac * 100, bar, n, total, elapsed // 60, elapsed % 60, left // 60, left % 60,
        rate, postfix)


def progress_epoch(rnd: random.Random, epoch: int) -> bytes:
    """One epoch of a progress-heavy log: the training bar, validation, metrics, chatter."""
    total, rate, out = rnd.choice((200, 500, 1000)), 5 + rnd.random() * 5, []
    segs = [tqdm_bar("Epoch %d/100" % epoch, n, total, n / rate, rate,
                     ", loss=%.3f, v_num=3" % rnd.random()) for n in range(0, total + 1, 2)]
    if rnd.random() < 0.5:                     # a terminal-style bar: one line of \r redraws
        out.append("\r" + "\r".join(segs))
    else:                                      # a logger that printed every update on a line
        out += segs
    out += ["\r" + "\r".join(tqdm_bar("Validation DataLoader 0", n, 50, n / 20.0, 20.0, "")
                            for n in range(51))]
    out.append("Epoch %d: val_loss=%.4f, val_MeanSquaredError=%.4f, val_error=%.4f" % (
        epoch, rnd.random(), rnd.random(), rnd.random()))
    out += ["{'loss': %.4f, 'grad_norm': %.4f, 'learning_rate': 2e-05, 'epoch': %.2f}" % (
        rnd.random(), rnd.random(), epoch + k / 10.0) for k in range(10)]
    out.append("NCCL INFO [Rank 0] ProcessGroupNCCL initialization options: TIMEOUT(ms): 1800000")
    out.append("INFO urllib3.connectionpool: ConnectionPool is full, discarding connection")
    return ("\n".join(out) + "\n").encode()


def _sprinkle(rnd: random.Random, fails: List[bytes]) -> bytes:
    if rnd.random() < 0.02:                   # a traceback the job caught and went on
        return (b"Traceback (most recent call last):\n  File \"loader.py\", line 88, in fetch\n"
                b"ConnectionResetError: [Errno 104] Connection reset by peer\n")
    return rnd.choice(fails) + b"\n" if rnd.random() < 0.1 else b""


def build_mixed(path: Path, size_mb: int) -> None:
    rnd, fails, step = random.Random(42), failure_lines(), 0
    with open(path, "wb") as fh:
        while fh.tell() < size_mb << 20:
            buf = []
            for _ in range(5000):
                step += 1
                buf.append(rnd.choice(fails) if rnd.random() < 5e-5 else progress_line(rnd, step))
            fh.write(b"\n".join(buf) + b"\n")


def build_progress(path: Path, size_mb: int) -> None:
    rnd, fails, epoch = random.Random(43), failure_lines(), 0
    with open(path, "wb") as fh:
        while fh.tell() < size_mb << 20:
            epoch += 1
            fh.write(progress_epoch(rnd, epoch) + _sprinkle(rnd, fails))


TAIL_FAILURE = (b"Traceback (most recent call last):\n"
                b"  File \"train.py\", line 212, in <module>\n    loss.backward()\n"
                b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                b"total capacity of 79.10 GiB of which 1.06 GiB is free.\n")


def build_tail(path: Path, size_mb: int) -> None:
    """Short progress lines only, one per update, and the failure at the end."""
    rnd, epoch = random.Random(44), 0
    with open(path, "wb") as fh:
        while fh.tell() < size_mb << 20:
            epoch += 1
            total, rate, out = 1000, 8 + rnd.random() * 4, []
            for n in range(0, total + 1, 5):
                out.append(tqdm_bar("Epoch %d" % epoch, n, total, n / rate, rate,
                                    ", loss=%.3f" % rnd.random()))
                if n % 100 == 0:
                    out.append("epoch %d step %d loss %.4f lr 3.0e-04" % (epoch, n, rnd.random()))
            out.append("Epoch %d: val_loss=%.4f val_acc=%.4f" % (epoch, rnd.random(), rnd.random()))
            fh.write(("\n".join(out) + "\n").encode())
        fh.write(TAIL_FAILURE)


def ensure(path: Path, size_mb: int, build: Callable[[Path, int], None]) -> Path:
    if not (path.exists() and path.stat().st_size >= size_mb << 20):
        print("building %s ..." % path, flush=True)
        build(path, size_mb)
    return path


def run_once(cmd: List[str]) -> Tuple[float, float, bytes]:
    """(wall s, CPU s of the process and its children, stdout). Output goes to a pipe: GNU
    grep stops at the first match when its stdout is /dev/null."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1, 4):
        raise SystemExit("failed: %s\n%s" % (" ".join(cmd), out.stderr.decode()[-2000:]))
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), out.stdout


def medians(cmds: Dict[str, List[str]], runs: int) -> Dict[str, Tuple[float, float, bytes]]:
    """The median wall and CPU time of each command, the commands run in turns."""
    got: Dict[str, List[Tuple[float, float, bytes]]] = dict((k, []) for k in cmds)
    for _ in range(runs):
        for name, cmd in cmds.items():
            got[name].append(run_once(cmd))
    return dict((k, (statistics.median(w for w, _, _ in v), statistics.median(c for _, c, _ in v),
                     v[-1][2])) for k, v in got.items())


def _hits(out: bytes) -> int:
    return sum(c["count"] for c in json.loads(out)["classes"].values())


def bench_log(log: Path, runs: int, empty: Path) -> Dict[str, float]:
    rs = build_rules()
    alt = rs.alternation()
    plain = "|".join("(%s)" % r.pattern for r in rs.rules if not r.vocab)
    agent = [sys.executable, "-m", "boxagent", "triage", "--json"]
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL)      # page cache, both sides
    res = medians({"grep": ["grep", "-E", "-c", "-e", alt, str(log)],
                   "grep0": ["grep", "-E", "-c", "-e", plain, str(log)],
                   "auto": agent + ["--engine", "auto", str(log)],
                   "python": agent + ["--engine", "python", str(log)],
                   "empty": agent + [str(empty)]}, runs)
    mb = log.stat().st_size / 1e6
    g_wall, g_cpu, g_out = res["grep"]
    print("\n%s (%.0f MB), median of %d runs" % (log, mb, runs))
    print("%-28s %8s %8s %10s %8s %9s %9s" % ("", "wall s", "cpu s", "MB/s wall", "matches",
                                              "x grep wall", "x grep cpu"))
    rows = (("grep -E -c (reference)", "grep", int(g_out or 0)),
            ("grep -E -c, no vocabulary", "grep0", int(res["grep0"][2] or 0)),
            ("rgt-agent triage (auto)", "auto", _hits(res["auto"][2])),
            ("rgt-agent triage (python)", "python", _hits(res["python"][2])),
            ("rgt-agent triage, empty log", "empty", 0))
    for label, key, n in rows:
        wall, cpu, _ = res[key]
        if key == "empty":                 # start-up only: no throughput, no ratio
            print("%-28s %8.2f %8.2f %10s %8s %10s %10s" % (label, wall, cpu, "-", "-", "-", "-"))
            continue
        print("%-28s %8.2f %8.2f %10.0f %8d %9.2fx %9.2fx" % (
            label, wall, cpu, mb / wall, n, g_wall / wall, g_cpu / max(cpu, 1e-9)))
    return dict((k, g_wall / res[k][0]) for k in ("auto", "python"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--full", action="store_true", help="256 MB logs")
    ap.add_argument("--size", type=int, default=None, help="log size in MB (default 64)")
    ap.add_argument("--runs", type=int, default=5, help="runs per row (the median is shown)")
    ap.add_argument("--dir", default="/tmp", help="where the synthetic logs go")
    ap.add_argument("--only", choices=("mixed", "progress", "tail"), action="append",
                    help="bench only these logs (repeatable; default all three)")
    args = ap.parse_args()
    size = args.size or (256 if args.full else 64)
    d = Path(args.dir)
    builders = (("mixed", "rgt-triage-bench-%dM.log", build_mixed),
                ("progress", "rgt-triage-progress-%dM.log", build_progress),
                ("tail", "rgt-triage-tail-%dM.log", build_tail))
    logs = [(name, ensure(d / (fmt % size), size, build)) for name, fmt, build in builders
            if not args.only or name in args.only]
    empty = d / "rgt-triage-empty.log"
    empty.write_bytes(b"")
    os.environ["PYTHONPATH"] = str(REPO)
    rs = build_rules()
    grep_v = subprocess.run(["grep", "--version"], capture_output=True).stdout.split(b"\n")[0].decode()
    print("%d rules (%d from %d vocabulary rows), %d literals for grep -F, %d regex passes for "
          "python; %s; Python %s" % (len(rs), sum(1 for r in rs.rules if r.vocab), len(vocab.rows()),
                                     len(rs.finder.cuts), len(rs.finder.passes), grep_v,
                                     sys.version.split()[0]))
    ratios = [(name, bench_log(log, args.runs, empty)) for name, log in logs]
    print("\n%s" % " ".join(["python"] + sys.argv))
    for name, r in ratios:
        print("%-9s auto %.2fx grep (goal >= 0.5: %s), python %.2fx grep (goal >= 0.15: %s)" % (
            name, r["auto"], "met" if r["auto"] >= 0.5 else "MISSED", r["python"],
            "met" if r["python"] >= 0.15 else "MISSED"))
    print("(throughput; the x columns are grep's time / rgt's time)")
    print("(matches: grep counts lines matching any pattern; rgt counts classified hits, where a"
          " generic exception line only counts after a traceback header)")


if __name__ == "__main__":
    main()
