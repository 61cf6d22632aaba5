"""Plain functions under the click commands: fetch status (one round trip per host, hosts in
parallel), run-scoped agent calls with friendly errors, and submitting jobs."""
from __future__ import annotations

import json
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rgt_client import build_cache, exitcodes
from rgt_client.errors import ClientError
from rgt_client.render import heartbeat_state
from rgt_client.transport import Result, Target, run_agent


@dataclass
class HostStatus:
    target: Target
    status: dict[str, Any] | None = None
    error: ClientError | None = None
    round_trip_s: float = 0.0
    client: dict[str, Any] = field(default_factory=dict)

    @property
    def code(self) -> int:
        if self.error is not None:
            return self.error.code
        alive, _ = heartbeat_state(self.status or {})
        return exitcodes.OK if alive else exitcodes.AGENT_DOWN

    def as_json(self) -> dict[str, Any]:
        out = dict(self.status or {})
        out["client"] = dict(self.client, exit_code=self.code)
        if self.error is not None:
            out["client"]["error"] = self.error.message
            out["client"]["hint"] = self.error.hint
        return out


def _iso_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def fetch_status(target: Target, events: int | None = None, timeout: float = 120) -> HostStatus:
    """ONE agent call: `status --json` (the agent reads a dead daemon's files too)."""
    args = ["status", "--json"]
    if events is not None:
        args += ["--events", str(events)]
    hs = HostStatus(target, client={"host": target.host, "observed_at": _iso_now()})
    t0 = time.monotonic()
    try:
        res = run_agent(target, args, timeout=timeout)
        hs.status = _parse_status(target, res)
    except ClientError as exc:
        hs.error = exc
    hs.round_trip_s = round(time.monotonic() - t0, 4)
    hs.client["round_trip_s"] = hs.round_trip_s
    return hs


def _parse_status(target: Target, res: Result) -> dict[str, Any]:
    try:
        data = json.loads(res.text)
        if isinstance(data, dict):
            return data
    except ValueError:
        pass
    detail = res.err.strip() or res.text.strip()[:200] or "exit %d" % res.rc
    raise ClientError("the agent on %s gave no status: %s" % (target.host, detail),
                      "reinstall the agent: rgt-client install %s" % target.host)


def fetch_many(targets: list[Target], events: int | None = None) -> list[HostStatus]:
    """All hosts in parallel (threads: each is one ssh process), plus the local build's sha256."""
    with ThreadPoolExecutor(max_workers=min(32, len(targets) + 1)) as pool:
        local = pool.submit(build_cache.local_sha256)
        futures = [pool.submit(fetch_status, t, events) for t in targets]
        results = [f.result() for f in futures]
        local_sha = local.result()
    for hs in results:
        box_sha = ((hs.status or {}).get("agent") or {}).get("build_sha256")
        hs.client["local_build_sha256"] = local_sha
        hs.client["build_match"] = (box_sha == local_sha) if box_sha and local_sha else None
    return results


def find_run(status: dict[str, Any], name: str) -> dict[str, Any] | None:
    for run in status.get("runs") or []:
        if run.get("name") == name:
            return run
    return None


def unknown_run(target: Target, name: str, status: dict[str, Any] | None) -> ClientError:
    names = [r.get("name") for r in (status or {}).get("runs") or []]
    hint = ("runs on %s: %s" % (target.host, ", ".join(names))) if names else \
        "there are no runs on %s yet: rgt-client run %s JOB.toml" % (target.host, shlex.quote(target.host))
    return ClientError("no run %r on %s" % (name, target.host), hint, exitcodes.USAGE)


def only_run(hs: HostStatus, name: str) -> None:
    """Filter a fetched status to one run (client side: still one round trip)."""
    if hs.status is None:
        return
    run = find_run(hs.status, name)
    if run is None:
        raise unknown_run(hs.target, name, hs.status)
    hs.status["runs"] = [run]


def agent_run_command(target: Target, args: list[str], run: str, stdin: bytes | None = None,
                      timeout: float = 120) -> Result:
    """An agent command about one run; on a usage error, name the runs that do exist."""
    res = run_agent(target, args, stdin=stdin, timeout=timeout)
    if res.rc == exitcodes.USAGE:
        try:
            status = json.loads(run_agent(target, ["status", "--json", "--events", "0"], timeout=60).text)
        except (ClientError, ValueError):
            status = None
        if status is not None and find_run(status, run) is None:
            raise unknown_run(target, run, status)
    return res


def submit(target: Target, job: dict[str, Any]) -> dict[str, Any]:
    """Queue a validated job on the box (JSON on stdin) -> {"run", "state", "duplicate"}."""
    res = run_agent(target, ["submit", "-", "--json"], stdin=json.dumps(job).encode("utf-8"), timeout=120)
    if res.rc != 0:
        raise ClientError(_agent_message(res) or "submit failed (exit %d)" % res.rc,
                          _agent_hint(res) or "check the job file", res.rc if res.rc in (1, 2, 3) else 1)
    try:
        out = json.loads(res.text)
    except ValueError:
        out = {}
    return out if isinstance(out, dict) else {}


def _agent_message(res: Result) -> str:
    for line in res.err.splitlines():
        if line.startswith("Error: "):
            return line[len("Error: "):]
    return res.err.strip()


def _agent_hint(res: Result) -> str | None:
    for line in res.err.splitlines():
        if line.startswith("Hint: "):
            return line[len("Hint: "):]
    return None
