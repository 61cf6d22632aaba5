"""`rgt-client pull HOST RUN [DEST]` and `rgt-client verify DEST`: thin click commands over
rgt_client.pull.transfer / rgt_client.pull.verify, plus the teardown gate both end with.

Exit codes: 0 verified; 4 the copy does not match the manifest; 5 the host is unreachable
(or the connection broke off: run the same pull again, it resumes); 2 bad input; 1 other errors.

Everything printed here that came from the box (paths, symlink targets, skip reasons, warnings,
the profile's teardown text) goes through textsafe first; `--json` stays exact.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from collections import Counter
from typing import Any, Dict, Optional

import click

from boxagent.api import format_bytes
from rgt_client import exitcodes
from rgt_client.box import transport
from rgt_client.errors import ClientError
from rgt_client.pull.destdir import Blocked, Dest
from rgt_client.pull.transfer import METHODS, PullInfo, default_dest, pull
from rgt_client.pull.mark import record_on_box
from rgt_client.textsafe import safe, safe_line
from rgt_client.pull.verify import META_DIR, VerifyResult, verify

MAX_LISTED = 50
_LABEL = {"missing": "MISSING", "extra": "EXTRA", "size": "SIZE", "sha256": "CHANGED", "symlink": "SYMLINK",
          "type": "TYPE", "unreadable": "UNREADABLE", "load": "NO-LOAD", "empty": "EMPTY"}


class ProgressBar:
    """A bytes bar on stderr, only on a terminal, at most 10 redraws a second."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.t0 = time.monotonic()
        self.last = 0.0
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.1 and done < total):
            return
        self.last = now
        frac = done / total if total else 1.0
        rate = done / max(now - self.t0, 1e-3)
        bar = "#" * int(frac * 30)
        sys.stderr.write("\r[%-30s] %3d%% %s / %s  %s/s " % (bar, frac * 100, format_bytes(done),
                                                            format_bytes(total), format_bytes(rate)))
        sys.stderr.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")


def render_verify(res: VerifyResult) -> str:
    links = ", %d symlinks" % res.symlinks if res.symlinks else ""
    if res.ok:
        lines = ["OK %d/%d files, %s%s" % (res.checked, res.files, format_bytes(res.bytes), links)]
    else:
        lines = ["  %-10s %s  (%s)" % (_LABEL.get(p.kind, p.kind.upper()), safe_line(p.path), safe_line(p.detail))
                 for p in res.problems[:MAX_LISTED]]
        if len(res.problems) > MAX_LISTED:
            lines.append("  ... and %d more (--json lists them all)" % (len(res.problems) - MAX_LISTED))
        kinds = Counter(p.kind for p in res.problems)
        lines.append("FAILED %d problem(s) (%s) against %d files, %s%s" % (
            len(res.problems), ", ".join("%d %s" % (n, k) for k, n in sorted(kinds.items())),
            res.files, format_bytes(res.bytes), links))
    for x in res.loads:
        if x["ok"] is not False:
            lines.append("  load %s: %s" % (safe_line(x["path"]), safe_line(x["detail"])))
    return "\n".join(lines)


