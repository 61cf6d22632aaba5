"""After a verified pull, tell the box: `rgt-agent pull-verified RUN --manifest-sha256 SHA`.

The box's idle warning then says the last run's results are safe off it, instead of asking for
a pull (docs/cost.md). One ssh call, best effort: a box that cannot be reached, or runs an agent
older than the command, costs a note on stderr, never a failed verify.
"""
from __future__ import annotations

import os
import re

from rgt_client.box import agentcall
from rgt_client.errors import ClientError
from rgt_client.textsafe import safe_line
from rgt_client.box.transport import Target
from rgt_client.pull.verify import VerifyResult

TIMEOUT_S = 30.0
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_RUN = re.compile(r"^[A-Za-z0-9._@+-]{1,200}$")


def record_on_box(target: Target, run: str, manifest_sha256: str, copy: VerifyResult | None = None) -> str | None:
    """None when the box recorded the verified pull (with where the copy is and how many files:
    status.json shows it as runs[].pull_verified); else a note saying why not."""
    if not (isinstance(run, str) and _RUN.match(run) and isinstance(manifest_sha256, str)
            and _SHA256.match(manifest_sha256)):
        return "the verified pull was not recorded on %s: no run name and manifest sha256 to record" % target.host
    args = ["pull-verified", run, "--manifest-sha256", manifest_sha256, "--json"]
    if copy is not None:
        args += ["--dest", os.path.abspath(copy.dest), "--files", str(int(copy.files)), "--bytes", str(int(copy.bytes))]
    try:
        ans = agentcall.call(target, args, timeout=TIMEOUT_S)
        if ans.rc == 2 and copy is not None and "unrecognized arguments" in (ans.stderr or ""):
            # an agent from before --dest/--files: the record without them
            ans = agentcall.call(target, args[:5], timeout=TIMEOUT_S)
    except ClientError as exc:
        return "the verified pull was not recorded on %s (its idle warning will still ask for a pull): %s" % (
            target.host, safe_line(exc.message))
    if ans.rc != 0:
        detail = ans.message or "exit %d" % ans.rc
        if "invalid choice" in (ans.message or ""):
            detail = "its agent is older than this client (rgt-client install %s)" % target.host
        return "the verified pull was not recorded on %s: %s" % (target.host, safe_line(detail))
    return None
