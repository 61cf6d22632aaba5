"""Fixtures for the profiles tests: a CLI runner over the real `rgt-client` group."""
from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from rgt_client.errors import ClientError


def _fallback_group() -> click.Group:
    """The profiles commands under a group that handles ClientError like rgt_client.cli does,
    used only while the full CLI cannot be imported (other areas mid-change)."""
    from rgt_client.profiles_cmd import COMMANDS

    class _G(click.Group):
        def invoke(self, ctx):  # type: ignore[override]
            try:
                return super().invoke(ctx)
            except ClientError as exc:
                click.echo("Error: %s" % exc.message, err=True)
                if exc.hint:
                    click.echo("Hint: %s" % exc.hint, err=True)
                ctx.exit(exc.code)

    group = _G("rgt-client")
    for cmd in COMMANDS:
        group.add_command(cmd)
    return group


@pytest.fixture
def cli():
    try:
        from rgt_client.cli import cli as group
    except Exception:  # noqa: BLE001 - see _fallback_group
        group = _fallback_group()
    runner = CliRunner(mix_stderr=False) if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else CliRunner()

    def invoke(*args: str):
        return runner.invoke(group, list(args), obj={})
    return invoke


@pytest.fixture
def write_profile(tmp_path):
    """write_profile(text, name="mine") -> path of a user profile file."""
    def write(text: str, name: str = "mine") -> str:
        path = tmp_path / (name + ".toml")
        path.write_text(text, encoding="utf-8")
        return str(path)
    return write
