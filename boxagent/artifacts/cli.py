"""Subcommands of this concern (see boxagent/cli.py). Filled in by its issue."""
from __future__ import annotations


def register(sub) -> None:
    pass
