"""Agent subcommands of the artifacts concern.

    manifest RUN [--json] [--force]   build/refresh runs/<run>/manifest.json, print a summary
    pull-info RUN [--force] [--on-node]
                                      (for `rgt-client pull`) one header line, then the manifest;
                                      --on-node: this box is the Ray node the run's files are on
    pull-where RUN                    (for `rgt-client pull`) JSON: where the run's files live
                                      (this box, a shared filesystem, or one Ray node: which)
    pull-stream RUN                   (for `rgt-client pull` without rsync) stdin wants, stdout bytes

pull-info answers everything pull needs in one ssh round trip: does this box have rsync, the
manifest's exact bytes (their sha256 is what the laptop records as verified), the run state
and the profile's teardown facts for the gate.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, Optional

from boxagent.base import names
from boxagent.artifacts import stream
from boxagent.artifacts.where import where
from boxagent.artifacts.manifest import artifact_spec, build_manifest, summary
from boxagent.base.errors import UsageError
from boxagent.base.fsutil import read_json
from boxagent.base.home import Home
from boxagent.base.units import format_bytes

_RUN_NAME = re.compile(r"^[A-Za-z0-9._@+-]{1,200}$")


def register(sub) -> None:
    p = sub.add_parser("manifest", help="build or refresh a run's artifact manifest")
    p.add_argument("run", type=names.argtype("run"))
    p.add_argument("--json", action="store_true", help="print the manifest itself")
    p.add_argument("--force", action="store_true", help="even while the writing stage runs")
    p.add_argument("--workers", type=int, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_manifest)
    p = sub.add_parser("pull-info", help="(internal, for rgt-client pull) manifest + capabilities")
    p.add_argument("run", type=names.argtype("run"))
    p.add_argument("--force", action="store_true")
    p.add_argument("--on-node", action="store_true", help="this box is the Ray node the files are on")
    p.set_defaults(func=cmd_pull_info)
    p = sub.add_parser("pull-where", help="(internal, for rgt-client pull) where a run's files live")
    p.add_argument("run", type=names.argtype("run"))
    p.set_defaults(func=cmd_pull_where)
    p = sub.add_parser("pull-stream", help="(internal, for rgt-client pull) stream manifest files")
    p.add_argument("run", type=names.argtype("run"))
    p.set_defaults(func=cmd_pull_stream)


def _home(args) -> Home:
    return Home.from_env(getattr(args, "home", None))


def load_run_spec(home: Home, run: str) -> Dict[str, Any]:
    if not _RUN_NAME.match(run) or run in (".", ".."):
        raise UsageError("%r is not a run name" % run, "list runs with `rgt-agent status`")
    spec = read_json(home.run_spec(run), None)
    if not isinstance(spec, dict):
        raise UsageError("no run %r in %s" % (run, home.runs), "list runs with `rgt-agent status`")
    spec.setdefault("name", run)
    artifact_spec(spec)  # a run without [artifacts] is named here, with the fix
    return spec


def cmd_manifest(args) -> int:
    home = _home(args)
    spec = load_run_spec(home, args.run)
    t0 = time.monotonic()
    m = build_manifest(home, args.run, spec, force=args.force, workers=args.workers)
    took = time.monotonic() - t0
    if args.json:
        with open(home.manifest(args.run), "rb") as fh:
            sys.stdout.buffer.write(fh.read())
        return 0
    s = summary(home, args.run)
    t = m["totals"]
    print("manifest %s: %d files, %s, %d symlinks, %d skipped (hashed %d in %.2fs)"
          % (args.run, t["files"], format_bytes(t["bytes"]), t["symlinks"], t["skipped"], m["hashed"], took))
    print("  %s  sha256 %s" % (home.manifest(args.run), s["sha256"]))
    for w in m["warnings"]:
        print("  warning: %s" % w)
    for sk in m["skipped"][:20]:
        print("  skipped: %s (%s)" % (sk["path"], sk["reason"]))
    return 0


def _profile_facts(home: Home) -> Dict[str, Any]:
    """The profile the box was installed with: its name and the teardown facts the gate needs."""
    cfg = read_json(home.config, {}) or {}
    prof = cfg.get("profile") if isinstance(cfg, dict) else None
    status = read_json(home.status, {}) or {}
    prof = prof if isinstance(prof, dict) else {}
    name = prof.get("name") or (status.get("profile") if isinstance(status, dict) else None)
    return {"name": name, "teardown": prof.get("teardown"), "danger_clock": prof.get("danger_clock")}


def _run_state(home: Home, run: str) -> Any:
    state = read_json(home.run_state(run), {}) or {}
    return state.get("state") if isinstance(state, dict) else None


def rsync_version(path: Optional[str]) -> Optional[str]:
    """"3.2.7" from `rsync --version`; None when there is no working rsync."""
    if not path:
        return None
    try:
        out = subprocess.run([path, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             timeout=10).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"version\s+(\d+\.\d+(?:\.\d+)?)", out)
    return m.group(1) if m else None


def cmd_pull_where(args) -> int:
    home = _home(args)
    spec = load_run_spec(home, args.run)
    print(json.dumps(where(home, args.run, spec, artifact_spec(spec)[3]), sort_keys=True))
    return 0


def cmd_pull_info(args) -> int:
    home = _home(args)
    spec = load_run_spec(home, args.run)
    at = where(home, args.run, spec, artifact_spec(spec)[3])
    if at["files"] == "node" and not args.on_node:
        # What this box sees at the workdir's path is another disk (or nothing): a manifest of it
        # would "verify" the wrong files.
        raise UsageError("run %s's files are on the Ray node that ran it (%s), not here"
                         % (args.run, at.get("ssh_host") or at.get("host") or at.get("node") or "not placed yet"),
                         "rgt-client pull fetches them from that node's agent (its ssh host, where `rgt-client "
                         "ray up` formed the cluster)")
    m = build_manifest(home, args.run, spec, force=args.force)
    with open(home.manifest(args.run), "rb") as fh:
        raw = fh.read()
    rsync = shutil.which("rsync")
    head = {"schema": "rgt.pullinfo/1", "run": args.run, "root": m["root"],
            "rsync": rsync, "rsync_version": rsync_version(rsync), "manifest_bytes": len(raw),
            "manifest_sha256": hashlib.sha256(raw).hexdigest(), "run_state": _run_state(home, args.run),
            "profile": _profile_facts(home), "host": os.uname()[1],
            "pull_verified_sha256": _verified_sha(home, args.run), "where": at}
    out = sys.stdout.buffer
    out.write((json.dumps(head, ensure_ascii=False) + "\n").encode("utf-8"))
    out.write(raw)
    out.flush()
    return 0


def _verified_sha(home, run: str) -> Optional[str]:
    """The manifest sha256 of the last verified pull recorded here: a re-pull of an unchanged
    run then skips recording it again (one round trip less on a far link)."""
    body = read_json(home.pull_verified(run), None)
    sha = body.get("manifest_sha256") if isinstance(body, dict) else None
    return sha if isinstance(sha, str) else None


def cmd_pull_stream(args) -> int:
    home = _home(args)
    load_run_spec(home, args.run)
    m = read_json(home.manifest(args.run), None)
    if not isinstance(m, dict) or not isinstance(m.get("files"), list):
        raise UsageError("run %s has no manifest yet" % args.run, "run `rgt-agent manifest %s`" % args.run)
    allowed = {f["path"] for f in m["files"] if isinstance(f, dict) and isinstance(f.get("path"), str)}
    try:
        reqs = stream.read_requests(sys.stdin.buffer)
    except ValueError:
        raise UsageError("pull-stream wants a JSON list of {path, offset} on stdin")
    stream.serve(m.get("root") or "", allowed, reqs, stream.stdout_binary())
    return 0