def _profile(facts: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The host's profile: this machine's copy by name (validated), else the box's own copy,
    else the conservative generic one."""
    facts = facts or {}
    from rgt_client.profiles import catalog
    name = facts.get("name")
    # only a plain shipped name: a box must not make us open a local file path
    if isinstance(name, str) and re.match(r"^[A-Za-z0-9_-]{1,64}$", name):
        try:
            return catalog.load_profile(name)
        except ClientError:
            pass
    if facts.get("teardown") and _facts_ok(facts):
        return dict(facts, platform=facts.get("platform") or name or "this box")
    try:
        return catalog.load_profile(catalog.FALLBACK)
    except ClientError:
        return None


def _facts_ok(facts: Dict[str, Any]) -> bool:
    """The box's own teardown facts, used only when shaped like a profile's (a compromised box
    must not crash the gate, nor feed it whatever it likes); its text is sanitised anyway."""
    from rgt_client.profiles.schema import validate
    try:
        validate({"platform": "box", "kind": "ssh-rental", "verified": False,
                  "teardown": facts.get("teardown"), "danger_clock": facts.get("danger_clock") or []})
    except ClientError:
        return False
    return isinstance(facts.get("platform", ""), str)


def gate_text(facts: Optional[Dict[str, Any]], verified: bool, why: Optional[str] = None) -> str:
    """The teardown gate. rgt itself never stops, releases or destroys an instance."""
    prof = _profile(facts)
    from rgt_client.profiles.catalog import teardown_gate
    text = teardown_gate(prof, verified, why) if prof else ""
    if not verified and "NOT safe" not in text:
        text = ("NOT safe to tear down: %s.\n" % (why or "the pull is not verified")) + text
    elif verified and not text:
        text = ("Safe to tear down: the local copy matches the box's manifest. Check your "
                "platform's stop vs destroy verbs; rgt never stops, releases or destroys anything.")
    return safe(text.rstrip())


def _why(res: VerifyResult) -> str:
    kinds = Counter(p.kind for p in res.problems)
    return "the local copy does not match the manifest (%s)" % ", ".join(
        "%d %s" % (n, k) for k, n in sorted(kinds.items()))


def _pull_facts(dest: str) -> Dict[str, Any]:
    try:
        with Dest(dest) as d:
            facts = json.loads(d.read(META_DIR + "/pull.json", 1 << 20).decode("utf-8"))
    except (OSError, ValueError, Blocked):
        return {}
    return facts if isinstance(facts, dict) else {}


def _target(ctx: click.Context, host: str, home: Optional[str], python: Optional[str]) -> transport.Target:
    ssh_config = (ctx.obj or {}).get("ssh_config")
    from rgt_client.box.hosts import target_for
    return target_for(host, ssh_config=ssh_config, home=home, python=python)


def _announce(info: PullInfo, how: str, dest: str, run: str, host: str) -> None:
    m = info.manifest
    click.echo("pull %s from %s: %d files, %s (manifest %s…) via %s -> %s" % (
        run, host, len(m["files"]), format_bytes(sum(f["bytes"] for f in m["files"])),
        info.head["manifest_sha256"][:12], how, dest), err=True)
    if info.where:
        click.echo("  the files and their manifest: %s" % info.where, err=True)
    state = info.head.get("run_state")
    if state not in (None, "succeeded"):
        click.echo("  note: run %s is %s on the box; these are its files as they are now"
                   % (run, safe_line(state)), err=True)
    for s in (m.get("symlinks") or [])[:5]:
        click.echo("  symlink recorded, not followed: %s -> %s" % (safe_line(s["path"]), safe_line(s["target"])),
                   err=True)
    for s in (m.get("skipped") or [])[:5]:
        s = s if isinstance(s, dict) else {"path": s}
        click.echo("  skipped on the box: %s (%s)" % (safe_line(str(s.get("path"))),
                                                     safe_line(str(s.get("reason")))), err=True)
    for w in (m.get("warnings") or [])[:5]:
        click.echo("  warning: %s" % safe_line(w), err=True)


@click.command("pull")
@click.argument("host")
@click.argument("run")
@click.argument("dest", required=False)
@click.option("--force", is_flag=True, help="Take the files even while the stage writing them runs.")
@click.option("--method", type=click.Choice(METHODS), default="auto", show_default=True,
              help="rsync (both ends need it) or the agent's own ssh stream.")
@click.option("--bwlimit", type=click.IntRange(min=1), default=None, metavar="KBPS",
              help="Cap the transfer at KBPS KiB/s.")
@click.option("--check-load", is_flag=True, help="Also open .pt/.pth/.safetensors with torch/safetensors.")
@click.option("--keep-mode", is_flag=True, help="Keep the box's executable bits (rsync path); by default "
                                                "no pulled file is executable.")
@click.option("--home", default=None, help="RGT_HOME on the box (default: what install used).")
@click.option("--python", default=None, help="Python on the box (default: what install used).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def pull_command(ctx: click.Context, host: str, run: str, dest: Optional[str], force: bool, method: str,
                 bwlimit: Optional[int], check_load: bool, keep_mode: bool, home: Optional[str],
                 python: Optional[str], as_json: bool) -> None:
    """Copy RUN's manifest files from HOST into DEST, resuming any earlier partial pull, then
    verify them. Without DEST: rgt's own data folder for this project, outside it
    ($RGT_DATA_HOME, else ~/.local/share/rgt: pulls/PROJECT/HOST/RUN), where none of the
    project's test runners finds the box's files; the pull prints the folder. Nothing is ever deleted, here or on the box;
    no file is replaced that an earlier pull of this run did not write, no hidden path is
    written, and no file is executable unless --keep-mode."""
    target = _target(ctx, host, home, python)
    bar = ProgressBar(sys.stderr.isatty() and not as_json)
    dest_shown = dest or default_dest(host, run)
    announce = None if as_json else (lambda info, how: _announce(info, how, dest_shown, run, host))
    try:
        res = pull(target, run, dest, force=force, method=method, bwlimit_kbps=bwlimit, progress=bar,
                   check_load=check_load, on_info=announce, keep_mode=keep_mode)
    except ClientError as exc:
        bar.close()
        if exc.code != exitcodes.USAGE:     # a run that is not there has nothing to tear down after
            click.echo(gate_text(_pull_facts(os.path.abspath(dest_shown)), False, exc.message), err=True)
        raise
    bar.close()
    facts = res.info.head.get("profile") or {}
    gate = gate_text(facts, res.verify.ok, None if res.verify.ok else _why(res.verify))
    # the box already knows of this verified manifest (its pull-info said so): no second round trip
    known = res.verify.ok and res.info.head.get("pull_verified_sha256") == res.verify.manifest_sha256
    note = record_on_box(target, run, res.verify.manifest_sha256, res.verify) if res.verify.ok and not known else None
    if note:
        click.echo("note: %s" % note, err=True)
    if as_json:
        click.echo(json.dumps({"dest": res.dest, "method": res.method, "bytes_moved": res.bytes_moved, "where": res.info.where,
                               "elapsed_s": round(res.elapsed_s, 3), "verify": res.verify.as_dict(),
                               "safe_to_tear_down": res.verify.ok, "teardown_gate": gate,
                               "recorded_on_box": res.verify.ok and note is None}, indent=1))
    else:
        click.echo("moved %s in %.1fs" % (format_bytes(res.bytes_moved), res.elapsed_s), err=True)
        click.echo("files in %s" % res.dest, err=True)
        click.echo(render_verify(res.verify) + (" (verified %s)" % res.info.where if res.verify.ok and res.info.where else ""))
        click.echo(gate)
    ctx.exit(exitcodes.OK if res.verify.ok else exitcodes.RUN_FAILED)


@click.command("verify")
@click.argument("dest", type=click.Path(file_okay=False))
@click.argument("more", nargs=-1, metavar="")
@click.option("--manifest", "manifest", type=click.Path(dir_okay=False), default=None,
              help="The manifest to check against (default DEST/.rgt/manifest.json).")
@click.option("--check-load", is_flag=True, help="Also open .pt/.pth/.safetensors with torch/safetensors.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def verify_command(ctx: click.Context, dest: str, manifest: Optional[str], check_load: bool,
                   as_json: bool, more: tuple = ()) -> None:
    """Check DEST against the run's manifest: missing and extra files, sizes, sha256. Writes
    DEST/PULL_VERIFIED.json only when everything matches."""
    if more:        # `verify HOST RUN`, as pull is called: say which folder that pull wrote
        raise ClientError("verify takes the folder a pull wrote, not HOST RUN",
                          "rgt-client verify %s" % shlex.quote(default_dest(dest, more[0])), exitcodes.USAGE)
    res = verify(dest, manifest, check_load=check_load)
    facts = _pull_facts(os.path.abspath(dest))
    gate = gate_text(facts.get("profile"), res.ok, None if res.ok else _why(res))
    recorded = False
    if res.ok and isinstance(facts.get("host"), str) and facts["host"]:
        # the box learns of the verified copy (its idle warning stops asking for a pull)
        note = record_on_box(_target(ctx, facts["host"], None, None), str(facts.get("run")), res.manifest_sha256, res)
        recorded = note is None
        if note:
            click.echo("note: %s" % note, err=True)
    if as_json:
        click.echo(json.dumps(dict(res.as_dict(), safe_to_tear_down=res.ok, teardown_gate=gate,
                                   recorded_on_box=recorded), indent=1))
    else:
        click.echo(render_verify(res))
        click.echo(gate)
    ctx.exit(exitcodes.OK if res.ok else exitcodes.RUN_FAILED)


COMMANDS: list = [pull_command, verify_command]
