"""Fixtures for the profiles tests: the real `rgt-client` group in-process."""
from __future__ import annotations

import pytest

from tests.clirunner import Cli


@pytest.fixture
def cli() -> Cli:
    return Cli()


@pytest.fixture
def write_profile(tmp_path):
    """write_profile(text, name="mine") -> path of a user profile file."""
    def write(text: str, name: str = "mine") -> str:
        path = tmp_path / (name + ".toml")
        path.write_text(text, encoding="utf-8")
        return str(path)
    return write
