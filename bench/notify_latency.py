"""Notify benchmark: time from a stage failing to the receiver holding the message.

  python bench/notify_latency.py            # 30 failures per configuration (about a minute)
  python bench/notify_latency.py --full     # the 100 failures of the issue
  python bench/notify_latency.py --n 50

A real daemon (default intervals) runs one-stage jobs that fail at once; the stage writes its
own end time (`date +%s.%N`) just before `exit 3`, and a JSON webhook receiver on 127.0.0.1
stamps the arrival of that run's `stage_failed`. Failures run one after another. Configurations:
  watchdog importable   inotify wakes the loop on the stage's exit file
  watchdog hidden       a shadow `watchdog` package that fails to import: the loop polls (0.25 s)
  bare python3 -S       no site-packages at all: polling, and urllib instead of requests
Goal (the issue): p95 under 1 s. The table shows p50/p95/max, the goal and p95/goal.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GOAL_P95_S = 1.0


class Receiver:
    def __init__(self) -> None:
        self.arrivals: dict = {}
        self.cond = threading.Condition()
        recv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                t = time.time()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                ev = json.loads(body)
                if ev.get("type") == "stage_failed":
                    with recv.cond:
                        recv.arrivals[ev.get("run")] = t
                        recv.cond.notify_all()

            def log_message(self, *a) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def wait(self, run: str, timeout: float) -> float:
        deadline = time.time() + timeout
        with self.cond:
            while run not in self.arrivals and time.time() < deadline:
                self.cond.wait(deadline - time.time())
        if run not in self.arrivals:
            raise RuntimeError("no message for %s within %ds" % (run, timeout))
        return self.arrivals[run]


def shadow_watchdog(tmp: Path) -> Path:
    d = tmp / "no-watchdog"
    (d / "watchdog").mkdir(parents=True, exist_ok=True)
    (d / "watchdog" / "__init__.py").write_text("raise ImportError('hidden for the benchmark')\n")
    return d


def run_config(tmp: Path, key: str, python: list, pythonpath: str, n: int, port: int, recv: Receiver) -> list:
    home, work = tmp / key / "home", tmp / key / "work"
    work.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RGT_")}
    env.update(RGT_HOME=str(home), PYTHONPATH=pythonpath, RGT_HEARTBEAT_EVERY="36000")

    def agent(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
        return subprocess.run(python + ["-m", "boxagent", *args], input=stdin, capture_output=True, env=env,
                              timeout=60, cwd=str(work))

    agent("configure", stdin=json.dumps({"host": "bench"}).encode())
    agent("notify-set", stdin=json.dumps({"notify": [{"url": "json://127.0.0.1:%d/hook" % port}]}).encode())
    log = open(tmp / (key + ".log"), "wb")
    daemon = subprocess.Popen(python + ["-m", "boxagent", "daemon"], env=env, stdout=log, stderr=log,
                              cwd=str(work), start_new_session=True)
    try:
        time.sleep(1.0)
        out = []
        for i in range(n):
            run = "%s-%03d" % (key, i)
            stamp = work / (run + ".t")
            job = {"name": run, "workdir": str(work),
                   "stage": [{"name": "train", "run": "date +%%s.%%N > %s; exit 3" % shlex.quote(str(stamp))}]}
            res = agent("submit", "-", stdin=json.dumps(job).encode())
            if res.returncode != 0:
                raise RuntimeError("submit failed: %s" % res.stderr.decode())
            try:
                arrived = recv.wait(run, 30)
            except RuntimeError:
                _explain(home, tmp / (key + ".log"), run)
                raise
            out.append(arrived - float(stamp.read_text()))
        return out
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(15)


def _explain(home: Path, log: Path, run: str) -> None:
    """What the box says when a message did not come: run state, notifications, the daemon log."""
    try:
        st = json.loads((home / "status.json").read_text())
        runs = [r for r in st.get("runs", []) if r.get("name") == run]
        sys.stderr.write("run %s: %s\nnotifications: %s\n" % (run, json.dumps(runs)[:2000],
                                                             json.dumps(st.get("notifications"))[:2000]))
    except (OSError, ValueError) as exc:
        sys.stderr.write("no status.json: %s\n" % exc)
    sys.stderr.write("outbox: %s\n" % sorted(os.listdir(home / "outbox")))
    sys.stderr.write(log.read_text(errors="replace")[-3000:] + "\n")


def pct(xs: list, p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=30, help="failures per configuration (default 30)")
    ap.add_argument("--full", action="store_true", help="100 failures per configuration, as in the issue")
    ap.add_argument("--only", choices=("watchdog", "nowatchdog", "bare"), help="run one configuration")
    args = ap.parse_args()
    n = 100 if args.full else args.n
    recv = Receiver()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rgt-notify-bench-") as t:
        tmp = Path(t)
        configs = [("watchdog importable", "watchdog", [sys.executable], str(REPO)),
                   ("watchdog hidden", "nowatchdog", [sys.executable], "%s:%s" % (shadow_watchdog(tmp), REPO)),
                   ("bare python3 -S", "bare", [sys.executable, "-S"], str(REPO))]
        for label, key, python, pp in configs:
            if args.only and args.only != key:
                continue
            lat = run_config(tmp, key, python, pp, n, recv.port, recv)
            rows.append((label, len(lat), pct(lat, 50), pct(lat, 95), max(lat)))
    print("\nstage fails -> receiver holds the message (%d failures each)\n" % n)
    print("%-22s %5s %9s %9s %9s %11s %11s" % ("configuration", "n", "p50 ms", "p95 ms", "max ms",
                                              "goal p95 ms", "p95 / goal"))
    for label, cnt, p50, p95, mx in rows:
        print("%-22s %5d %9.0f %9.0f %9.0f %11.0f %11.2f" % (label, cnt, p50 * 1000, p95 * 1000, mx * 1000,
                                                           GOAL_P95_S * 1000, p95 / GOAL_P95_S))
    return 0


if __name__ == "__main__":
    sys.exit(main())
