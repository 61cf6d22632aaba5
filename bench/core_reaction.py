"""Core benchmark: how fast the agent reacts.

  python bench/core_reaction.py            # 50 stages per mode, 10 re-adopted, 5 reference samples
  python bench/core_reaction.py --full     # 50 re-adopted stages and 50 reference samples

Rows, for the agent on python3 (watchdog -> inotify) and python3 -S (no watchdog: polling), each
with its default tick (boxagent.base.config INOTIFY_TICK / POLL_TICK):
  stage exit -> stage_succeeded     a chain of 50 stages; each ends with `date +%s.%N` (the
                                    command's last act); the event's `at` minus that time.
  re-adopted stage exit -> event    the daemon is stopped and a new one started while the stage
                                    runs, so it is not the daemon's child (no SIGCHLD): exit file
                                    noticed by inotify or by the poll.
  submit -> run_queued              request file written -> the daemon's event.
Reference: the shell loop users run today, `while kill -0 $PID; do sleep 5; done`, started at a
random moment against a job that ends at a random moment. Goal: agent p95 < 0.5 s.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from boxagent.daemon import control  # noqa: E402
from boxagent.base.home import Home  # noqa: E402
from boxagent.base.units import parse_iso_utc  # noqa: E402


def parse_at(at: str) -> float:
    return parse_iso_utc(at)


def pct(values: List[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


class Agent:
    def __init__(self, tmp: Path, name: str, python: List[str]):
        self.home, self.work = tmp / name / "home", tmp / name / "work"
        self.work.mkdir(parents=True)
        self.python = python
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RGT_")}
        self.env.update(RGT_HOME=str(self.home), PYTHONPATH=str(REPO))
        self.proc = None

    def run(self, *args: str, stdin: str = "") -> None:
        subprocess.run(self.python + ["-m", "boxagent", *args], input=stdin.encode(), env=self.env,
                       check=True, capture_output=True)

    def start(self) -> None:
        self.proc = subprocess.Popen(self.python + ["-m", "boxagent", "daemon"], env=self.env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait(lambda: (json.loads((self.home / "status.json").read_text())["agent"]["pid"] == self.proc.pid), 20)

    def stop(self, sig: int = signal.SIGINT) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(60)

    def cleanup(self) -> None:
        """Whatever happened, leave no daemon and no stage behind."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        for pidfile in self.home.glob("runs/*/stages/*.pid"):
            try:
                info = json.loads(pidfile.read_text())
            except (OSError, ValueError):
                continue
            for pgid in (info.get("pgid"), info.get("shim_pid")):
                if pgid and pgid > 1:
                    try:
                        os.killpg(pgid, signal.SIGKILL)
                    except OSError:
                        pass

    def events(self, etype: str) -> List[Dict]:
        try:
            lines = (self.home / "events.jsonl").read_text().splitlines()
        except OSError:
            return []
        return [e for e in (json.loads(x) for x in lines if x.strip()) if e["type"] == etype]

    def state(self, run: str) -> Dict:
        try:
            return json.loads((self.home / "runs" / run / "state.json").read_text())
        except (OSError, ValueError):
            return {}


def wait(pred, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except (OSError, ValueError, KeyError, TypeError):
            pass
        time.sleep(0.01)
    raise RuntimeError("timed out")


def stage_exits(agent: Agent, n: int) -> List[float]:
    stages = [{"name": "s%d" % i, "run": "sleep 0.05; date +%%s.%%N > t%d" % i} for i in range(n)]
    agent.run("submit", "-", stdin=json.dumps({"name": "chain", "workdir": str(agent.work), "stage": stages}))
    wait(lambda: agent.state("chain")["state"] == "succeeded", 120)
    wait(lambda: agent.events("run_succeeded"), 10)
    ev = {e["stage"]: parse_at(e["at"]) for e in agent.events("stage_succeeded")}
    return [ev["s%d" % i] - float((agent.work / ("t%d" % i)).read_text()) for i in range(n)]


def adopted_exits(agent: Agent, n: int) -> List[float]:
    stages = [{"name": "a%d" % i, "run": "while [ ! -f go%d ]; do sleep 0.05; done; date +%%s.%%N > u%d" % (i, i)}
              for i in range(n)]
    agent.run("submit", "-", stdin=json.dumps({"name": "adopt", "workdir": str(agent.work), "stage": stages}))
    out = []
    for i in range(n):
        wait(lambda: (agent.home / ("runs/adopt/stages/a%d.1.pid" % i)).exists(), 30)
        agent.stop()                     # stages keep running: the next daemon re-adopts
        agent.start()
        time.sleep(0.3)
        (agent.work / ("go%d" % i)).write_text("")
        wait(lambda: any(e["stage"] == "a%d" % i for e in agent.events("stage_succeeded")), 30)
        at = [parse_at(e["at"]) for e in agent.events("stage_succeeded") if e["stage"] == "a%d" % i][0]
        out.append(at - float((agent.work / ("u%d" % i)).read_text()))
    return out


def submits(agent: Agent, n: int) -> List[float]:
    home, out = Home(str(agent.home)), []
    for i in range(n):
        job = json.dumps({"name": "q%d" % i, "workdir": str(agent.work), "stage": [{"name": "s", "run": "true"}]})
        t0 = time.time()
        control.submit(home, job, "bench")
        wait(lambda: any(e["run"] == "q%d" % i for e in agent.events("run_queued")), 10)
        at = [parse_at(e["at"]) for e in agent.events("run_queued") if e["run"] == "q%d" % i][0]
        out.append(at - t0)
        time.sleep(random.uniform(0.05, 0.3))
    return out


def reference(tmp: Path, n: int) -> List[float]:
    """`while kill -0 $P; do sleep 5; done` against jobs ending at random moments, n at once."""
    procs = []
    for i in range(n):
        end = tmp / ("ref-end-%d" % i)
        script = ('(sleep %.3f; date +%%s.%%N > %s) & P=$!; sleep %.3f; '
                  'while kill -0 $P 2>/dev/null; do sleep 5; done; date +%%s.%%N'
                  % (random.uniform(1, 6), end, random.uniform(0, 5)))
        procs.append((subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True), end))
    out = []
    for proc, end in procs:
        seen = float(proc.communicate()[0].strip())
        out.append(max(0.0, seen - float(end.read_text())))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rgt-bench-react-"))
    rows = []
    from boxagent.base.config import INOTIFY_TICK, POLL_TICK
    for name, python, tick in (("python3 (inotify)", [sys.executable], INOTIFY_TICK),
                               ("python3 -S (polling)", [sys.executable, "-S"], POLL_TICK)):
        agent = Agent(tmp, name.split()[0] + ("-S" if "-S" in python else ""), python)
        try:
            agent.start()
            rows.append(("stage exit -> stage_succeeded, %s, tick %g s" % (name, tick), stage_exits(agent, 50)))
            rows.append(("re-adopted stage exit -> event, %s" % name, adopted_exits(agent, 50 if args.full else 10)))
            rows.append(("submit -> run_queued, %s" % name, submits(agent, 20)))
            agent.stop(signal.SIGTERM)
        finally:
            agent.cleanup()
    ref = reference(tmp, 50 if args.full else 5)
    print("%-64s %4s %8s %8s %8s %10s" % ("reaction time (s)", "n", "p50", "p95", "max", "ref/agent"))
    for label, values in rows:
        print("%-64s %4d %8.3f %8.3f %8.3f %9.0fx" % (label, len(values), pct(values, .5), pct(values, .95),
                                                     max(values), pct(ref, .95) / max(pct(values, .95), 1e-3)))
    print("%-64s %4d %8.3f %8.3f %8.3f %10s" % ("shell loop `kill -0` every 5 s (reference)", len(ref), pct(ref, .5),
                                               pct(ref, .95), max(ref), "1x"))
    print("goal: agent p95 < 0.5 s  (ratio = reference p95 / agent p95)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
