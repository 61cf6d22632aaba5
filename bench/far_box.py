"""A far box: every rgt command against `ssh HOST true`, through a 150 ms round-trip link.

  python bench/far_box.py              # 150 ms round trip, medians of 5, side by side in one run
  python bench/far_box.py --rtt 0.3    # another round trip

The box is this machine's real sshd behind bench/delayproxy.py (75 ms each way: this kernel has
no netem), with the agent installed over that link and one finished run with artifacts. Each
figure is measured with rgt's shared connection (the default) and without it
(RGT_SSH_MULTIPLEX=0, what every command paid before), paired with `ssh far true` in the same
run, and with the connections and bytes the proxy saw. Goals at 150 ms: the first `status`
<= 1.05x `ssh true`, a re-pull of an unchanged run <= 1.5x, and `watch` showing a stage's end
within 1 s + one round trip.

The floor of a repeated command is `ssh far true` over the same open master: nothing rgt does
over the shared connection can be faster. Against it: repeated `status` <= 1.3x, `status --json`
and the MCP server's `wait_for_change` (box_wait in a long-lived process, as the server runs it)
<= 1.5x, and `logs -n 50`. A pull copying 300 KB opens no new connection, and `auto` is within
1.2x of the faster of rsync and stream. `--phases` also prints where a first and a repeated `status`
go.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from delayproxy import DelayProxy  # noqa: E402
from tests.sshd import start_sshd  # noqa: E402

CLIENT = str(Path(sys.executable).parent / "rgt-client")
JOB = '''name = "far1"
workdir = %(work)s
[[stage]]
name = "train"
run = "mkdir -p out && head -c 300000 /dev/urandom > out/model.bin && echo trained"
[artifacts]
include = ["out/**"]
'''
WATCHED = '''name = "%(name)s"
workdir = %(work)s
[[stage]]
name = "train"
run = "sleep %(sleep)s; echo done"
'''


class Far:
    def __init__(self, base: Path, rtt: float):
        self.base = base
        self.sshd = start_sshd(base / "sshd", aliases=("near",))
        self.proxy = DelayProxy(self.sshd.port, rtt / 2)
        text = "\n".join(line for line in self.sshd.config.read_text().splitlines() if "ControlMaster" not in line)
        self.cfg = base / "ssh_config"
        self.cfg.write_text(text.replace("Host near", "Host far").replace("Port %d" % self.sshd.port,
                                                                          "Port %d" % self.proxy.port) + "\n")
        self.home, self.work, self.pulls = base / "home", base / "work", base / "pulls"
        self.work.mkdir()
        (base / "run").mkdir(mode=0o700)
        self.env = dict(os.environ, XDG_RUNTIME_DIR=str(base / "run"), RGT_CLIENT_CONFIG_DIR=str(base / "client"),
                        RGT_SSH_CONFIG=str(self.cfg))

    def rgt(self, *args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
        res = subprocess.run([CLIENT, *args], capture_output=True, text=True, env=env or self.env, timeout=600)
        if check and res.returncode not in (0,):
            raise SystemExit("rgt-client %s failed (%d): %s" % (" ".join(args), res.returncode, res.stderr))
        return res

    def setup(self) -> None:
        self.rgt("install", "far", "--home", str(self.home), "--sample-every", "1s")
        job = self.base / "far1.toml"
        job.write_text(JOB % {"work": json.dumps(str(self.work))})
        self.rgt("run", "far", str(job))
        self.rgt("watch", "far", "far1", "--every", "0.5s", "--max-wait", "120s")
        self.rgt("pull", "far", "far1", str(self.pulls))

    def measure(self, argv: list[str], env: dict, before=None) -> tuple[float, int, int]:
        """Seconds, connections and bytes of one command."""
        if before:
            before()
        c0, b0 = self.proxy.counters()
        t0 = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, timeout=600)
        dt = time.perf_counter() - t0
        c1, b1 = self.proxy.counters()
        return dt, c1 - c0, b1 - b0

    def close(self) -> None:
        # the box's daemon too: a bench must not leave an agent running after it (one did)
        pyz = self.home / "rgt-agent.pyz"
        if pyz.exists():
            subprocess.run([sys.executable, str(pyz), "stop"], capture_output=True, timeout=60,
                           env=dict(os.environ, RGT_HOME=str(self.home)))
        self.rgt("ssh-close", "far", check=False)
        self.proxy.close()
        self.sshd.stop()


def side_by_side(far: Far, rows: list, n: int) -> list[tuple[float, int, int]]:
    """Medians of n rounds, each round running every row once, in order: a row and its reference
    see the same moment's load (run row after row, a load that came and went between them was
    read as a difference of 5% on a first status)."""
    runs: list[list[tuple[float, int, int]]] = [[] for _ in rows]
    for _ in range(n):
        for got, (argv, env, before) in zip(runs, rows):
            got.append(far.measure(argv, env, before))
    return [(statistics.median(r[0] for r in got), int(statistics.median(r[1] for r in got)),
             int(statistics.median(r[2] for r in got))) for got in runs]


def watch_latency(far: Far, env: dict, every: str, sleep_s: float = 4.0) -> float | None:
    """Seconds from the stage's end (its event's time on the box) to watch printing the run's end."""
    name = "w%d" % int(time.time() * 1000)
    job = far.base / ("%s.toml" % name)
    job.write_text(WATCHED % {"name": name, "work": json.dumps(str(far.work)), "sleep": sleep_s})
    far.rgt("run", "far", str(job), env=env)
    proc = subprocess.Popen([CLIENT, "watch", "far", name, "--every", every, "--max-wait", "120s"],
                            stdout=subprocess.PIPE, text=True, env=env)
    seen: dict[str, float] = {}

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "succeeded" in line and "done" not in seen:
                seen["done"] = time.time()
    t = threading.Thread(target=read, daemon=True)
    t.start()
    proc.wait(180)
    t.join(5)
    ended = None
    for line in (far.home / "events.jsonl").read_text().splitlines():
        ev = json.loads(line)
        if ev.get("run") == name and ev.get("type") == "run_succeeded":
            ended = ev.get("ts") or _epoch(ev.get("at"))
    return seen["done"] - ended if ended and "done" in seen else None


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    import calendar
    base = calendar.timegm(time.strptime(iso[:19], "%Y-%m-%dT%H:%M:%S"))
    frac = iso[19:].rstrip("Z")
    return base + (float(frac) if frac.startswith(".") else 0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rtt", type=float, default=0.15, help="round trip in seconds (default 0.15)")
    ap.add_argument("-n", type=int, default=5, help="runs per figure (default 5)")
    ap.add_argument("--only", default=None, help="only the commands whose label has this word (e.g. pull)")
    ap.add_argument("--phases", action="store_true", help="also where a first and a repeated status go, phase by phase")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rgt-far-") as tmp:
        far = Far(Path(tmp), args.rtt)
        try:
            far.setup()
            report(far, args.n, args.rtt, args.only)
            floor_report(far, args.n, args.rtt, args.only)
            if args.phases:
                first_phases(far, args.n)
                phases(far, args.n)
        finally:
            far.close()
    return 0


def mux_options(far: Far) -> list[str]:
    """rgt's own multiplexing options for `far`, as the client computes them."""
    out = subprocess.run([sys.executable, "-c", "import json,sys; from rgt_client.box import sshmux; "
                          "print(json.dumps(sshmux.options('far', sys.argv[1])))", str(far.cfg)],
                         capture_output=True, text=True, env=dict(far.env, PYTHONPATH=str(REPO)), check=True)
    return json.loads(out.stdout)


# wait_for_change as the MCP server makes it: one long-lived process, one box_wait per call
# (timeout 0: the events after the cursor, none, and the run's status beside them).
WAIT_LOOP = r"""
import json, sys, time
from rgt_client.box import hosts
from rgt_client.status.eventwait import box_wait
t = hosts.target_for("far", sys.argv[1], None, None)
cursor = box_wait(t, None, None, 0.0)["cursor"]
took = []
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    box_wait(t, None, cursor, 0.0)
    took.append(time.perf_counter() - t0)
print(json.dumps(took))
"""


def wait_for_change(far: Far, n: int) -> tuple[float, int, int]:
    c0, b0 = far.proxy.counters()
    out = subprocess.run([sys.executable, "-c", WAIT_LOOP, str(far.cfg), str(n)], capture_output=True, text=True,
                         env=dict(far.env, PYTHONPATH=str(REPO)), timeout=600)
    if out.returncode != 0:
        raise SystemExit("wait_for_change loop failed: %s" % out.stderr)
    c1, b1 = far.proxy.counters()
    took = json.loads(out.stdout)
    return statistics.median(took), (c1 - c0) // max(1, n), (b1 - b0) // max(1, n + 1)


def floor_report(far: Far, n: int, rtt: float, only: str | None = None) -> None:
    """Repeated commands against `ssh far true` over the same open master, side by side."""
    far.rgt("status", "far")                                   # the master is up from here on
    floor_argv = ["ssh", "-F", str(far.cfg)] + mux_options(far) + ["far", "true"]
    cmds = [("ssh far true over the open master (the floor)", floor_argv, None),
            ("repeated status", [CLIENT, "status", "far"], 1.3),
            ("status --json", [CLIENT, "status", "far", "--json"], 1.5),
            ("logs -n 50", [CLIENT, "logs", "far", "far1", "-n", "50"], None)]
    cmds = [c for i, c in enumerate(cmds) if i == 0 or not only or only in c[0]]
    got = side_by_side(far, [(argv, far.env, None) for _, argv, _ in cmds], n)
    rows = [(label, fig, goal) for (label, _, goal), fig in zip(cmds, got)]
    if not only or only in "wait_for_change":
        rows.append(("wait_for_change (MCP, long-lived process)", wait_for_change(far, n), 1.5))
    pulls: dict[str, float] = {}
    if not only or only in "pull":
        methods = ("rsync", "stream", "auto")
        specs = []
        for method in methods:
            dest = far.base / ("pull300-" + method)
            # a fresh copy each time
            again = lambda d=dest: subprocess.run(["rm", "-rf", str(d)], check=True)  # noqa: E731
            specs.append(([CLIENT, "pull", "far", "far1", str(dest), "--method", method], far.env, again))
        for method, got in zip(methods, side_by_side(far, specs, n)):
            pulls[method] = got[0]
            rows.append(("pull copying 300 KB, --method %s" % method, got, None))
    floor = rows[0][1][0]
    print()
    print("over one open master: %.0f ms round trip, side by side, medians of %d" % (rtt * 1000, n))
    print("%-48s %8s %8s %6s %10s  %s" % ("command", "seconds", "x floor", "conns", "bytes", "goal"))
    for label, (sec, conns, nbytes), goal in rows:
        ok = "" if goal is None else ("<= %.2fx %s" % (goal, "ok" if sec / floor <= goal else "MISSED"))
        print("%-48s %8.3f %8.2f %6d %10d  %s" % (label, sec, sec / floor, conns, nbytes, ok))
    if pulls:
        best = min(pulls["rsync"], pulls["stream"])
        print("pull auto / the faster of rsync and stream: %.2fx (goal <= 1.20x: %s)"
              % (pulls["auto"] / best, "ok" if pulls["auto"] / best <= 1.2 else "MISSED"))


def status_ssh_argv(far: Far) -> list[str]:
    """The very ssh command line a `status far` starts (prefetch's head start), as the client builds it."""
    code = ("import json,sys; from rgt_client.box import agentcall, hosts, transport; "
            "t = hosts.target_for('far', sys.argv[1], None, None); "
            "print(json.dumps(transport.ssh_argv(t, transport.agent_command(t, agentcall.status_args(0, None)))))")
    out = subprocess.run([sys.executable, "-c", code, str(far.cfg)], capture_output=True, text=True,
                         env=dict(far.env, PYTHONPATH=str(REPO)), check=True)
    return json.loads(out.stdout)


def first_phases(far: Far, n: int) -> None:
    """Where a first status goes (no master yet), each step fresh: the difference between two
    rows is what the later one adds (opening the master; the box's side of status; the client)."""
    close = lambda: subprocess.run([CLIENT, "ssh-close", "far"], capture_output=True, env=far.env)  # noqa: E731
    plain = ["ssh", "-F", str(far.cfg), "far", "true"]
    rows = [("ssh far true (no master)", plain),
            ("ssh far true, opening rgt's master", plain[:3] + mux_options(far) + plain[3:]),
            ("status's own ssh line, opening the master", status_ssh_argv(far)),
            ("rgt-client status far (the whole command)", [CLIENT, "status", "far"])]
    print()
    print("phases of a first status (each fresh, side by side, medians of %d)" % n)
    print("%-48s %8s %8s %6s %10s" % ("step", "seconds", "+ prev", "conns", "bytes"))
    prev = None
    figures = side_by_side(far, [(argv, far.env, close) for _, argv in rows], n)
    for (label, _), (sec, conns, nbytes) in zip(rows, figures):
        print("%-48s %8.3f %8s %6d %10d" % (label, sec, "" if prev is None else "%+.3f" % (sec - prev), conns, nbytes))
        prev = sec
    close()


def box_python(far: Far) -> str:
    """The interpreter the box's `status` runs: the one install resolved and the client remembers
    (the `python3` on this machine's PATH was pyenv's shell shim, ~50 ms the box never pays)."""
    hosts = json.loads((far.base / "client" / "hosts.json").read_text())["hosts"]
    return hosts["far"].get("python") or "python3"


def phases(far: Far, n: int) -> None:
    """Where a repeated status goes: each piece timed alone, medians of n (the box is this machine)."""
    py = sys.executable
    env = dict(far.env, PYTHONPATH=str(REPO))
    box_env = dict(os.environ, RGT_HOME=str(far.home))
    pyz = str(far.home / "rgt-agent.pyz")
    box_py = box_python(far)
    pieces = [
        ("client: python start, site", [py, "-c", "pass"], env),
        ("client: start + imports before the ssh call", [py, "-c", "from rgt_client.status import prefetch; "
                                                         "from rgt_client.box import agentcall, earlyproc, hosts, "
                                                         "sshmux, transport"], env),
        ("client: start + every import of status", [py, "-c", "import rgt_client.cli, rgt_client.status.cmd"], env),
        ("box: python -S start (as install chose it)", [box_py, "-S", "-c", "pass"], box_env),
        ("box: python -S agent status --json (the .pyz)", [box_py, "-S", pyz, "status", "--json", "--events", "0"],
         box_env),
        ("box: the same from boot.py (as status runs it)", [box_py, "-S", str(far.home / ".agent-pyc" / "boot.py"),
                                                            "status", "--json", "--events", "0"], box_env),
        ("box: the remote shell line (sh -c)", ["sh", "-c", "true"], box_env),
    ]
    import resource
    print()
    print("phases of a repeated status (each alone, medians of %d; CPU is the process's own user+sys,"
          " which a loaded machine does not inflate)" % n)
    print("%-48s %8s %8s" % ("phase", "wall s", "CPU ms"))
    for label, argv, e in pieces:
        took, cpu = [], []
        for _ in range(n):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(argv, capture_output=True, env=e, timeout=120)
            took.append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000)
        print("%-48s %8.3f %8.1f" % (label, statistics.median(took), statistics.median(cpu)))


