"""The tools that change something: a box's runs (submit, cancel, resume, install) or files on
this machine (pull, report). --read-only leaves all of them out. None of them stops, releases or
destroys an instance, and none deletes anything: rgt has no such verb."""
from __future__ import annotations

import os
import time
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from rgt_client.mcp import calls, reports, summary
from rgt_client.mcp.localfs import PULLS, plain_label
from rgt_client.pull.datahome import plain_word
from rgt_client.mcp.results import CHANGE, CREATE, LOCAL_WRITE, answer, blocking
from rgt_client.mcp.safety import Policy, block, line, lines
from rgt_client.mcp.schemas import InstallOut, PullOut, ReportOut, SubmitOut, VerbOut
from rgt_client.mcp.tools_read import Host, RunName

RESUME = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)
PROBLEMS_SHOWN = 10


def register(server: MCPServer, policy: Policy) -> None:
    _run_tools(server, policy)
    _box_and_file_tools(server, policy)


def _run_tools(server: MCPServer, policy: Policy) -> None:
    @server.tool(annotations=CREATE)
    async def submit_job(host: Host, job: Annotated[str, Field(description="The job as TOML text, or the path "
                                                                "of a .toml job file inside the project folder",
                                                                min_length=1, max_length=1 << 20)],
                         replace: bool = False) -> Annotated[CallToolResult, SubmitOut]:
        """Queue a job on the box; its stages then run, retry and checkpoint on their own. Bad input
        comes back as an error with the CLI's Error:/Hint:. Submitting the same job again changes
        nothing. `cursor`: pass it to wait_for_change."""
        async def work() -> dict[str, Any]:
            t = calls.target(policy.check_host(host), policy.ssh_config)
            spec = calls.load_job(job, policy.project)
            for value in _env_values(spec):
                policy.learn_secret(value)
            cursor = await blocking(lambda: _cursor(t))
            out, notes = await blocking(lambda: calls.submit(t, spec, replace=replace))
            return submit_answer(out, notes, host, str(spec.get("name")), cursor, policy)
        return await answer(work, policy)

    @server.tool(annotations=CHANGE)
    async def cancel_run(host: Host, run: RunName) -> Annotated[CallToolResult, VerbOut]:
        """Stop a run: TERM its stage's process group, KILL after a grace. Work since the last
        marker is lost; the instance is untouched. Ask the user first."""
        return await _verb(policy, "cancel", host, run)

    @server.tool(annotations=RESUME)
    async def resume_run(host: Host, run: RunName) -> Annotated[CallToolResult, VerbOut]:
        """Requeue a failed, interrupted or cancelled run from its last marker (after you fixed the
        cause: diagnose says what it was)."""
        return await _verb(policy, "resume", host, run)


def _box_and_file_tools(server: MCPServer, policy: Policy) -> None:
    @server.tool(annotations=CREATE)
    async def install_agent(host: Host, price: Annotated[str | None, Field(description="What the box costs per "
                                                                            "hour, e.g. 2.49", max_length=32)] = None,
                            notify: Annotated[str | None, Field(description="Path of a notification .toml "
                                                                "file inside the project folder", max_length=4096)] = None
                            ) -> Annotated[CallToolResult, InstallOut]:
        """Install or upgrade the rgt agent on the box and (re)start it. Idempotent; running
        stages keep running."""
        async def work() -> dict[str, Any]:
            t = calls.target(policy.check_host(host), policy.ssh_config)
            rep = await blocking(lambda: calls.install_agent(t, price, notify, policy.project, policy.learn_secret))
            return {"host": host, "installed": True, "sha256": rep["sha256"][:16],
                    "profile": line(rep.get("profile"), policy, 80),
                    "profile_reason": line(rep.get("profile_reason"), policy, 300),
                    "warnings": lines(rep.get("warnings"), policy, 5, 300),
                    "next": "rgt-client run %s JOB.toml   (MCP: submit_job)" % summary.q(host)}
        return await answer(work, policy)

    @server.tool(annotations=LOCAL_WRITE)
    async def pull_artifacts(host: Host, run: RunName, ctx: Context,
                             dest: Annotated[str | None, Field(description="A label for a second copy: one "
                                                               "plain word (letters, digits, _+-), never a path; "
                                                               "the pull goes to HOST/RUN-LABEL below rgt's own "
                                                               "pulls folder, outside the project (default HOST/RUN)",
                                                               max_length=64)] = None
                             ) -> Annotated[CallToolResult, PullOut]:
        """Copy the run's manifest files into rgt's own data folder, outside the project
        (DATA/mcp-pulls/PROJECT/HOST/RUN, or .../HOST/RUN-DEST; the answer's `dest` is the absolute
        path), resuming a partial pull, and verify every sha256. Replaces only files an earlier
        pull of rgt wrote there; refuses hidden paths. Says whether it is safe to tear the box
        down and what the platform's stop verb destroys. Never deletes anything, here or on the box."""
        async def work() -> dict[str, Any]:
            t = calls.target(policy.check_host(host), policy.ssh_config)
            where, ident = pull_folder(policy, host, run, dest)
            report = _progress_reporter(ctx)
            try:
                res = await blocking(lambda: calls.pull_and_verify(t, run, where, report, ident))
            except calls.ClientError as exc:
                gate = calls.not_pulled_gate(where, exc.message)
                raise calls.ClientError(exc.message, "%s | %s" % (exc.hint or "pull again",
                                                                  gate.splitlines()[0] if gate else ""), exc.code)
            return pull_answer(res, host, run, policy)
        return await answer(work, policy)

    @server.tool(annotations=LOCAL_WRITE)
    async def make_report(host: Host, run: RunName,
                          out: Annotated[str | None, Field(description="An .html file below rgt's own reports "
                                                           "folder for this project, outside the project "
                                                           "(default HOST-RUN.html)", max_length=512)] = None
                          ) -> Annotated[CallToolResult, ReportOut]:
        """Write the run's one-file HTML report (stages, causes, curves, cost) below rgt's own
        data folder, outside the project (DATA/reports/PROJECT/), and return its absolute path. Replaces only
        a report rgt wrote there."""
        async def work() -> dict[str, Any]:
            t = calls.target(policy.check_host(host), policy.ssh_config)
            path = await blocking(lambda: reports.write(policy.project, t, run, out))
            return {"host": host, "run": run, "path": path,
                    "next": "open %s in a browser; the run's state: get_status(host=%s, run=%s)   (CLI: "
                            "rgt-client status %s --run %s)" % (path, summary.q(host), summary.q(run),
                                                                summary.q(host), summary.q(run))}
        return await answer(work, policy)


