"""A hostile agent for tests: a compromised box answering the client with crafted data.

`hostile` (a pytest fixture; import it into an area's conftest.py) is a box on the real loopback
sshd whose RGT_HOME holds, where install puts the agent (`$RGT_HOME/rgt-agent.pyz`), a small
stdlib script instead. The client runs it exactly as it runs the real agent
(`python3 "$RGT_HOME/rgt-agent.pyz" ARGS`); the script looks its answer up in a plan the test
wrote and sends it, byte for byte:

    box.answer("status", stdout={"schema": "rgt.status/1", "host": "\\x1b]52;c;...\\x07"})
    box.answer("logs", stdout=huge(1 << 30))              # 1 GB, generated on the box
    box.answer("handbook", stdout=b"\\x1b[2J", stderr="Error: x\\n", rc=1)
    box.answers("notify-test", Answer(stdout=b"{"), Answer(stdout={"ok": True}))  # per call
    box.pull_info("r1", box.manifest({"ck/a.bin": b"abc"}, links={"d": "/outside"}))
    box.pull_stream(frame("ck/a.bin", b"abc"), END)
    res = rgt("pull", box.alias, "r1", str(dest), *box.args())
    box.calls()   # what the client asked: argv, stdin, and how many bytes it took of each answer

An answer is looked up by the whole argv joined with spaces, then by its first word, then `*`.
stdout/stderr take bytes, str, a JSON-able dict/list (dumped + newline), a Part (`huge`, `raw`,
`pause`) or a list of these. stderr is sent after stdout, then the script exits with `rc`.

run_client() runs rgt-client as a real process and reports its peak RSS; run_on_pty() does the
same with stdout and stderr on a real pseudo-terminal and returns what a terminal would receive;
raw_controls() lists the control bytes in it that a terminal would act on (tests/clientproc.py,
re-exported here).
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import pytest

from rgt_client.box.transport import Target
from tests.clientproc import (ClientRun, assert_terminal_safe, client_argv, raw_controls,  # noqa: F401
                              run_argv, run_client, run_on_pty)

AGENT_NAME = "rgt-agent.pyz"
PLAN_DIR = "hostile"

# Runs on the box under its python3 (3.8+, stdlib only). SIGHUP ignored so that a client that
# hangs up early still gets its `end` record written: tests read it to prove the client stopped.
SCRIPT = r'''
import base64, json, os, signal, sys, time
signal.signal(signal.SIGHUP, signal.SIG_IGN)
D = os.path.join(os.environ["RGT_HOME"], "hostile")
BLOCK = 1 << 20

def record(obj):
    with open(os.path.join(D, "calls.jsonl"), "a") as fh:
        fh.write(json.dumps(obj) + "\n")

def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

def emit(fd, part):
    if "sleep" in part:
        time.sleep(part["sleep"])
        return 0
    if "fill" in part:
        unit, left = base64.b64decode(part["fill"]), part["bytes"]
        block = (unit * (BLOCK // len(unit) + 1))[:BLOCK]
        while left > 0:
            n = min(left, len(block))
            write_all(fd, block[:n])
            left -= n
        return part["bytes"]
    data = base64.b64decode(part["b64"])
    write_all(fd, data)
    return len(data)

def main():
    argv = sys.argv[1:]
    with open(os.path.join(D, "plan.json")) as fh:
        plan = json.load(fh)
    keys = [" ".join(argv), argv[0] if argv else "", "*"]
    key = next((k for k in keys if k in plan), None)
    seen = 0
    if os.path.exists(os.path.join(D, "calls.jsonl")):
        with open(os.path.join(D, "calls.jsonl")) as fh:
            seen = sum(1 for ln in fh if json.loads(ln).get("key") == key and "argv" in json.loads(ln))
    stdin = b""
    unplanned = ("Error: the hostile agent has no answer for '%s'\n" % " ".join(argv)).encode()
    answers = plan.get(key) or [{"steps": [{"fd": 2, "b64": base64.b64encode(unplanned).decode()}], "rc": 1}]
    ans = answers[min(seen, len(answers) - 1)]
    if ans.get("read_stdin", True):
        stdin = sys.stdin.buffer.read(4 << 20)
    record({"key": key, "argv": argv, "stdin": base64.b64encode(stdin).decode()})
    sent = {"1": 0, "2": 0}
    broken = False
    try:
        for step in ans["steps"]:
            sent[str(step.get("fd", 1))] += emit(step.get("fd", 1), step)
    except OSError:
        broken = True     # the client hung up: how much it took is the finding
    record({"key": key, "end": True, "stdout_bytes": sent["1"], "stderr_bytes": sent["2"], "broken": broken})
    sys.exit(ans.get("rc", 0))

main()
'''


@dataclass
class Part:
    """One piece of an answer, produced on the box (so 1 GB never exists in the test process)."""
    spec: Dict[str, Any]


def raw(data: bytes) -> Part:
    return Part({"b64": base64.b64encode(data).decode("ascii")})


def huge(nbytes: int, fill: bytes = b"A") -> Part:
    """nbytes of `fill` repeated, written in 1 MiB blocks as the client reads them."""
    return Part({"fill": base64.b64encode(fill).decode("ascii"), "bytes": int(nbytes)})


def pause(seconds: float) -> Part:
    return Part({"sleep": float(seconds)})


def _size(p: Part) -> int:
    return p.spec["bytes"] if "fill" in p.spec else len(base64.b64decode(p.spec.get("b64", "")))


def _sha256(parts: List[Part]) -> str:
    """The sha256 of what the box will send, computed the way it sends it: in blocks."""
    h = hashlib.sha256()
    for p in parts:
        if "fill" in p.spec:
            unit, left = base64.b64decode(p.spec["fill"]), p.spec["bytes"]
            block = (unit * ((1 << 20) // len(unit) + 1))[:1 << 20]
            while left > 0:
                h.update(block[:min(left, len(block))])
                left -= len(block)
        elif "b64" in p.spec:
            h.update(base64.b64decode(p.spec["b64"]))
    return h.hexdigest()


Chunk = Union[bytes, str, dict, list, Part, None]


def _parts(value: Union[Chunk, Sequence[Chunk]]) -> List[Part]:
    if value is None:
        return []
    if isinstance(value, Part):
        return [value]
    if isinstance(value, (bytes, bytearray)):
        return [raw(bytes(value))] if value else []
    if isinstance(value, str):
        return [raw(value.encode("utf-8", "surrogateescape"))] if value else []
    if isinstance(value, dict):
        return [raw((json.dumps(value, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass"))]
    if isinstance(value, (list, tuple)) and all(isinstance(v, (Part, bytes, bytearray, str)) for v in value):
        return [p for v in value for p in _parts(v)]
    return [raw((json.dumps(value, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass"))]


@dataclass
class Answer:
    stdout: Any = None
    stderr: Any = None
    rc: int = 0
    read_stdin: bool = True     # False: answer at once, even while the client still writes

    def plan(self) -> Dict[str, Any]:
        steps = [dict(p.spec, fd=1) for p in _parts(self.stdout)]
        steps += [dict(p.spec, fd=2) for p in _parts(self.stderr)]
        return {"steps": steps, "rc": self.rc, "read_stdin": self.read_stdin}


def frame(path: str, data: Union[bytes, Part], offset: int = 0, nbytes: Optional[int] = None) -> List[Part]:
    """A pull-stream frame: its header line, then the body (`nbytes` defaults to the body's size;
    give another number to lie about it)."""
    size = _size(data) if isinstance(data, Part) else len(data)
    head = {"path": path, "offset": offset, "bytes": size if nbytes is None else nbytes}
    return [raw((json.dumps(head, ensure_ascii=False) + "\n").encode("utf-8")),
            data if isinstance(data, Part) else raw(data)]


def frame_error(path: Any, error: str) -> List[Part]:
    return [raw((json.dumps({"path": path, "error": error}, ensure_ascii=False) + "\n").encode("utf-8"))]


END = raw(b'{"end": true}\n')


class HostileBox:
    """A box whose agent answers what the test planned. `alias` is its ssh destination."""

    def __init__(self, root: Path, ssh_config: Optional[Path] = None, alias: str = "rgt-box"):
        self.root = root
        self.home = root / "hostile home"      # a space, as on real boxes' odd paths
        self.work = root / "hostile work"      # the run's workdir, for answers naming real files
        self.ssh_config = ssh_config
        self.alias = alias
        (self.home / PLAN_DIR).mkdir(parents=True)
        self.work.mkdir()
        agent = self.home / AGENT_NAME
        agent.write_text(SCRIPT)
        agent.chmod(0o755)
        self._plan: Dict[str, List[Dict[str, Any]]] = {}
        self._save()

    # --- answers --------------------------------------------------------------------------
    def answer(self, command: str, stdout: Any = None, stderr: Any = None, rc: int = 0,
               read_stdin: bool = True) -> None:
        """Plan the answer to `command` (argv joined by spaces, its first word, or `*`)."""
        self.answers(command, Answer(stdout, stderr, rc, read_stdin))

    def answers(self, command: str, *answers: Answer) -> None:
        """One answer per call of `command`, in order; the last one repeats."""
        self._plan[command] = [a.plan() for a in answers]
        self._save()

    def _save(self) -> None:
        path = self.home / PLAN_DIR / "plan.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._plan))
        os.replace(tmp, path)

    def manifest(self, files: Dict[str, bytes], links: Optional[Dict[str, str]] = None,
                 write: bool = True, **extra: Any) -> Dict[str, Any]:
        """A well-formed rgt.manifest/1 for these files (written under `work` too, so a real
        rsync on the box can serve them); tests then bend it."""
        entries = []
        for path, data in files.items():
            mtime_ns = 1_700_000_000 * 10 ** 9
            if write:
                p = self.work / path
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(data)
                os.utime(p, ns=(mtime_ns, mtime_ns))
            entries.append({"path": path, "bytes": len(data), "mtime_ns": mtime_ns,
                            "sha256": hashlib.sha256(data).hexdigest()})
        syms = [{"path": p, "target": t} for p, t in (links or {}).items()]
        m = {"schema": "rgt.manifest/1", "run": "r1", "created_at": "2024-01-01T00:00:00Z",
             "root": str(self.work), "include": ["**"], "exclude": [],
             "totals": {"files": len(entries), "bytes": sum(e["bytes"] for e in entries),
                        "symlinks": len(syms), "skipped": 0},
             "warnings": [], "files": entries, "symlinks": syms, "skipped": []}
        m.update(extra)
        return m

    def pull_info(self, run: str, manifest: Union[Dict[str, Any], bytes, Part, List[Part]], rsync: bool = False,
                  trailer: Any = None, **head: Any) -> Dict[str, Any]:
        """Plan `pull-info RUN`: the header line, then the manifest's bytes (then `trailer`, more
        than the header announced). rsync=True names the box's real rsync, so the client takes
        the rsync path; **head overrides header fields. Returns the header sent."""
        if isinstance(manifest, dict):
            manifest = json.dumps(manifest, ensure_ascii=False).encode("utf-8", "surrogatepass")
        body = _parts(manifest)
        size = sum(_size(p) for p in body)
        rs = shutil.which("rsync") if rsync else None
        h = {"schema": "rgt.pullinfo/1", "run": run, "root": str(self.work), "rsync": rs,
             "rsync_version": "3.2.7" if rs else None, "manifest_bytes": size,
             "manifest_sha256": _sha256(body),
             "run_state": "succeeded", "profile": {"name": None, "teardown": None, "danger_clock": None},
             "host": "hostile-box"}
        h.update(head)
        head_line = raw((json.dumps(h, ensure_ascii=False) + "\n").encode("utf-8", "surrogatepass"))
        self.answer("pull-info", stdout=[head_line] + body + _parts(trailer))
        return h

    def pull_stream(self, *frames: Union[Part, bytes, List[Part]], rc: int = 0) -> None:
        """Plan `pull-stream RUN`: frames built with frame(), frame_error() and END, or raw bytes."""
        parts: List[Part] = []
        for f in frames:
            parts.extend(f if isinstance(f, list) else _parts(f))
        self.answer("pull-stream", stdout=parts, rc=rc)

    # --- what the client did ---------------------------------------------------------------
    def calls(self, key: Optional[str] = None) -> List[Dict[str, Any]]:
        """Each agent call: argv, key, stdin (bytes), and from its end record stdout_bytes,
        stderr_bytes and broken (the client hung up before the answer was out)."""
        path = self.home / PLAN_DIR / "calls.jsonl"
        out: List[Dict[str, Any]] = []
        if not path.exists():
            return out
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if "argv" in rec:
                rec["stdin"] = base64.b64decode(rec["stdin"])
                out.append(rec)
            else:
                opened = [c for c in out if c["key"] == rec["key"] and "end" not in c]
                if opened:
                    opened[0].update(rec)
        return [c for c in out if key is None or c["key"] == key]

    def ended(self, key: str, timeout: float = 20) -> List[Dict[str, Any]]:
        """calls(key) once each has its end record (a box notices a hang-up a moment later)."""
        deadline = time.monotonic() + timeout
        while True:
            calls = self.calls(key)
            if all("end" in c for c in calls) or time.monotonic() > deadline:
                return calls
            time.sleep(0.05)

    # --- how the client reaches it ---------------------------------------------------------
    def target(self, local: bool = False) -> Target:
        if local:
            return Target(host="local", home=str(self.home))
        return Target(host=self.alias, home=str(self.home),
                      ssh_config=str(self.ssh_config) if self.ssh_config else None)

    def args(self) -> List[str]:
        """The flags that point a client command at this box's home."""
        return ["--home", str(self.home)]


@pytest.fixture
def hostile(sshd, tmp_path) -> HostileBox:
    """A hostile box on the real loopback sshd (alias rgt-box)."""
    return HostileBox(tmp_path / "hostile", sshd.config)


__all__ = ["HostileBox", "Answer", "Part", "raw", "huge", "pause", "frame", "frame_error", "END",
           "hostile", "run_client", "run_on_pty", "run_argv", "client_argv", "ClientRun", "raw_controls",
           "assert_terminal_safe"]
