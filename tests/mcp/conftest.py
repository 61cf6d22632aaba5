"""MCP fixtures: `rgt-client mcp` started as a real subprocess by the SDK's own stdio client, and
a `local` box (a real daemon, fast ticks) installed once per module and shared by its tests."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the MCP SDK (the `mcp` extra) is not installed")

from mcp.client import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from tests.clirunner import Cli  # noqa: E402
from tests.hostile import hostile  # noqa: E402,F401 - the fixture: a compromised box on the loopback sshd

FAST_ENV = {"RGT_TICK": "0.05", "RGT_SAMPLE_EVERY": "0.5", "RGT_STOP_GRACE": "1", "RGT_RETRY_BACKOFF": "0.1",
            "RGT_LAUNCH_GRACE": "1", "RGT_HEARTBEAT_EVERY": "3600"}
ENTRY = Path(sys.executable).parent / "rgt-client"


def server_argv(hosts: str, *extra: str, ssh_config: Path | None = None) -> list[str]:
    pre = ["--ssh-config", str(ssh_config)] if ssh_config else []
    if ENTRY.exists():
        return [str(ENTRY), *pre, "mcp", "--hosts", hosts, *extra]
    return [sys.executable, "-c", "from rgt_client.cli import main; main()", *pre, "mcp", "--hosts", hosts, *extra]


class Mcp:
    """One client session; every result it got is kept (as the bytes a model would read)."""

    def __init__(self, session: ClientSession, init: Any):
        self.session, self.init = session, init
        self.results: list[Any] = []
        self.named: list[tuple[str, Any]] = []

    async def call(self, name: str, progress: Any = None, **args: Any) -> Any:
        res = await self.session.call_tool(name, args, progress_callback=progress)
        self.results.append(res)
        self.named.append((name, res))
        return res

    async def check_output_schemas(self) -> int:
        """Every successful result so far against its tool's published outputSchema."""
        import jsonschema
        schemas = {t.name: t.output_schema for t in (await self.session.list_tools()).tools}
        checked = 0
        for name, res in self.named:
            if not res.is_error:
                jsonschema.validate(res.structured_content, schemas[name])
                checked += 1
        return checked

    async def ok(self, name: str, **args: Any) -> dict[str, Any]:
        res = await self.call(name, **args)
        assert not res.is_error, (name, res.content[0].text if res.content else res)
        return res.structured_content

    def text(self) -> str:
        return "\n".join(wire(r) for r in self.results)


def wire(res: Any) -> str:
    """What the model receives of one result: its text blocks and its structured content."""
    return json.dumps(res.model_dump(by_alias=True, exclude_none=True, mode="json"), ensure_ascii=False)


@asynccontextmanager
async def mcp_server(hosts: str, env: dict[str, str], *extra: str, ssh_config: Path | None = None,
                     errlog: Path | None = None) -> AsyncIterator[Mcp]:
    argv = server_argv(hosts, *extra, ssh_config=ssh_config)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=env.get("TEST_CWD"))
    with open(errlog or os.devnull, "a") as err:
        async with stdio_client(params, errlog=err) as (r, w):
            async with ClientSession(r, w) as s:
                init = await s.initialize()
                yield Mcp(s, init)


def iso_ts(at: str) -> float:
    return datetime.strptime(at, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def stop_daemon(home: Path) -> None:
    """The agent's own `stop`, then the pid file as a last resort."""
    pyz = home / "rgt-agent.pyz"
    if pyz.exists():
        subprocess.run([sys.executable, str(pyz), "stop"], env=dict(os.environ, RGT_HOME=str(home)),
                       capture_output=True, timeout=60)
    try:
        os.kill(int((home / "daemon.pid").read_text().split()[0]), signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass


class LocalBox:
    def __init__(self, base: Path):
        self.base = base
        self.home = base / "box home"
        self.work = base / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.config = base / "client-config"
        self.env = dict(os.environ, RGT_HOME=str(self.home), RGT_CLIENT_CONFIG_DIR=str(self.config),
                        TEST_CWD=str(base), **FAST_ENV)
        self.env.pop("RGT_SSH_CONFIG", None)

    def events(self) -> list[dict[str, Any]]:
        path = self.home / "events.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


@pytest.fixture(scope="module")
def local_box(tmp_path_factory):
    """A `local` box with a running daemon, shared by a module's tests."""
    box = LocalBox(tmp_path_factory.mktemp("mcp-local"))
    with pytest.MonkeyPatch.context() as mp:
        for k, v in FAST_ENV.items():
            mp.setenv(k, v)
        mp.setenv("RGT_CLIENT_CONFIG_DIR", str(box.config))
        res = Cli()("install", "local", "--home", str(box.home))
        assert res.exit_code == 0, res.output
    yield box
    stop_daemon(box.home)
