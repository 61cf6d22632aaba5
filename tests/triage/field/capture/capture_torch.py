#!/usr/bin/env python3
"""Capture REAL PyTorch failure output for the triage field corpus.

Each scenario runs a small training-like script (scripts/) under a Python that has torch, the
way a stage runs on a box: `bash -c COMMAND` in its own work directory, PYTHONUNBUFFERED=1,
stdout and stderr into one file. The file is kept byte for byte (tqdm's \\r redraws, ANSI
colours, the shell's own `Killed` line) as captured/<scenario>.log, and captured/index.toml
gets one [[case]] per log in the field corpus format, plus where it came from (library,
python, captured_at, command, setup, observed).

    python tests/triage/field/capture/capture_torch.py --python PATH [--out DIR] [SCENARIO ...]

Needs root for the tmpfs and memory-cgroup scenarios (each one skipped, with the reason, where
a capability is missing; its earlier entry in the index is kept). A torch interpreter:
`python -m tests.torchenv` prints one (or makes it).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))     # run as a script from anywhere

from tests.triage.field.capture import index_file  # noqa: E402
from tests.triage.field.capture.machine import (RUN_TIMEOUT_S, Ctx, Skip, about,  # noqa: E402
                                                 disk_facts, oom_kills)

DEFAULT_OUT = HERE.parent / "captured"


# -- the scenarios (each name is also its log's name and its url anchor) -------------------
def save_full_tmpfs(ctx: Ctx) -> Dict[str, Any]:
    name = "save_full_tmpfs"
    d = ctx.scenario_dir(name, "save_full.py")
    with ctx.tmpfs("rgt-small", "size=8m") as mnt:
        command = "python save_full.py --dir %s" % mnt
        rc = ctx.run(name, d, command)
        seen = disk_facts(mnt)
    return ctx.case(name, "disk_full", rc, command, must_show="unexpected pos",
                    why="torch.save of model + Adam state (24 MB) onto an 8 MB tmpfs: the zip "
                        "writer fails mid-record ('iostream error', then 'unexpected pos')",
                    setup="tmpfs size=8m at %s" % mnt, **seen)


def many_files_inodes(ctx: Ctx) -> Dict[str, Any]:
    name = "many_files_inodes"
    d = ctx.scenario_dir(name, "many_files.py")
    with ctx.tmpfs("rgt-few-inodes", "size=64m,nr_inodes=400") as mnt:
        command = "python many_files.py --out %s/preds" % mnt
        rc = ctx.run(name, d, command)
        seen = disk_facts(mnt)
    return ctx.case(name, "inodes_full", rc, command, must_show="[",
                    why="one torch.save per sample onto a tmpfs with 400 inodes and bytes to "
                        "spare; the log alone cannot tell inodes from bytes (the same "
                        "ENOSPC wording): the daemon decides with statvfs of the path",
                    setup="tmpfs size=64m,nr_inodes=400 at %s" % mnt, **seen)


def load_truncated(ctx: Ctx) -> Dict[str, Any]:
    name = "load_truncated"
    d = ctx.scenario_dir(name, "make_checkpoint.py", "resume.py")
    prep = subprocess.run([ctx.python, "make_checkpoint.py", "ckpt/last.pt", "0.6"], cwd=str(d),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if prep.returncode != 0:
        raise RuntimeError("%s: making the checkpoint failed: %s" % (name, prep.stderr[-2000:]))
    command = "python resume.py --resume ckpt/last.pt"
    rc = ctx.run(name, d, command)
    return ctx.case(name, "truncated_checkpoint", rc, command, must_show="PytorchStreamReader",
                    why="torch.load of a checkpoint cut to 60 % of its bytes (what a save killed "
                        "mid-write leaves): the zip reader finds no central directory",
                    setup="ckpt/last.pt written by torch.save, then truncated to 60 %")


def shape_mismatch(ctx: Ctx) -> Dict[str, Any]:
    name = "shape_mismatch"
    d = ctx.scenario_dir(name, "shape_mismatch.py")
    command = "python shape_mismatch.py"
    rc = ctx.run(name, d, command)
    return ctx.case(name, "code_error", rc, command, must_show="shapes cannot be multiplied",
                    why="an MLP sized for 1x28x28 fed 3x28x28 batches: the first forward raises "
                        "a RuntimeError (mat1 and mat2 shapes); a bug, never worth a retry")


def nan_guard_raises(ctx: Ctx) -> Dict[str, Any]:
    name = "nan_guard_raises"
    d = ctx.scenario_dir(name, "nan_loss.py")
    command = "python nan_loss.py --guard"
    rc = ctx.run(name, d, command)
    return ctx.case(name, "divergence", rc, command, must_show="FloatingPointError",
                    why="SGD with a learning rate far too high: the loss overflows to inf, then "
                        "nan, and the script's finiteness guard raises FloatingPointError")


def nan_loss_exit0(ctx: Ctx) -> Dict[str, Any]:
    name = "nan_loss_exit0"
    d = ctx.scenario_dir(name, "nan_loss.py")
    command = "python nan_loss.py"
    rc = ctx.run(name, d, command)
    return ctx.case(name, "divergence", rc, command, must_show="loss nan",
                    why="the same divergence without a guard: nan loss lines, a saved model, "
                        "exit 0; a warning, not a failure (triage gives exit 0 no cause; the "
                        "expected outcome is a divergence warning, or a fail_pattern makes it fail)",
                    outcome="warning")


KILLED = "is killed by signal: Killed"
RESET = "ConnectionResetError: [Errno 104] Connection reset by peer"


def _worker_oom(ctx: Ctx, name: str, want: str, unwanted: str, tries: int) -> Tuple[int, str, Dict[str, Any]]:
    """Run worker_oom.py in a 1 GiB memory cgroup until its log shows `want` and not
    `unwanted`: how torch reports a worker the OOM killer took depends on a race (what the
    main process was doing with that worker then): torch's SIGCHLD check, a reset connection
    while it fetched a batch's shared memory from the dying worker, or both chained.
    Returns (exit code, cgroup version, what was observed)."""
    d = ctx.scenario_dir(name, "worker_oom.py")
    command = "python worker_oom.py"
    for attempt in range(1, tries + 1):
        with ctx.memory_cgroup(1 << 30) as cg:
            before = oom_kills(cg)
            rc = ctx.run(name, d, command, cgroup=cg)
            after = oom_kills(cg)
        text = ctx.log_text(name)
        if want in text and unwanted not in text:
            return rc, cg.version, {"observed": "cgroup oom_kill %d -> %d; this wording on attempt %d"
                                                % (before, after, attempt), "oom_kill_delta": after - before}
    raise Skip("%r without %r did not show in %d runs (a race; run it again)" % (want, unwanted, tries))


def dataloader_worker_oom(ctx: Ctx) -> Dict[str, Any]:
    name = "dataloader_worker_oom"
    rc, version, seen = _worker_oom(ctx, name, KILLED, RESET, 8)
    return ctx.case(name, "cgroup_oom", rc, "python worker_oom.py",
                    why="DataLoader workers (num_workers=2) caching decoded samples outgrow a "
                        "1 GiB memory cgroup; the kernel kills a worker and torch's main process "
                        "raises 'DataLoader worker (pid N) is killed by signal: Killed.'",
                    setup="memory cgroup (%s) limit 1 GiB, swap capped" % version, **seen)


def dataloader_worker_oom_reset(ctx: Ctx) -> Dict[str, Any]:
    name = "dataloader_worker_oom_reset"
    rc, version, seen = _worker_oom(ctx, name, RESET, KILLED, 20)
    return ctx.case(name, "cgroup_oom", rc, "python worker_oom.py",
                    why="the same worker OOM kill, caught while the main process was receiving "
                        "a batch's shared-memory fd from that worker: the only error is "
                        "ConnectionResetError (reads like a network blip); the cgroup's oom_kill "
                        "counter is what tells",
                    setup="memory cgroup (%s) limit 1 GiB, swap capped" % version, **seen)


def main_process_oom(ctx: Ctx) -> Dict[str, Any]:
    name = "main_process_oom"
    d = ctx.scenario_dir(name, "main_oom.py")
    (d / "run.sh").write_text("#!/bin/bash\nexport OMP_NUM_THREADS=2\npython main_oom.py\n")
    limit = 1 << 30
    with ctx.memory_cgroup(limit) as cg:
        before = oom_kills(cg)
        command = "bash run.sh"
        rc = ctx.run(name, d, command, cgroup=cg)
        after = oom_kills(cg)
    return ctx.case(name, "cgroup_oom", rc, command, must_show="Killed",
                    why="an eval loop keeping every output with its graph outgrows a 1 GiB "
                        "memory cgroup; the OOM killer ends python (SIGKILL) and the script's "
                        "bash prints its 'Killed' line; exit 137",
                    setup="memory cgroup (%s) limit 1 GiB, swap capped; run.sh runs python main_oom.py"
                          % cg.version,
                    observed="cgroup oom_kill %d -> %d" % (before, after), oom_kill_delta=after - before)


def tqdm_glued_exception(ctx: Ctx) -> Dict[str, Any]:
    name = "tqdm_glued_exception"
    d = ctx.scenario_dir(name, "tqdm_crash.py")
    command = "python tqdm_crash.py"
    rc = ctx.run(name, d, command)
    return ctx.case(name, "code_error", rc, command, must_show="KeyError",
                    why="a KeyError ('label') at batch 37 under a tqdm bar: the bar's \\r "
                        "redraws never end their line, so 'Traceback' follows the last redraw "
                        "on the same line",
                    library="torch %s, tqdm %s" % (ctx.about["torch"], ctx.about["tqdm"]))


def ansi_colour_innocent(ctx: Ctx) -> Dict[str, Any]:
    name = "ansi_colour_innocent"
    d = ctx.scenario_dir(name, "colour_log.py")
    command = "python colour_log.py"
    rc = ctx.run(name, d, command)
    return ctx.case(name, "none", rc, command, must_show="\x1b[33m",
                    why="a clean run logged through a coloured formatter (ANSI codes on every "
                        "line) with torch's lr_scheduler-order UserWarning routed into it in "
                        "yellow: nothing failed")


def ansi_colour_error(ctx: Ctx) -> Dict[str, Any]:
    name = "ansi_colour_error"
    d = ctx.scenario_dir(name, "colour_log.py")
    command = "python colour_log.py --data data/train.pt"
    rc = ctx.run(name, d, command)
    return ctx.case(name, "code_error", rc, command, must_show="FileNotFoundError",
                    why="the coloured logger's logger.exception of a torch.load of a missing "
                        "dataset file (FileNotFoundError), every line wrapped in ANSI red; then "
                        "sys.exit(1): a config error, never worth a retry")


SCENARIOS: List[Callable[[Ctx], Dict[str, Any]]] = [
    save_full_tmpfs, many_files_inodes, load_truncated, shape_mismatch, nan_guard_raises,
    nan_loss_exit0, dataloader_worker_oom, dataloader_worker_oom_reset, main_process_oom,
    tqdm_glued_exception, ansi_colour_innocent, ansi_colour_error]


def parse(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", required=True, help="an interpreter with torch and tqdm")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="where the logs and index.toml go")
    p.add_argument("--work", default=str(Path.home() / "rgt-capture"),
                   help="scratch directory the scripts run in (recreated per scenario)")
    p.add_argument("--mnt", default="/mnt", help="where the tmpfs mounts go")
    p.add_argument("scenario", nargs="*", help="only these (default: all): %s"
                   % ", ".join(s.__name__ for s in SCENARIOS))
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse(argv)
    names = [s.__name__ for s in SCENARIOS]
    unknown = [n for n in args.scenario if n not in names]
    if unknown:
        sys.stderr.write("Error: no scenario %s\nHint: one of %s\n" % (", ".join(unknown), ", ".join(names)))
        return 2
    ctx = Ctx(os.path.abspath(args.python) if os.sep in args.python else args.python,
              Path(args.work), Path(args.mnt), Path(args.out), about(args.python))
    fresh: Dict[str, Dict[str, Any]] = {}
    failed = 0
    for scenario in SCENARIOS:
        if args.scenario and scenario.__name__ not in args.scenario:
            continue
        try:
            fresh[scenario.__name__] = entry = scenario(ctx)
            print("captured %-28s class %-20s exit %d"
                  % (scenario.__name__, entry["class"], entry["exit_code"]))
        except Skip as why:
            print("skipped  %-28s %s" % (scenario.__name__, why))
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            failed += 1
            print("FAILED   %-28s %s" % (scenario.__name__, exc))
        finally:
            ctx.part(scenario.__name__).unlink(missing_ok=True)
    index = Path(args.out) / "index.toml"
    kept = index_file.merge(index_file.read(index), fresh, names)
    index_file.write(index, kept)
    print("%s: %d cases%s" % (index, len(kept), " (%d scenarios failed: their old entries kept)" % failed
                              if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
