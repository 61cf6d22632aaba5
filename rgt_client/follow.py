"""`logs --follow`: ONE ssh connection; a box-side script (remote_scripts.FOLLOW) streams each
stage's new log bytes as the chain moves on and ends with the run (or the --max-wait bound)."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import Callable

from rgt_client import exitcodes
from rgt_client.ops import fetch_status, unknown_run
from rgt_client.remote_scripts import FOLLOW, parse_result
from rgt_client.transport import Result, Target, check_reach, python_command, spawn

POLL_S = 0.5


def follow(target: Target, run: str, stage: str, lines: int, max_wait_s: float,
           say: Callable[[str], None]) -> int:
    """Stream to stdout; 0 when the run succeeded, 4 when it did not, 6 when --max-wait passed."""
    cmd = python_command(target, FOLLOW, [run, stage, str(lines), str(max_wait_s), str(POLL_S)], need_agent=True)
    # stderr to a file, not a pipe: nothing the box says there can ever block the log stream
    with tempfile.TemporaryFile() as errf:
        proc = spawn(target, cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errf)
        assert proc.stdout is not None
        while True:
            chunk = os.read(proc.stdout.fileno(), 65536)   # chunks, not lines: tqdm's \r passes
            if not chunk:
                break
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
        rc = proc.wait()
        errf.seek(0)
        stderr = errf.read()
    check_reach(target, Result(rc, b"", stderr))
    result = parse_result(stderr.decode("utf-8", "replace"), "logs --follow on %s" % target.host)
    if result.get("error"):
        raise unknown_run(target, run, fetch_status(target, events=0).status)
    state = result.get("state")
    if result.get("gave_up"):
        say("gave up following after --max-wait; run %s is %s (it keeps going on the box)" % (run, state))
        return exitcodes.GAVE_UP
    say("run %s %s" % (run, state))
    return exitcodes.OK if state == "succeeded" else exitcodes.RUN_FAILED
