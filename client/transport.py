"""The ssh transport seam: the system OpenSSH client (never a re-implementation), or `local`.

Every ssh call is bounded (BatchMode, ConnectTimeout, ServerAlive*) and every remote word is
shlex.quote'd. `local` runs the same agent commands on this machine without ssh.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

from rgt_client import exitcodes
from rgt_client.errors import ClientError

SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=15",
               "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3")
# The remote default home is expanded by the remote shell; it is our constant, never user text.
REMOTE_DEFAULT_HOME = '"${RGT_HOME:-$HOME/.rgt}"'


@dataclass
class Result:
    rc: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


@dataclass
class Target:
    host: str                       # ssh destination (alias, user@host) or "local"
    home: str | None = None         # RGT_HOME on the box; None = the box's default
    python: str = "python3"
    ssh_config: str | None = None
    extra_ssh: list[str] = field(default_factory=list)

    @property
    def is_local(self) -> bool:
        return self.host == "local"

    def home_expr(self) -> str:
        """The home as a remote shell word."""
        if self.home:
            return shlex.quote(self.home)
        return REMOTE_DEFAULT_HOME

    def local_home(self) -> str:
        return os.path.abspath(os.path.expanduser(self.home or os.environ.get("RGT_HOME") or "~/.rgt"))


def ssh_argv(target: Target, remote_command: str) -> list[str]:
    argv = ["ssh"]
    if target.ssh_config:
        argv += ["-F", target.ssh_config]
    argv += list(SSH_OPTIONS) + list(target.extra_ssh) + [target.host, "--", remote_command]
    return argv


def agent_command(target: Target, args: list[str]) -> str:
    """The remote shell line that runs the installed agent with quoted args."""
    words = " ".join(shlex.quote(a) for a in args)
    return "RGT_HOME=%s; export RGT_HOME; exec %s \"$RGT_HOME/rgt-agent.pyz\" %s" % (
        target.home_expr(), shlex.quote(target.python), words)


def run_remote(target: Target, remote_command: str, stdin: bytes | None = None,
               timeout: float | None = None) -> Result:
    """Run a shell line on the box (ssh) or here (local). rc 255 from ssh = unreachable."""
    if target.is_local:
        argv = ["/bin/sh", "-c", remote_command]
        env = dict(os.environ, RGT_HOME=target.local_home())
    else:
        argv, env = ssh_argv(target, remote_command), None
    try:
        proc = subprocess.run(argv, input=stdin if stdin is not None else b"", capture_output=True,
                              timeout=timeout, env=env)
    except FileNotFoundError as exc:
        raise ClientError("cannot run %s: %s" % (argv[0], exc.strerror),
                          "install the OpenSSH client (apt-get install openssh-client)")
    except subprocess.TimeoutExpired:
        raise ClientError("%s did not answer within %ds" % (target.host, timeout or 0),
                          "check the network, or raise the timeout", exitcodes.UNREACHABLE)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def run_agent(target: Target, args: list[str], stdin: bytes | None = None,
              timeout: float | None = None) -> Result:
    """Run `rgt-agent.pyz ARGS` on the box. Raises ClientError(UNREACHABLE) when ssh cannot connect."""
    if target.is_local:
        python = sys.executable if target.python == "python3" else target.python
        cmd = "exec %s \"$RGT_HOME/rgt-agent.pyz\" %s" % (
            shlex.quote(python), " ".join(shlex.quote(a) for a in args))
        return run_remote(target, cmd, stdin, timeout)
    res = run_remote(target, agent_command(target, args), stdin, timeout)
    if res.rc == 255:
        raise ClientError("cannot reach %s: %s" % (target.host, res.err.strip() or "ssh failed"),
                          "check `ssh %s true` works (host, key, ~/.ssh/config)" % target.host,
                          exitcodes.UNREACHABLE)
    return res
