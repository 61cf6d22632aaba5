"""The real-daemon box every suite shares: a temp RGT_HOME with fast intervals, a real daemon,
real stages. The `box` fixture (tests/conftest.py) makes one per test.

`Box` runs the agent from the source tree as subprocesses (exactly what the client runs on a box)
and reads the files the daemon writes. Everything the test started is killed at teardown.
"""
from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
FAST_ENV = {
    "RGT_TICK": "0.05",            # fast loop: stage ends seen within ~50 ms
    "RGT_SAMPLE_EVERY": "0.5",
    "RGT_STOP_GRACE": "1",
    "RGT_RETRY_BACKOFF": "0.1",
    "RGT_LAUNCH_GRACE": "1",
    "RGT_HEARTBEAT_EVERY": "3600",
}
TERMINAL = ("succeeded", "failed", "cancelled", "interrupted")
RUN_EVENT = {"succeeded": "run_succeeded", "failed": "run_failed", "cancelled": "run_cancelled",
             "interrupted": "run_interrupted", "running": "run_started"}


class Box:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.home = tmp / "rgt-home"
        self.workdir = tmp / "work"
        self.workdir.mkdir(parents=True)
        self.boot_id_path = tmp / "boot_id"
        self.boot_id_path.write_text(str(uuid.uuid4()) + "\n")
        self.env = dict(os.environ, RGT_HOME=str(self.home), PYTHONPATH=str(REPO),
                        RGT_BOOT_ID_PATH=str(self.boot_id_path), **FAST_ENV)
        self.env.pop("RGT_NO_INOTIFY", None)
        self.daemons: List[subprocess.Popen] = []

    # -- running the agent
    def agent(self, *args: str, stdin: Optional[str] = None, timeout: float = 30, bare: bool = False,
              python: Optional[List[str]] = None, env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
        py = python or ([sys.executable, "-S"] if bare else [sys.executable])
        cmd = py + (["-m", "boxagent"] if python is None or not any(a.endswith(".pyz") for a in py) else [])
        return subprocess.run(cmd + list(args), input=stdin, capture_output=True, text=True,
                              env=dict(self.env, **(env or {})), timeout=timeout, cwd=str(self.tmp))

    def start(self, **kw: Any) -> int:
        out = self.agent("start", **kw)
        assert out.returncode == 0, out.stderr
        return int(out.stdout.strip())

    def daemon(self, *extra: str, env: Optional[Dict[str, str]] = None,
               prefix: Optional[List[str]] = None, pyz: Optional[Path] = None) -> subprocess.Popen:
        """A foreground daemon we hold the Popen of (to SIGKILL/SIGTERM it); waits for its status.
        `pyz`: run from that built agent, as an installed box does, instead of the source tree."""
        log = open(self.tmp / ("daemon-%d.log" % len(self.daemons)), "ab")
        agent = [str(pyz)] if pyz else ["-m", "boxagent"]
        argv = list(prefix or []) + [sys.executable, *agent, "daemon", *extra]
        proc = subprocess.Popen(argv, env=dict(self.env, **(env or {})),
                                stdout=log, stderr=log, cwd=str(self.tmp), start_new_session=True)
        self.daemons.append(proc)
        wait_for(lambda: self.status_file().get("agent", {}).get("pid") == proc.pid or proc.poll() is not None,
                 10, "daemon status")
        return proc

    def submit(self, job: Dict[str, Any], *extra: str) -> subprocess.CompletedProcess:
        return self.agent("submit", "-", *extra, stdin=json.dumps(job))

    # -- reading what the daemon wrote
    # Read as the agent reads its files: a test may plant a FIFO or a symlink to /dev/zero there.
    def status_file(self) -> Dict[str, Any]:
        return _json_file(self.home / "status.json")

    def run_state(self, name: str) -> Dict[str, Any]:
        return _json_file(self.home / "runs" / name / "state.json")

    def stage(self, run: str, stage: str) -> Dict[str, Any]:
        return next(s for s in self.run_state(run)["stages"] if s["name"] == stage)

    def wait_run(self, name: str, states: Any = TERMINAL, timeout: float = 20) -> Dict[str, Any]:
        """Until state.json says one of `states` AND the event of that transition is in the log
        (a transition writes the state first, carrying its events, then appends them)."""
        states = (states,) if isinstance(states, str) else states

        def done() -> bool:
            state = self.run_state(name).get("state")
            return state in states and (state not in RUN_EVENT or any(
                e.get("run") == name for e in self.events(RUN_EVENT[state])))
        try:
            wait_for(done, timeout, "run %s in %s" % (name, states))
        except AssertionError as exc:
            raise AssertionError("%s; now %s\n%s" % (exc, self.run_state(name).get("state"), self.diagnostics()))
        return self.run_state(name)

    def diagnostics(self) -> str:
        """What a failed wait needs: the daemon's own log and the last events."""
        out = []
        for log in [self.home / "daemon.log"] + sorted(self.tmp.glob("daemon-*.log")):
            if log.exists():
                out.append("--- %s\n%s" % (log.name, log.read_text()[-3000:]))
        out.append("--- events\n" + "\n".join("%s %s %s %s" % (e["at"], e["type"], e.get("run"), e.get("stage"))
                                               for e in self.events()[-15:]))
        return "\n".join(out)

    def wait_stage(self, run: str, stage: str, state: str, timeout: float = 20) -> Dict[str, Any]:
        def ok() -> bool:
            st = self.run_state(run)
            return any(s["name"] == stage and s["state"] == state for s in st.get("stages", []))
        wait_for(ok, timeout, "stage %s/%s %s" % (run, stage, state))
        return self.stage(run, stage)

    def events(self, etype: Optional[str] = None) -> List[Dict[str, Any]]:
        from boxagent.base import safefile
        from boxagent.base.fsutil import parse_jsonl     # a test may plant a hostile line
        try:
            lines = safefile.read_bytes(str(self.home / "events.jsonl"), 256 << 20).split(b"\n")
        except OSError:
            return []
        evs = [e for e in (parse_jsonl(line) for line in lines) if e is not None]
        return [e for e in evs if etype is None or e.get("type") == etype]

    def wait_event(self, etype: str, timeout: float = 10, **match: Any) -> Dict[str, Any]:
        """state.json is written before its event: wait for the event, do not assume it."""
        def find() -> Any:
            for e in self.events(etype):
                if all(e.get(k) == v for k, v in match.items()):
                    return e
            return None
        return wait_for(find, timeout, "event %s %s" % (etype, match))

    def marker(self, run: str, stage: str) -> Path:
        return self.home / "runs" / run / "markers" / (stage + ".done")

    def daemon_pid(self) -> Optional[int]:
        try:
            return json.loads((self.home / "daemon.pid").read_text())["pid"]
        except (OSError, ValueError, KeyError):
            return None

    # -- teardown: nothing the test started survives it
    def cleanup(self) -> None:
        pid = self.daemon_pid()
        pids = [pid] if pid else []
        for proc in self.daemons:
            if proc.poll() is None:
                pids.append(proc.pid)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        for pidfile in glob.glob(str(self.home / "runs" / "*" / "stages" / "*.pid")):
            try:
                info = json.loads(Path(pidfile).read_text())
            except (OSError, ValueError):
                continue
            for g in (info.get("pgid"), info.get("shim_pid")):
                if g and g > 1:
                    try:
                        os.killpg(g, signal.SIGKILL)
                    except OSError:
                        pass
        for proc in self.daemons:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass


def _json_file(path: Path) -> Dict[str, Any]:
    from boxagent.base.fsutil import read_json
    doc = read_json(str(path), {})
    return doc if isinstance(doc, dict) else {}


def wait_for(pred: Callable[[], Any], timeout: float, what: str = "condition", interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(interval)


def job(name: str, workdir: Path, *stages: Dict[str, Any], **top: Any) -> Dict[str, Any]:
    out = {"name": name, "workdir": str(workdir), "stage": list(stages)}
    out.update(top)
    return out
