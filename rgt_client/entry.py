"""The `rgt-client` console script. Kept apart from cli.py so that a `status` can start its ssh
calls (status/prefetch.py) before click and the command modules are imported."""
from __future__ import annotations

import sys


def main() -> None:
    from rgt_client.status import prefetch
    prefetch.start(sys.argv[1:])
    from rgt_client.cli import main as cli_main
    cli_main()
