"""The MCP server's one seam into the client: every client function a tool uses is imported
here, and only here, so the tools read like the click commands they mirror and a move of the
client's modules changes this file alone.

Each function is the plain function a click command calls (status fetch, submit, cancel, resume,
logs, pull + verify, report, profiles, install), returning data, raising ClientError.
"""
from __future__ import annotations

import os
import re
import tempfile
from typing import Any, Callable

from rgt_client import exitcodes
from rgt_client.box import agentcall
from rgt_client.jobs import jobfile
from rgt_client.status import fetch as ops
from rgt_client.status import statusdata
from rgt_client.errors import ClientError
from rgt_client.status.eventwait import BOX_SCRIPT as WAIT_SCRIPT, MARK as WAIT_MARK, MAX_EVENTS as WAIT_MAX_EVENTS
from rgt_client.status.eventwait import box_wait as event_wait
from rgt_client.box.hosts import target_for
from rgt_client.textsafe import safe, safe_line
from rgt_client.box.transport import Target, run_python

__all__ = ["ClientError", "Target", "exitcodes", "safe", "safe_line", "target", "fetch_status",
           "submit", "run_verb", "agent_logs", "load_job", "pull_and_verify", "render_report",
           "explain_profile", "install_agent", "box_script", "find_run", "validate_status",
           "event_wait", "WAIT_SCRIPT", "WAIT_MARK", "WAIT_MAX_EVENTS"]

LOGS_MAX = 4 << 20        # read_logs asks for at most a few thousand lines of at most 16 KiB


def target(host: str, ssh_config: str | None) -> Target:
    return target_for(host, ssh_config)


def fetch_status(t: Target, run: str | None = None, events: int = 1) -> dict[str, Any]:
    """The box's validated status (one agent call), or ClientError."""
    hs = ops.fetch_status(t, events, run)
    if hs.error is not None:
        raise hs.error
    return hs.status or {}


def validate_status(doc: Any, host: str) -> dict[str, Any]:
    """A status document read some other way than fetch_status, checked the same way."""
    return statusdata.validate(doc, host)


def find_run(status: dict[str, Any], name: str) -> dict[str, Any] | None:
    return statusdata.find_run(status, name)


def submit(t: Target, job: dict[str, Any], replace: bool = False) -> tuple[dict[str, Any], list[str]]:
    from rgt_client.jobs.submit import submit
    return submit(t, job, replace=replace)


def run_verb(t: Target, verb: str, run: str) -> tuple[int, str]:
    """`cancel RUN` / `resume RUN` on the box: (client exit code, the agent's text in the client's
    words); a refusal is the agent's ClientError."""
    ans = ops.run_command(t, [verb, run], run, verb)
    if ans.rc != 0:
        raise ans.error(verb)
    return ans.code, agentcall.client_hint(ans.text, t.host)


def agent_logs(t: Target, run: str, stage: str | None, lines: int) -> bytes:
    """The agent's `logs RUN -n N [--stage S]`: its line rule (a bar's redraws are one line)."""
    args = ["logs", run, "-n", str(lines)] + (["--stage", stage] if stage else [])
    ans = ops.run_command(t, args, run, "logs", timeout=120.0, max_out=LOGS_MAX)
    if ans.rc != 0:
        raise ans.error("logs")
    return ans.stdout


def load_job(job: str, project: Any) -> dict[str, Any]:
    """A job given as TOML text, or as the path of a .toml file inside the project (one line
    without `=` that looks like a path: no TOML job is that). A file is read by the project's rules (localfs.py) and
    never quoted back in an error."""
    text = job.strip()
    if "\n" not in text and "=" not in text and ("/" in text or text.endswith((".toml", ".json"))
                                               or text.startswith(("~", "."))):
        return jobfile.load_quietly(project.read_job(text), "job file %s" % safe_line(text)[:200])
    with tempfile.TemporaryDirectory(prefix="rgt-mcp-") as d:
        path = os.path.join(d, "job.toml")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(job)
        try:
            return jobfile.load_job(path)
        except ClientError as exc:
            raise ClientError(exc.message.replace(path, "job"), exc.hint, exc.code) from None