def report(far: Far, n: int, rtt: float, only: str | None = None) -> None:
    off = dict(far.env, RGT_SSH_MULTIPLEX="0")
    ssh_true = ["ssh", "-F", str(far.cfg), "far", "true"]
    close = lambda: subprocess.run([CLIENT, "ssh-close", "far"], capture_output=True, env=far.env)  # noqa: E731
    # Each group side by side, round by round (in this order: a repeated status rides the master
    # the first one opened). `ssh far true` goes with the statuses; an install's work on the box
    # must not land in their rounds.
    groups = [[("first status (no master yet)", ["status", "far"], close, 1.05),
               ("repeated status", ["status", "far"], None, None)],
              [("pull of an unchanged run", ["pull", "far", "far1", str(far.pulls)], None, 1.5)],
              [("install of an unchanged agent", ["install", "far"], None, None)]]
    rows = []
    for i, cmds in enumerate(groups):
        specs = [("ssh far true", ssh_true, far.env, None, None)] if i == 0 else []
        for label, argv, before, goal in cmds:
            if not only or only in label:
                specs += [(label, [CLIENT, *argv], far.env, before, goal),
                          (label + ", RGT_SSH_MULTIPLEX=0", [CLIENT, *argv], off, None, None)]
        if specs:
            got = side_by_side(far, [(argv, env, before) for _, argv, env, before, _ in specs], n)
            rows += [(label, fig, goal) for (label, _, _, _, goal), fig in zip(specs, got)]
    base = rows[0][1][0]
    print("far box: %.0f ms round trip (bench/delayproxy.py), side by side, medians of %d" % (rtt * 1000, n))
    print("%-48s %8s %8s %6s %10s  %s" % ("command", "seconds", "x ssh", "conns", "bytes", "goal"))
    for label, (sec, conns, nbytes), goal in rows:
        ok = "" if goal is None else ("<= %.2fx %s" % (goal, "ok" if sec / base <= goal else "MISSED"))
        print("%-48s %8.3f %8.2f %6d %10d  %s" % (label, sec, sec / base, conns, nbytes, ok))
    for every in () if only else ("1s", "60s"):    # --every is the old agent's poll: a stream does not depend on it
        lat = watch_latency(far, far.env, every)
        goal = 1.0 + rtt
        print("watch --every %-4s: a stage's end shown %s after it happened (goal <= %.2f s: %s)"
              % (every, "%.2f s" % lat if lat is not None else "never", goal,
                 "ok" if lat is not None and lat <= goal else "MISSED"))
    print("command: python bench/far_box.py --rtt %g -n %d%s" % (rtt, n, " --only %s" % only if only else ""))


if __name__ == "__main__":
    sys.exit(main())
