"""The ssh transport seam: the system OpenSSH client (never a re-implementation), or `local`.

Every ssh call is bounded (BatchMode, ConnectTimeout, ServerAlive*) and every remote word is
shlex.quote'd. `local` runs the same agent commands on this machine without ssh.
"""
from __future__ import annotations

import base64
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field

from rgt_client import exitcodes
from rgt_client.errors import ClientError

SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=15",
               "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3")
# The remote default home is expanded by the remote shell; it is our constant, never user text.
REMOTE_DEFAULT_HOME = '"${RGT_HOME:-$HOME/.rgt}"'
# Sentinel exit codes of our own remote preamble (the agent itself never exits with these), so
# "no python" and "not installed" are told apart from the agent's own errors without parsing text.
RC_NO_PYTHON = 121
RC_NOT_INSTALLED = 120
RC_SSH_FAILED = 255


@dataclass
class Result:
    rc: int
    stdout: bytes
    stderr: bytes
    elapsed_s: float = 0.0

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
        if self.is_local:
            return shlex.quote(self.local_home())
        if self.home:
            if self.home == "~" or self.home.startswith("~/"):
                # `~/x` from the user means the box's home; quoted it would be a literal "~" dir.
                return '"$HOME"' + shlex.quote(self.home[1:]) if self.home != "~" else '"$HOME"'
            return shlex.quote(self.home)
        return REMOTE_DEFAULT_HOME

    def local_home(self) -> str:
        return os.path.abspath(os.path.expanduser(self.home or os.environ.get("RGT_HOME") or "~/.rgt"))

    def python_word(self) -> str:
        """The interpreter as a shell word; `local` with the default runs this very Python."""
        if self.is_local and self.python == "python3":
            return shlex.quote(sys.executable)
        return shlex.quote(self.python)


def ssh_argv(target: Target, remote_command: str) -> list[str]:
    argv = ["ssh"]
    if target.ssh_config:
        argv += ["-F", target.ssh_config]
    argv += list(SSH_OPTIONS) + list(target.extra_ssh) + [target.host, "--", remote_command]
    return argv


def preamble(target: Target, need_agent: bool = True) -> str:
    """Shell prefix: export RGT_HOME, then check python (and the agent file) with sentinel codes."""
    py = target.python_word()
    parts = ["RGT_HOME=%s; export RGT_HOME" % target.home_expr(),
             "command -v %s >/dev/null 2>&1 || { echo 'rgt: python not found on this box' >&2; "
             "exit %d; }" % (py, RC_NO_PYTHON)]
    if need_agent:
        parts.append("[ -f \"$RGT_HOME/rgt-agent.pyz\" ] || { echo \"rgt: no agent in $RGT_HOME\" >&2; "
                     "exit %d; }" % RC_NOT_INSTALLED)
    return "; ".join(parts) + "; "


def agent_command(target: Target, args: list[str]) -> str:
    """The remote shell line that runs the installed agent with quoted args."""
    words = " ".join(shlex.quote(a) for a in args)
    return preamble(target) + "exec %s \"$RGT_HOME/rgt-agent.pyz\" %s" % (target.python_word(), words)


def python_command(target: Target, script: str, args: list[str] | None = None,
                   need_agent: bool = False) -> str:
    """Run a small Python script on the box: base64 in one argv word, so no newline or quote
    in it ever meets the remote login shell (csh/fish users included)."""
    code = base64.b64encode(script.encode("utf-8")).decode("ascii")
    boot = "import base64;exec(compile(base64.b64decode('%s'),'<rgt>','exec'))" % code
    words = " ".join(shlex.quote(a) for a in (args or []))
    return preamble(target, need_agent=need_agent) + "exec %s -c %s %s" % (
        target.python_word(), shlex.quote(boot), words)


def spawn(target: Target, remote_command: str, **popen_kw) -> subprocess.Popen:
    """Start a remote shell line without waiting (streaming commands: logs --follow)."""
    argv, env = _argv_env(target, remote_command)
    try:
        return subprocess.Popen(argv, env=env, **popen_kw)
    except FileNotFoundError as exc:
        raise _no_binary(argv[0], exc)


def _argv_env(target: Target, remote_command: str) -> tuple[list[str], dict | None]:
    if target.is_local:
        return ["/bin/sh", "-c", remote_command], dict(os.environ, RGT_HOME=target.local_home())
    return ssh_argv(target, remote_command), None


def _no_binary(name: str, exc: OSError) -> ClientError:
    return ClientError("cannot run %s: %s" % (name, exc.strerror),
                       "install the OpenSSH client (apt-get install openssh-client)")


def run_remote(target: Target, remote_command: str, stdin: bytes | None = None,
               timeout: float | None = None) -> Result:
    """Run a shell line on the box (ssh) or here (local). rc 255 from ssh = unreachable."""
    argv, env = _argv_env(target, remote_command)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(argv, input=stdin if stdin is not None else b"", capture_output=True,
                              timeout=timeout, env=env)
    except FileNotFoundError as exc:
        raise _no_binary(argv[0], exc)
    except subprocess.TimeoutExpired:
        raise ClientError("%s did not answer within %ds" % (target.host, timeout or 0),
                          "check the network, or raise the timeout", exitcodes.UNREACHABLE)
    return Result(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)


def check_reach(target: Target, res: Result) -> Result:
    """Turn our transport-level failures into ClientErrors; pass the agent's own results on."""
    if res.rc == RC_SSH_FAILED and not target.is_local:
        raise unreachable(target, res.err)
    if res.rc == RC_NO_PYTHON:
        raise ClientError("%s has no %s" % (target.host, target.python),
                          "pass the interpreter: rgt-client install %s --python /path/to/python3"
                          % target.host)
    if res.rc == RC_NOT_INSTALLED:
        raise ClientError("the rgt agent is not installed on %s (home %s)"
                          % (target.host, target.home or "~/.rgt"),
                          "install it: rgt-client install %s" % target.host, exitcodes.AGENT_DOWN)
    return res


def unreachable(target: Target, stderr: str) -> ClientError:
    msg = " ".join(line.strip() for line in stderr.strip().splitlines()[-3:]) or "ssh failed"
    return ClientError("cannot reach %s: %s" % (target.host, msg),
                       "check `ssh %s true` works (host, key, ~/.ssh/config)" % target.host,
                       exitcodes.UNREACHABLE)


def run_agent(target: Target, args: list[str], stdin: bytes | None = None,
              timeout: float | None = None) -> Result:
    """Run `rgt-agent.pyz ARGS` on the box. Raises ClientError(UNREACHABLE) when ssh cannot connect,
    and a ClientError with a hint when the box lacks python or the agent."""
    return check_reach(target, run_remote(target, agent_command(target, args), stdin, timeout))


def run_python(target: Target, script: str, args: list[str] | None = None,
               stdin: bytes | None = None, timeout: float | None = None) -> Result:
    return check_reach(target, run_remote(target, python_command(target, script, args), stdin, timeout))
