"""The agent calls that read: fetch status (one round trip per host, hosts in parallel), and
run-scoped agent calls that name the runs that exist when a run name is wrong.
Data only: the text a user reads is render.py's."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from rgt_client import exitcodes
from rgt_client.box import agentcall, build_cache
from rgt_client.status import statusdata
from rgt_client.errors import ClientError
from rgt_client.box.transport import Target

STATUS_TIMEOUT_S = 120.0


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
        return exitcodes.OK if statusdata.alive(self.status or {}) else exitcodes.AGENT_DOWN

    def as_json(self) -> dict[str, Any]:
        out = dict(self.status or {})
        out["client"] = dict(self.client, exit_code=self.code)
        if self.error is not None:
            out["client"]["error"] = self.error.message
            out["client"]["hint"] = self.error.hint
        return out


def _iso_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def fetch_status(target: Target, events: int | None = None, run: str | None = None,
                 timeout: float = STATUS_TIMEOUT_S, all_runs: bool = False) -> HostStatus:
    """ONE agent call: `status --json` (the agent reads a dead daemon's files too). `run` is
    passed on: the agent filters (an unknown run costs a second call, to name the ones there are)."""
    hs = HostStatus(target, client={"host": target.host, "observed_at": _iso_now()})
    t0 = time.monotonic()
    try:
        hs.status = _status(target, events, run, timeout, all_runs)
    except ClientError as exc:
        hs.error = exc
    hs.round_trip_s = round(time.monotonic() - t0, 4)
    hs.client["round_trip_s"] = hs.round_trip_s
    return hs


def _status(target: Target, events: int | None, run: str | None, timeout: float,
            all_runs: bool = False) -> dict[str, Any]:
    ans = agentcall.call(target, agentcall.status_args(events, run, all_runs), timeout=timeout,
                         max_out=agentcall.STATUS_MAX)
    if ans.rc == exitcodes.USAGE and run:
        raise statusdata.unknown_run(target.host, run, _all_runs(target))
    # the agent answers 3 when its daemon is down, with the status its files hold
    if ans.rc not in (exitcodes.OK, exitcodes.AGENT_DOWN):
        raise ClientError("the agent on %s gave no status: %s" % (target.host, ans.error("status").message),
                          ans.hint or "reinstall the agent: rgt-client install %s" % target.host, ans.code)
    return statusdata.validate(agentcall.json_of(ans, "status"), target.host)


def _all_runs(target: Target) -> dict[str, Any] | None:
    """The runs there are, to name them when a run name was wrong (never an error itself)."""
    try:
        return _status(target, 0, None, 60.0)
    except ClientError:
        return None


def fetch_many(targets: list[Target], events: int | None = None, run: str | None = None,
               all_runs: bool = False) -> list[HostStatus]:
    """All hosts in parallel (a thread each: each is one ssh process; plain threads, as
    concurrent.futures would import logging on every `status`), plus the local build's sha256."""
    results: list[HostStatus | None] = [None] * len(targets)
    local: list[str | None] = [None]

    def one(i: int) -> None:
        try:
            results[i] = fetch_status(targets[i], events, run, all_runs=all_runs)
        except Exception as exc:  # noqa: BLE001 - one host's surprise must not hide the others
            results[i] = HostStatus(targets[i], error=ClientError(
                "internal error on %s: %s: %s" % (targets[i].host, type(exc).__name__, exc),
                "run again with --debug and report the traceback"), client={"host": targets[i].host})

    def sha() -> None:
        local[0] = build_cache.local_sha256()
    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(targets))]
    threads.append(threading.Thread(target=sha, daemon=True))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    local_sha, done = local[0], [hs for hs in results if hs is not None]
    for hs in done:
        box_sha = ((hs.status or {}).get("agent") or {}).get("build_sha256")
        hs.client["local_build_sha256"] = local_sha
        hs.client["build_match"] = (box_sha == local_sha) if box_sha and local_sha else None
    return done


def run_command(target: Target, args: list[str], run: str, what: str, stdin: bytes | None = None,
                timeout: float = agentcall.DEFAULT_TIMEOUT_S, max_out: int = agentcall.TEXT_MAX,
                on_out: Callable[[bytes], None] | None = None) -> agentcall.Answer:
    """An agent command about one run. An unknown run is an error naming the runs there are;
    the agent's other answers (its exit code, text, Error:/Hint:) come back as they are.
    A run or stage name that is not one never reaches the box: it could be read there as an
    option (`--help`) or a path (`okrun/../badrun`)."""
    agentcall.check_names(run, agentcall.stage_of(args))
    ans = agentcall.call(target, args, stdin=stdin, timeout=timeout, max_out=max_out, on_out=on_out)
    if ans.rc == exitcodes.USAGE:
        runs = _all_runs(target)
        if runs is not None and statusdata.find_run(runs, run) is None:
            raise statusdata.unknown_run(target.host, run, runs)
    return ans
