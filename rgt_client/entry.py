"""The `rgt-client` console script. Kept apart from cli.py so that a `status` can start its ssh
calls (status/prefetch.py) before click and the command modules are imported."""
from __future__ import annotations

import sys


def main() -> None:
    from rgt_client.status import prefetch
    started = prefetch.start(sys.argv[1:])
    from rgt_client.cli import main as cli_main
    if not started:
        cli_main()
        return
    try:
        cli_main()
    except SystemExit as done:
        _exit_now(done)


def _exit_now(done: SystemExit) -> None:
    """End a `status` as soon as its answer is out: its output flushed and the atexit handlers run
    (a head start not taken is killed there), then the process ends without tearing down every
    module it imported: that teardown came after the answer, 8 ms of each status's wait.
    Anything unusual (an exit message, a thread still running, output that cannot be flushed)
    takes Python's own way out."""
    import atexit
    import os
    code = done.code
    if code is not None and not isinstance(code, int):
        raise done
    threading = sys.modules.get("threading")
    if threading is not None and any(t.is_alive() and not t.daemon and t is not threading.main_thread()
                                     for t in threading.enumerate()):
        raise done      # Python waits for such a thread; so must we
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        raise done
    atexit._run_exitfuncs()
    os._exit(code or 0)
