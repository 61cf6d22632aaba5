"""Agent subcommands of the cost concern.

    pull-verified RUN --manifest-sha256 SHA [--dest DIR --files N --bytes N] [--json]
        (for `rgt-client pull`/`verify`) the laptop verified a copy of RUN's manifest with this
        sha256 (in DIR on the laptop, N files): record it in runs/<run>/pull_verified.json, which
        status.json shows as runs[].pull_verified. The idle warning then says the
        results are safe off the box instead of asking for a pull. It counts only while the
        box's manifest still has that sha256 (a stage that rewrote the files needs a new pull).
"""
from __future__ import annotations

import json
import os
import re
import time
from typing import Any, Dict, Optional

from boxagent.base import names
from boxagent.base.errors import UsageError
from boxagent.base.fsutil import atomic_write_json
from boxagent.base.home import Home
from boxagent.base.units import iso_utc

SCHEMA = "rgt.pullverified/1"
_RUN_NAME = re.compile(r"^[A-Za-z0-9._@+-]{1,200}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
MAX_DEST = 1024


def register(sub: Any) -> None:
    p = sub.add_parser("pull-verified", help="(internal, for rgt-client verify) record a verified pull of a run")
    p.add_argument("run", type=names.argtype("run"))
    p.add_argument("--manifest-sha256", required=True, metavar="SHA", help="sha256 of the manifest verified")
    p.add_argument("--dest", default=None, help="where the verified copy is, on the laptop")
    p.add_argument("--files", type=int, default=None)
    p.add_argument("--bytes", type=int, default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_pull_verified)


def record(home: Home, run: str, sha: str, now: float, dest: Optional[str] = None, files: Optional[int] = None,
           nbytes: Optional[int] = None) -> Dict[str, Any]:
    """Write runs/<run>/pull_verified.json; UsageError for a bad run name, an unknown run or a
    sha256 that is not one."""
    if not _RUN_NAME.match(run) or run in (".", ".."):
        raise UsageError("%r is not a run name" % run, "list runs with `rgt-agent status`")
    if not os.path.isdir(home.run_dir(run)):
        raise UsageError("no run %r in %s" % (run, home.runs), "list runs with `rgt-agent status`")
    sha = sha.strip().lower()
    if not _SHA256.match(sha):
        raise UsageError("--manifest-sha256: expected 64 hex digits, got %r" % sha[:80],
                         "pass the sha256 `rgt-client verify` printed for the manifest")
    from boxagent.artifacts.manifest import summary
    current = summary(home, run).get("sha256")
    body = {"schema": SCHEMA, "run": run, "manifest_sha256": sha, "verified_at": iso_utc(now),
            "matches_box_manifest": current == sha}
    if dest:
        body["dest"] = dest[:MAX_DEST]
    for key, n in (("files", files), ("bytes", nbytes)):
        if isinstance(n, int) and n >= 0:
            body[key] = n
    atomic_write_json(home.pull_verified(run), body, mode=0o600)
    return body


def cmd_pull_verified(args: Any) -> int:
    home = Home.from_env(getattr(args, "home", None))
    body = record(home, args.run, args.manifest_sha256, time.time(), args.dest, args.files, args.bytes)
    if args.json:
        print(json.dumps(body))
    elif body["matches_box_manifest"]:
        print("recorded: run %s pulled and verified (manifest %s)" % (args.run, body["manifest_sha256"][:12]))
    else:
        print("recorded, but the box's manifest of run %s is no longer the one verified: pull again"
              % args.run)
    return 0
