"""rgt-client in-process (CliRunner) for tests: exit code, stdout and stderr apart, and a
traceback is a test failure (users must never see one)."""
from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from rgt_client.cli import cli


class Cli:
    def __init__(self, ssh_config: Path | None = None):
        self.ssh_config = ssh_config

    def __call__(self, *args: str, env: dict | None = None, input: str | None = None):
        pre = ["--ssh-config", str(self.ssh_config)] if self.ssh_config else []
        res = CliRunner().invoke(cli, pre + list(args), obj={}, env=env, input=input, catch_exceptions=True)
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise AssertionError("traceback from rgt-client %s: %r\n%s" % (args, res.exception, res.output))
        return res
