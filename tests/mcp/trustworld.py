"""A laptop worth attacking, for the MCP server's threat-model tests.

A fake HOME holds the secrets a real one does (~/.netrc, ~/.pgpass, ~/.git-credentials,
~/.aws/credentials, ~/.ssh/id_ed25519), each with a unique canary string; the project inside it
has a `.env`, a nested repo with `.git/hooks`, a package and a conftest.py, symlinks that leave
it, a FIFO and an oversized job file. The box is tests/hostile.py's compromised agent reached as
`local` (no sshd needed). One real `rgt-client mcp` server, started by the MCP SDK's own stdio
client, serves a whole module's tests (SharedServer: its session lives in a background event
loop, so each parametrized case is one tool call, not one server start).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import os
import re
import stat
import threading
from pathlib import Path
from typing import Any

from rgt_client.pull.datahome import project_key
from tests.hostile import HostileBox
from tests.mcp.conftest import mcp_server, wire

BUDGET = 16 * 1024             # every answer's JSON (docs/agents.md)
LOGS_BUDGET = 56 * 1024        # read_logs: 48 KB of log text and its JSON
WAIT_SMALL = 300               # a timed-out wait, without its events
ENV_CANARY = "CANARYprocenviron4711"
CANARIES = {
    ".netrc": "machine example.com login alice password CANARYnetrc4711\n",
    ".pgpass": "localhost:5432:prod:alice:CANARYpgpass4711\n",
    ".git-credentials": "https://alice:CANARYgitcred4711@github.com\n",
    ".aws/credentials": "[default]\naws_key_id = CANARYawsid4711\n",
    ".ssh/id_ed25519": "-----BEGIN OPENSSH PRIVATE KEY-----\nCANARYsshkey4711\n-----END OPENSSH PRIVATE KEY-----\n",
    "proj/.env": "OPENAI_KEY_ID=CANARYdotenv4711\n",
    "proj/vendor/dep/.git/config": "[core]\n\trepositoryformatversion = 0\n# CANARYgitconfig4711\n",
    "proj/vendor/dep/.git/hooks/pre-commit.toml": "x = 'CANARYhook4711'\n",
    "proj/.hidden/job.toml": "name = 'CANARYhiddenjob4711'\n",
    # inside the project, readable as a job file, and still never quoted back:
    "proj/syntax.toml": "name = 'ok'\n[[stage]]\nCANARYsyntaxline4711 here\n",
    "proj/values.toml": "name = 'ok'\nworkdir = 'CANARYworkdir4711'\n[[stage]]\nname = 'a'\nrun = 'echo'\n",
    "proj/keys.toml": "name = 'ok'\nCANARYunknownkey4711 = 1\n[[stage]]\nname = 'a'\nrun = 'echo'\n",
    "proj/notify.toml": "[CANARYnotifytable4711]\nurl = 'CANARYnotifyurl4711'\n",
}
CANARY_STRINGS = sorted(set(re.findall(r"CANARY[a-z]+4711", "".join(CANARIES.values())))) + [ENV_CANARY]
PROJECT_FILES = {
    "proj/job.toml": "name = 'fromfile'\n[[stage]]\nname = 'a'\nrun = 'echo hi'\n",
    "proj/src/pkg/__init__.py": "# the user's package\n",
    "proj/tests/conftest.py": "# the user's conftest\n",
    # an older rgt pulled into the project: its folder stays as it is, never used, never deleted
    "proj/rgt-pulls/local/old/notes.txt": "pulled by an older rgt\n",
}
OWN_NOTES = "the user's own file in rgt's folder\n"


class World:
    def __init__(self, base: Path):
        self.base = base
        self.home = base / "home"
        self.project = self.home / "proj"
        for rel, text in {**CANARIES, **PROJECT_FILES}.items():
            p = self.home / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        (self.home / ".ssh").chmod(0o700)
        os.symlink(self.home / ".netrc", self.project / "leak.toml")              # a symlink out
        os.symlink("../.pgpass", self.project / "rel-leak.toml")                   # a relative one
        os.symlink(self.home / ".aws", self.project / "awsdir")                   # a folder link out
        os.symlink(self.project / ".env", self.project / "env.toml")               # to a hidden file in
        os.mkfifo(self.project / "fifo.toml")
        os.link(self.home / ".netrc", self.project / "hard.toml")                   # a hard link out
        (self.project / "big.toml").write_text("name = 'big'\n" + "# pad\n" * 300000)
        # rgt's data folder, outside HOME and so outside the project: where pulls and reports land
        self.data = base / "data"
        self.pulls = self.data / "mcp-pulls" / project_key(str(self.project))     # the MCP server's
        self.reports = self.data / "reports" / project_key(str(self.project))
        notes = self.pulls / "rgt-box" / "mine" / "notes.txt"
        notes.parent.mkdir(parents=True)
        notes.write_text(OWN_NOTES)
        self.data.chmod(0o700)
        self.box = HostileBox(base / "box")
        self.box.alias = "local"
        self.env = dict(os.environ, HOME=str(self.home), RGT_HOME=str(self.box.home),
                        RGT_CLIENT_CONFIG_DIR=str(base / "client-config"), TEST_CWD=str(self.project),
                        RGT_TEST_CANARY=ENV_CANARY, RGT_DATA_HOME=str(self.data))
        self.env.pop("RGT_SSH_CONFIG", None)

    def snapshot(self) -> dict[str, Any]:
        """Every entry under HOME (the project and an older rgt's ./rgt-pulls/ in it included):
        type, mode, size, content hash. rgt's own folders are outside it."""
        out: dict[str, Any] = {}
        for top, dirs, files in os.walk(self.home):
            for name in dirs + files:
                p = os.path.join(top, name)
                st = os.lstat(p)
                if stat.S_ISREG(st.st_mode):
                    with open(p, "rb") as fh:
                        out[p] = (st.st_mode, hashlib.sha256(fh.read()).hexdigest())
                elif stat.S_ISLNK(st.st_mode):
                    out[p] = ("link", os.readlink(p))
                else:
                    out[p] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
        return out

    def own_snapshot(self) -> dict[str, Any]:
        """The user's own files inside rgt's pull folder: never replaced either."""
        p = self.pulls / "rgt-box" / "mine" / "notes.txt"
        return {"notes": p.read_text() if p.exists() else None}


class SharedServer:
    """One `rgt-client mcp` for many calls: the SDK's client session runs in a background loop."""

    def __init__(self, env: dict[str, str], *extra: str, hosts: str = "local"):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.ready: concurrent.futures.Future = concurrent.futures.Future()
        self.main = asyncio.run_coroutine_threadsafe(self._serve(env, hosts, extra), self.loop)
        self.m = self.ready.result(timeout=120)

    async def _serve(self, env: dict[str, str], hosts: str, extra: tuple) -> None:
        self.stop = asyncio.Event()
        try:
            async with mcp_server(hosts, env, *extra) as m:
                self.ready.set_result(m)
                await self.stop.wait()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting test
            if not self.ready.done():
                self.ready.set_exception(exc)
            raise

    def call(self, name: str, **args: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(self.m.call(name, **args), self.loop).result(timeout=180)

    def read_resource(self, uri: str) -> str:
        res = asyncio.run_coroutine_threadsafe(self.m.session.read_resource(uri), self.loop).result(timeout=180)
        return res.contents[0].text

    def tools(self) -> dict[str, Any]:
        res = asyncio.run_coroutine_threadsafe(self.m.session.list_tools(), self.loop).result(timeout=60)
        return {t.name: t for t in res.tools}

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        try:
            self.main.result(timeout=60)
        except Exception:  # noqa: BLE001 - the server is going anyway
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def answer_size(res: Any) -> int:
    """The bytes of a result's JSON as the model reads it (its text block; structured content is
    the same JSON)."""
    return max(len(c.text.encode("utf-8")) for c in res.content) if res.content else 0


def assert_nothing_secret(res: Any) -> None:
    text = wire(res)
    leaked = [c for c in CANARY_STRINGS if c in text or c[6:] in text]
    assert not leaked, (leaked, text[:600])
    shadow = _shadow_line()
    assert not shadow or shadow not in text, text[:600]


def _shadow_line() -> str | None:
    try:
        with open("/etc/shadow") as fh:
            first = fh.readline().strip()
    except OSError:
        return None
    return first if len(first) > 12 else None


def status_doc(runs: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    doc = {"schema": "rgt.status/1", "observed_at": "2026-01-01T00:00:00.000Z", "host": "hostile-box",
           "agent": {"running": True, "state": "running", "version": "0.1.0"}, "runs": runs, "alerts": [],
           "events": [{"id": "1700000000000-aaaaaa-1", "at": "2026-01-01T00:00:00.000Z", "severity": "info",
                       "type": "daemon_started"}]}
    doc.update(extra)
    return doc


def run_doc(name: str, state: str = "running", **extra: Any) -> dict[str, Any]:
    r = {"name": name, "state": state, "current_stage": "train",
         "started_at": "2026-01-01T00:00:00.000Z",
         "stages": [{"name": "train", "state": state, "attempt": 1,
                     "progress": {"done": 10, "total": 100, "fraction": 0.1}}]}
    r.update(extra)
    return r


def thousand_runs() -> dict[str, Any]:
    runs = [run_doc("sweep-%d" % i, "running" if i % 3 else "queued") for i in range(1000)]
    runs[500] = run_doc("sweep-500", "failed", failed_stage="train",
                        cause={"class": "cuda_oom", "summary": "CUDA out of memory", "confidence": "high"})
    return status_doc(runs)


def write_events(home: Path, lines: list[dict[str, Any]]) -> None:
    with open(home / "events.jsonl", "w") as fh:
        for e in lines:
            fh.write(json.dumps(e) + "\n")
