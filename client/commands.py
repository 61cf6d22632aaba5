"""Commands of this concern (see client/cli.py). Filled in by its issue."""
from __future__ import annotations

COMMANDS: list = []