def pull_folder(policy: Policy, host: str, run: str, label: str | None) -> tuple[str, tuple[int, int]]:
    """DATA/mcp-pulls/PROJECT/HOST/RUN, or .../HOST/RUN-LABEL: always two levels down, so no pull's
    folder holds or lies inside another's (a pull into `local` once added a box's file to run
    r1's verified folder local/r1); made as real folders, never through a symlink, with the
    folder's identity (the pull refuses to write into any other folder at that path)."""
    name = plain_word(run)
    if label:
        name += "-" + plain_label(label, "pull label", "one plain word such as v2, added to the run's folder "
                                  "(%s/%s-v2), or leave dest out" % (plain_word(host), name))
    return policy.project.owned_dir_at(PULLS, [plain_word(host), name])


async def _verb(policy: Policy, verb: str, host: str, run: str) -> CallToolResult:
    async def work() -> dict[str, Any]:
        t = calls.target(policy.check_host(host), policy.ssh_config)
        cursor = await blocking(lambda: _cursor(t))
        _code, text = await blocking(lambda: calls.run_verb(t, verb, run))
        out = {"host": host, "run": run, "done": True, "text": block(text.strip(), policy, 2000),
               "next": "wait_for_change with cursor %s (CLI: %s)"
                       % (cursor or "(none)", summary.run_command("rgt-client watch %s %s", host, run))}
        if cursor:
            out["cursor"] = cursor
        return out
    return await answer(work, policy)


def _cursor(t: calls.Target) -> str | None:
    """The box's last event id now: a wait from it sees everything the next action causes."""
    try:
        return summary.last_event_id(calls.fetch_status(t, None, events=1))
    except calls.ClientError:
        return None


def _env_values(spec: dict[str, Any]) -> list[str]:
    envs = [spec.get("env")] + [s.get("env") for s in spec.get("stage") or [] if isinstance(s, dict)]
    return [v for e in envs if isinstance(e, dict) for v in e.values() if isinstance(v, str)]


def _progress_reporter(ctx: Context) -> Any:
    last = [0.0]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] < 1.0 and done < total:
            return
        last[0] = now
        try:
            anyio.from_thread.run(ctx.report_progress, float(done), float(total or 0) or None, "bytes pulled")
        except Exception:  # noqa: BLE001 - progress is a courtesy: the pull goes on without it
            pass
    return report


def submit_answer(out: dict[str, Any], notes: list[str], host: str, name: str, cursor: str | None,
                  policy: Policy) -> dict[str, Any]:
    res: dict[str, Any] = {"host": host, "run": name, "state": line(out.get("state") or "queued", policy, 20),
                           "duplicate": bool(out.get("duplicate")), "notes": lines(notes, policy, 5, 300),
                           "next": "wait_for_change with cursor %s   (CLI: %s)"
                                   % (cursor or "none", summary.run_command("rgt-client watch %s %s", host, name))}
    if isinstance(out.get("runs"), list):
        res["runs"] = [{"run": line(r.get("run"), policy, 80), "duplicate": bool(r.get("duplicate"))}
                       for r in out["runs"][:50] if isinstance(r, dict)]
    if cursor:
        res["cursor"] = cursor
    return res


def pull_answer(res: dict[str, Any], host: str, run: str, policy: Policy) -> dict[str, Any]:
    v = res.get("verify") or {}
    ok = bool(v.get("ok"))
    problems = [{"kind": line(p.get("kind"), policy, 40), "path": line(p.get("path"), policy, 300),
                 "detail": line(p.get("detail"), policy, 300)} for p in (v.get("problems") or [])[:PROBLEMS_SHOWN]]
    out = {"host": host, "run": run, "dest": res.get("dest"), "verified": ok, "files": v.get("files"),
           "bytes": v.get("bytes"), "problems": problems, "safe_to_tear_down": ok,
            "teardown": block(res.get("teardown_gate") or "", policy, 3000),
            "bytes_moved": res.get("bytes_moved"), "elapsed_s": res.get("elapsed_s"),
            "next": (summary.run_command("rgt-client report %s %s   (MCP: make_report); tearing down is the "
                                         "user's call", host, run) if ok else
                     summary.run_command("rgt-client pull %s %s   (MCP: pull_artifacts again); do NOT tear down",
                                         host, run))}
    not_made = v.get("symlinks_not_made") or []
    if not_made:
        # a pull through MCP makes no symlink (their targets stay in .rgt/manifest.json)
        out["symlinks_not_made"] = lines(not_made, policy, PROBLEMS_SHOWN, 300)
    return out
