"""Core subcommands (issue 2). Filled in by the core work."""
from __future__ import annotations


def register(sub) -> None:
    pass