def pull_and_verify(t: Target, run: str, dest: str | None,
                    progress: Callable[[int, int], None], ident: tuple[int, int] | None = None) -> dict[str, Any]:
    """`pull` then its verify and teardown gate, as `pull --json` prints them."""
    from rgt_client.pull.transfer import pull
    from rgt_client.pull.cmd import _why, gate_text
    from rgt_client.pull.mark import record_on_box
    res = pull(t, run, dest, progress=progress, make_links=False, expect_dir=ident)
    gate = gate_text(res.info.head.get("profile") or {}, res.verify.ok,
                     None if res.verify.ok else _why(res.verify))
    note = record_on_box(t, run, res.verify.manifest_sha256) if res.verify.ok else None
    return {"dest": res.dest, "method": res.method, "bytes_moved": res.bytes_moved, "where": res.info.where,
            "elapsed_s": round(res.elapsed_s, 3), "verify": res.verify.as_dict(),
            "teardown_gate": gate, "recorded_on_box": res.verify.ok and note is None}


def not_pulled_gate(dest: str, why: str) -> str:
    """The gate `pull` prints when the pull itself failed."""
    from rgt_client.pull.cmd import _pull_facts, gate_text
    return gate_text(_pull_facts(os.path.abspath(dest)), False, why)


def render_report(t: Target, run: str) -> str:
    """The run's one-file HTML report, as `report` renders it (not written anywhere)."""
    from rgt_client.report.cmd import fetch
    from rgt_client.report.page import render
    return render(fetch(t, run), None)


PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def explain_profile(name: str) -> dict[str, Any]:
    """A shipped profile by name (never a file: the name comes from a model), validated, and
    `install`'s first-contact text."""
    from rgt_client.profiles.catalog import checkpoint_advice, first_contact, list_profiles, load_profile
    if name == "list":
        return {"profiles": list_profiles()}
    if not PROFILE_NAME.match(name) or name not in list_profiles():
        raise ClientError("no shipped platform profile named %s" % safe_line(name)[:80],
                          "explain_platform(profile=\"list\") names them", exitcodes.USAGE)
    p = load_profile(name)
    return {"profile": p, "text": first_contact(p), "checkpoints": checkpoint_advice(p)}


def install_agent(t: Target, price: str | None, notify_file: str | None, project: Any,
                  learn: Callable[[str], None] = lambda secret: None) -> dict[str, Any]:
    """`install`; a notify file only from inside the project (it is read here and its secrets go
    to the box), never quoted back in an error. `learn` is handed every secret of the notify file
    before the box sees it: a box that echoes a Telegram bot token it was given (no token shape
    of ours) once put it in read_logs' answer."""
    from boxagent.api import notify_secret_strings
    from rgt_client.cost.flags import cost_patch
    from rgt_client.install.bootstrap import InstallOptions, install
    patch = cost_patch(price=price)
    notify = None
    if notify_file is not None:
        # read once, by the project's checks; parsed from those bytes, never opened again by path
        real, raw = project.open_toml(notify_file, "notify file", "name a notify .toml file inside "
                                      "the project (not hidden), or install from a shell")
        notify = _load_notify_quietly(real, raw, "notify file %s" % safe_line(notify_file)[:200])
        for secret in notify_secret_strings(notify.get("notify") or []):
            learn(secret)
    rep = install(t, InstallOptions(notify=notify, cost=patch))
    return {"sha256": rep.sha256, "profile": rep.profile.get("name"), "profile_reason": rep.profile_reason,
            "warnings": list(rep.warnings), "start": rep.start, "upload_s": round(rep.upload_s, 3),
            "start_s": round(rep.start_s, 3)}


def _load_notify_quietly(real: str, raw: bytes, origin: str) -> dict[str, Any]:
    """A notify file parsed for the model: an error names the file as the model did (not the
    user's home path) and shows its structure only (quieterr.py), never a value of it."""
    from boxagent.api import notify_key_names
    from rgt_client.jobs.quieterr import quiet
    from rgt_client.notify.cmd import load_notify_file
    try:
        return load_notify_file(real, raw)
    except ClientError as exc:
        keys = frozenset(notify_key_names())
        raise ClientError(quiet(exc.message.replace(real, origin), origin, keys),
                          quiet((exc.hint or "").replace(real, origin), origin, keys), exc.code) from None


def box_script(t: Target, script: str, args: list[str], timeout: float, max_out: int) -> bytes:
    """A small stdlib script run by the box's python (the transport's own wrapper); its stdout."""
    res = run_python(t, script, args, timeout=timeout, max_out=max_out)
    if res.rc != 0:
        raise ClientError("a box-side read on %s failed: %s" % (t.host, safe_line(res.err.strip()[-300:])),
                          "check the agent: rgt-client status %s" % t.host)
    return res.stdout
