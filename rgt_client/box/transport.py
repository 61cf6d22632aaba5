"""The ssh transport seam: the system OpenSSH client (never a re-implementation), or `local`.

Every ssh call is bounded (BatchMode, ConnectTimeout, ServerAlive*) and every remote word is
quote'd (shlex.quote's rule). `local` runs the same agent commands on this machine without ssh.
"""
from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False   # annotations only: typing would add a few ms before a status's ssh call
if TYPE_CHECKING:
    import selectors
    import subprocess
    from typing import IO, Callable

    from rgt_client.box.earlyproc import EarlyProcess

from rgt_client import exitcodes
from rgt_client.errors import BoxTooSlow, ClientError

SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=15",
               "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3")
# The remote default home is expanded by the remote shell; it is our constant, never user text.
REMOTE_DEFAULT_HOME = '"${RGT_HOME:-$HOME/.rgt}"'
# Sentinel exit codes of our own remote preamble (the agent itself never exits with these), so
# "no python" and "not installed" are told apart from the agent's own errors without parsing text.
RC_NO_PYTHON = 121
RC_NOT_INSTALLED = 120
RC_NOT_OURS = 122
RC_SSH_FAILED = 255
# The first thing the remote shell says (on stderr): the connection is up. A timeout after it is
# "the box answered too slowly", not "unreachable" (a loaded box was once reported as down).
CONNECTED = b"rgt-connected\n"
# What is kept of a command's stderr: its end (the agent's Error:/Hint: lines). A box that
# writes gigabytes there must not fill this machine's memory.
STDERR_KEEP = 64 * 1024
BLOCK = 65536


# shlex.quote's characters that need no quoting. Its rule written out: shlex imports re (and re
# enum, functools, collections), 4 ms before `status` could start its ssh call.
_SAFE = frozenset(b"%+,-./0123456789:=@ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz")


def quote(word: str) -> str:
    """shlex.quote(word): one shell word that stands for `word` exactly."""
    if not word:
        return "''"
    if word.isascii() and _SAFE.issuperset(word.encode("ascii")):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


# Plain classes, no dataclasses: `status` starts its ssh call right after importing this module
# (prefetch.py), and dataclasses' own imports (inspect, ast, dis...) came before that call.

class Result:
    __slots__ = ("rc", "stdout", "stderr", "elapsed_s", "connected")

    def __init__(self, rc: int, stdout: bytes, stderr: bytes, elapsed_s: float = 0.0,
                 connected: bool = True) -> None:
        self.rc, self.stdout, self.stderr = rc, stdout, stderr
        self.elapsed_s, self.connected = elapsed_s, connected

    def __repr__(self) -> str:
        return "Result(rc=%r, stdout=%r, stderr=%r)" % (self.rc, self.stdout[:200], self.stderr[-200:])

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


class Target:
    """host: ssh destination (alias, user@host) or "local"; home: RGT_HOME on the box (None =
    the box's default); home_from: why this home (hosts.target_for), printed by writes."""
    __slots__ = ("host", "home", "python", "ssh_config", "extra_ssh", "home_from")

    def __init__(self, host: str, home: str | None = None, python: str = "python3",
                 ssh_config: str | None = None, extra_ssh: list[str] | None = None,
                 home_from: str = "the box's default") -> None:
        self.host, self.home, self.python, self.ssh_config = host, home, python, ssh_config
        self.extra_ssh = list(extra_ssh or [])
        self.home_from = home_from

    def __repr__(self) -> str:
        return "Target(host=%r, home=%r, python=%r, ssh_config=%r)" % (self.host, self.home, self.python,
                                                                       self.ssh_config)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    @property
    def is_local(self) -> bool:
        return self.host == "local"

    def home_expr(self) -> str:
        """The home as a remote shell word."""
        if self.is_local:
            return quote(self.local_home())
        if self.home:
            if self.home == "~" or self.home.startswith("~/"):
                # `~/x` from the user means the box's home; quoted it would be a literal "~" dir.
                return '"$HOME"' + quote(self.home[1:]) if self.home != "~" else '"$HOME"'
            return quote(self.home)
        return REMOTE_DEFAULT_HOME

    def local_home(self) -> str:
        return os.path.abspath(os.path.expanduser(self.home or os.environ.get("RGT_HOME") or "~/.rgt"))

    def home_shown(self) -> str:
        """The home as a user reads it: the path for `local` and for --home, else the box's default."""
        if self.is_local:
            return self.local_home()
        return self.home or "$RGT_HOME or ~/.rgt on the box"

    def python_word(self) -> str:
        """The interpreter as a shell word; `local` with the default runs this very Python."""
        if self.is_local and self.python == "python3":
            return quote(sys.executable)
        return quote(self.python)


def ssh_argv(target: Target, remote_command: str) -> list[str]:
    from rgt_client.box import sshmux
    argv = ["ssh"]
    if target.ssh_config:
        argv += ["-F", target.ssh_config]
    argv += list(SSH_OPTIONS) + sshmux.options(target.host, target.ssh_config) + list(target.extra_ssh)
    return argv + [target.host, "--", remote_command]


def drop_master(target: Target) -> None:
    """A call through the shared connection timed out or its link broke: end that master, so the
    next call makes a fresh connection instead of queueing behind a dead one."""
    if not target.is_local:
        from rgt_client.box import sshmux
        sshmux.close(target.host, target.ssh_config, target.extra_ssh, timeout=5.0)


def preamble(target: Target, need_agent: bool = True) -> str:
    """Shell prefix: export RGT_HOME, then check python (and the agent file) with sentinel codes."""
    py = target.python_word()
    parts = ["printf '%s\\n' >&2" % CONNECTED.decode().strip(),
             "RGT_HOME=%s; export RGT_HOME" % target.home_expr(),
             "command -v %s >/dev/null 2>&1 || { echo 'rgt: python not found on this box' >&2; "
             "exit %d; }" % (py, RC_NO_PYTHON)]
    if need_agent:
        parts.append("[ -f \"$RGT_HOME/rgt-agent.pyz\" ] || { echo \"rgt: no agent in $RGT_HOME\" >&2; "
                     "exit %d; }" % RC_NOT_INSTALLED)
        # A home another local user made first (RGT_HOME in a shared /tmp) held their .pyz, and
        # any command ran it as you; install refuses such a folder (its chmod), and so does this.
        parts.append("[ -O \"$RGT_HOME\" ] && [ -O \"$RGT_HOME/rgt-agent.pyz\" ] || { echo \"rgt: $RGT_HOME is "
                     "not yours\" >&2; exit %d; }" % RC_NOT_OURS)
    return "; ".join(parts) + "; "


def agent_command(target: Target, args: list[str]) -> str:
    """The remote shell line that runs the installed agent with quoted args."""
    words = " ".join(quote(a) for a in args)
    if args[:1] != ["status"]:
        return preamble(target) + "exec %s \"$RGT_HOME/rgt-agent.pyz\" %s" % (target.python_word(), words)
    # `status` reads the daemon's files and needs only the standard library: -S spares it the box's
    # site-packages (a conda site's .pth files cost every status tens of milliseconds). And it
    # starts from boot.py where the agent's precompile left one (bundle's pyzmain: the cached
    # code, without runpy or the zip; half of what status cost on the box): a box without it, or
    # whose boot.py no longer matches the .pyz, runs the .pyz itself. A boot.py that is not yours
    # (planted in a home you opened to others) is passed over for the .pyz, checked as yours above.
    return preamble(target) + ("a=\"$RGT_HOME/.agent-pyc/boot.py\"; [ -O \"$a\" ] || a=\"$RGT_HOME/rgt-agent.pyz\"; "
                               "exec %s -S \"$a\" %s" % (target.python_word(), words))


def python_command(target: Target, script: str, args: list[str] | None = None,
                   need_agent: bool = False, bare: bool = False) -> str:
    """Run a small Python script on the box: base64 in one argv word, so no newline or quote
    in it ever meets the remote login shell (csh/fish users included). `bare`: the script needs
    only the standard library, so -S spares it the box's site-packages (as for `status`)."""
    import base64
    code = base64.b64encode(script.encode("utf-8")).decode("ascii")
    boot = "import base64;exec(compile(base64.b64decode('%s'),'<rgt>','exec'))" % code
    words = " ".join(quote(a) for a in (args or []))
    return preamble(target, need_agent=need_agent) + "exec %s%s -c %s %s" % (
        target.python_word(), " -S" if bare else "", quote(boot), words)


def spawn(target: Target, remote_command: str, **popen_kw) -> subprocess.Popen:
    """Start a remote shell line without waiting (streaming commands: logs --follow)."""
    import subprocess
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
               timeout: float | None = None, max_out: int | None = None, what: str = "",
               on_out: Callable[[bytes], None] | None = None, fresh: bool = False) -> Result:
    """Run a shell line on the box (ssh) or here (local). rc 255 from ssh = unreachable.

    Bounded: at most `max_out` bytes of stdout (more is an error naming the host; the box may be
    compromised) and the last STDERR_KEEP bytes of stderr; `timeout` is wall seconds. With `on_out`
    stdout goes to it chunk by chunk as it arrives and is not kept.
    A shared connection whose master does not answer is found within seconds, taken out of the
    way, and the call made once more on a new connection (`fresh`: this is that second try)."""
    import subprocess
    argv, env = _argv_env(target, remote_command)
    t0 = time.monotonic()
    proc: subprocess.Popen | EarlyProcess | None = None if stdin or fresh else _EARLY.pop(_key(argv, env), None)
    try:
        proc = proc or subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
    except FileNotFoundError as exc:
        raise _no_binary(argv[0], exc)
    stalled = _stall_probe(target, argv, timeout)
    try:
        out, err = _collect(proc, stdin or b"", t0 + timeout if timeout else None, max_out, on_out, stalled)
    except _Stalled:
        _reap(proc)
        return _again_on_a_new_connection(target, remote_command, stdin, timeout, t0, max_out, what, on_out, fresh)
    except _Overflow:
        raise ClientError("%s sent more than %s for %s: no agent answer is that big" % (
            target.host, _mib(max_out or 0), what or "one command"),
            "the box may be damaged or compromised: look at it over plain ssh, then reinstall: "
            "rgt-client install %s" % quote(target.host))
    except _Timeout as exc:
        drop_master(target)
        raise _too_slow(target, timeout or 0, exc.connected, what)
    finally:
        _reap(proc)
    connected = err.startswith(CONNECTED)
    assert proc.returncode is not None      # _collect waited for it
    if proc.returncode == RC_SSH_FAILED and connected:
        drop_master(target)       # the link broke mid-answer: the master behind it is dead too
    return Result(proc.returncode, bytes(out), bytes(err[len(CONNECTED):] if connected else err),
                  time.monotonic() - t0, connected)


# A call shorter than this keeps the plain timeout: there is no time left to ask the master,
# take it away and go again.
_STALL_MIN_TIMEOUT_S = 10.0


def _stall_probe(target: Target, argv: list[str], timeout: float | None) -> tuple[float, Callable[[], bool]] | None:
    """(when to ask, how) for a call through rgt's shared connection; None for any other."""
    if target.is_local or "ControlMaster=auto" not in argv or (timeout is not None and timeout < _STALL_MIN_TIMEOUT_S):
        return None
    from rgt_client.box import sshmux
    return (time.monotonic() + sshmux.STALL_AFTER_S,
            lambda: sshmux.master_stalled(target.host, target.ssh_config, target.extra_ssh))


def _again_on_a_new_connection(target: Target, remote_command: str, stdin: bytes | None, timeout: float | None,
                               t0: float, max_out: int | None, what: str,
                               on_out: Callable[[bytes], None] | None, fresh: bool) -> Result:
    """The master took the call and never answered (stopped, or wedged on a dead link): nothing
    reached the box through it. Remove it and make the call once more on a new connection."""
    from rgt_client.box import sshmux
    waited = sshmux.STALL_AFTER_S + sshmux.STALL_PROBE_S
    sshmux.forget(target.host, target.ssh_config, target.extra_ssh)
    if fresh:
        raise ClientError("the shared ssh connection to %s did not answer within %.0f s, and neither did the new "
                          "one made in its place" % (target.host, waited),
                          "end it and try again: rgt-client ssh-close %s (RGT_SSH_MULTIPLEX=0 turns sharing off)"
                          % quote(target.host), exitcodes.UNREACHABLE)
    sys.stderr.write("Note: the shared ssh connection to %s did not answer within %.0f s (its master is stopped "
                     "or wedged); rgt set it aside and made the call again on a new connection.\n"
                     % (target.host, waited))
    sys.stderr.flush()
    left = None if timeout is None else max(1.0, timeout - (time.monotonic() - t0))
    return run_remote(target, remote_command, stdin, left, max_out, what, on_out, fresh=True)


# Calls started before the client finished starting (prefetch.py), by (argv, environment).
_EARLY: dict[tuple, EarlyProcess] = {}


def _key(argv: list[str], env: dict | None) -> tuple:
    return tuple(argv), tuple(sorted(env.items())) if env is not None else None


def start_early(target: Target, remote_command: str) -> None:
    """Start a call now for run_remote to take later, if it is asked for exactly this one (no
    stdin); one never taken is killed when the client exits. Started without subprocess
    (earlyproc.py): its imports came before the call."""
    from rgt_client.box import earlyproc
    argv, env = _argv_env(target, remote_command)
    if _key(argv, env) in _EARLY or not earlyproc.available():
        return
    try:
        proc = earlyproc.EarlyProcess(argv, env)
    except OSError:
        return   # the normal path says why
    if not _EARLY:
        import atexit
        atexit.register(_drop_early)
    _EARLY[_key(argv, env)] = proc


def _drop_early() -> None:
    while _EARLY:
        _reap(_EARLY.popitem()[1])


class _Overflow(Exception):
    pass


class _Stalled(Exception):
    pass


class _Timeout(Exception):
    def __init__(self, connected: bool) -> None:
        super().__init__()
        self.connected = connected


def _mib(n: int) -> str:
    return "%d MiB" % (n // (1 << 20)) if n >= (1 << 20) else "%d KiB" % (n // 1024)


def _collect(proc: subprocess.Popen | EarlyProcess, data: bytes, deadline: float | None, max_out: int | None,
             on_out: Callable[[bytes], None] | None = None,
             stalled: tuple[float, Callable[[], bool]] | None = None) -> tuple[bytearray, bytearray]:
    """communicate(), bounded: stdout up to max_out, the tail of stderr, stdin fed as it drains.
    `stalled`: (when, ask): nothing heard by `when` and ask() says the master is stuck: _Stalled."""
    import selectors
    import subprocess
    assert proc.stdin and proc.stdout and proc.stderr
    out, err, sent, got = bytearray(), bytearray(), 0, 0
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        if data:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        while sel.get_map():
            now = time.monotonic()
            left = None if deadline is None else deadline - now
            if left is not None and left <= 0:
                raise _Timeout(err.startswith(CONNECTED))
            if stalled is not None:
                if got or err:
                    stalled = None            # the box answered: the connection works
                elif now >= stalled[0]:
                    if stalled[1]():
                        raise _Stalled()
                    stalled = None            # a live master, or none yet: only the link is slow
                else:
                    left = stalled[0] - now if left is None else min(left, stalled[0] - now)
            for key, _ in sel.select(left):
                if key.fileobj is proc.stdin:
                    sent = _feed(sel, proc.stdin, data, sent)
                    continue
                chunk = os.read(key.fd, BLOCK)
                if not chunk:
                    sel.unregister(key.fileobj)
                elif key.fileobj is proc.stdout:
                    got += len(chunk)
                    if max_out is not None and got > max_out:
                        raise _Overflow()
                    if on_out is not None:
                        on_out(chunk)
                    else:
                        out += chunk
                else:
                    err += chunk
                    if len(err) > 2 * STDERR_KEEP:
                        keep = err[:len(CONNECTED)] if err.startswith(CONNECTED) else b""
                        err[:] = keep + err[-STDERR_KEEP:]
    left = None if deadline is None else max(0.1, deadline - time.monotonic())
    try:
        proc.wait(left)
    except subprocess.TimeoutExpired:
        raise _Timeout(err.startswith(CONNECTED))
    return out, err


def _feed(sel: selectors.BaseSelector, pipe: IO[bytes], data: bytes, sent: int) -> int:
    try:
        sent += os.write(pipe.fileno(), data[sent:sent + BLOCK])
    except BrokenPipeError:
        sent = len(data)   # the remote side stopped reading: its answer says why
    except BlockingIOError:
        return sent
    if sent >= len(data):
        sel.unregister(pipe)
        pipe.close()
    return sent


def _reap(proc: subprocess.Popen | EarlyProcess) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None and not pipe.closed:
            pipe.close()


def _too_slow(target: Target, timeout: float, connected: bool, what: str) -> ClientError:
    if connected or target.is_local:
        # The connection came up; whether it still is, silence cannot tell: a link that went
        # dark mid-wait was once reported as "(the connection is up)".
        return BoxTooSlow("%s answered too slowly: no answer to %s within %ds after the connection came up "
                          "(a box too loaded to answer, or a link that went silent)"
                          % (target.host, what or "the command", timeout),
                          "try again; if it repeats, look at the box: %s" % _ssh_words(target, "uptime"))
    from rgt_client.box import sshmux
    from rgt_client.box.sshfail import ssh_words
    # Over a shared connection a dark link looks the same: nothing comes back, not even the
    # remote shell's first word; "never came up" was said of a link that had been up for hours.
    why = ("nothing came back over the shared connection (the network to the box went silent, or the "
           "box is too loaded to answer)" if sshmux.options(target.host, target.ssh_config)
           else "the ssh connection never came up")
    return ClientError("%s did not answer within %ds: %s" % (target.host, timeout, why),
                       "check the network to the box: %s" % ssh_words(target.host, target.ssh_config, "true"),
                       exitcodes.UNREACHABLE)


def _ssh_words(target: Target, command: str) -> str:
    from rgt_client.box.sshfail import ssh_words
    return ssh_words(target.host, target.ssh_config, command)


def check_reach(target: Target, res: Result) -> Result:
    """Turn our transport-level failures into ClientErrors; pass the agent's own results on."""
    if res.rc == RC_SSH_FAILED and not target.is_local:
        raise unreachable(target, res.err, res.connected)
    if res.rc == RC_NO_PYTHON:
        raise ClientError("%s has no %s" % (target.host, target.python),
                          "pass the interpreter: rgt-client install %s --python /path/to/python3"
                          % quote(target.host))
    if res.rc == RC_NOT_INSTALLED:
        raise ClientError("the rgt agent is not installed on %s (home %s)"
                          % (target.host, target.home_shown()),
                          "install it: rgt-client install %s" % quote(target.host), exitcodes.AGENT_DOWN)
    if res.rc == RC_NOT_OURS:
        raise ClientError("rgt's folder on %s (home %s) or its agent file belongs to another user; not run"
                          % (target.host, target.home_shown()),
                          "use a home of your own: rgt-client install %s --home '~/.rgt'" % quote(target.host),
                          exitcodes.USAGE)
    return res


def unreachable(target: Target, stderr: str, connected: bool = False) -> ClientError:
    """ssh failed: unreachable, host key unknown or changed, authentication, or no such host,
    each with its own exit code and hint (sshfail.py), the hint in the user's own `ssh -F FILE`."""
    from rgt_client.box import sshfail
    from rgt_client.textsafe import safe_line
    # ssh's lines stay lines: joined with a space they ran together into one unreadable sentence
    lines = [safe_line(line.strip()) for line in stderr.strip().splitlines() if line.strip()][-3:]
    msg = "\n  ".join(lines) if len(lines) > 1 else (lines[0] if lines else "ssh failed")
    sep = ":\n  " if len(lines) > 1 else ": "
    if connected:   # ssh's own words about a link that dropped mid-answer
        return ClientError("the connection to %s broke%s%s" % (target.host, sep, msg),
                           "try again; if it repeats, check the network to the box", exitcodes.UNREACHABLE)
    kind = sshfail.kind_of(stderr)
    known = sshfail.known_host_names(target.ssh_config) if kind == sshfail.NO_SUCH_HOST else []
    what, hint = sshfail.what_and_hint(kind, target.host, target.ssh_config, known)
    return ClientError("%s%s%s" % (what, sep, msg), hint, sshfail.CODES[kind])


def run_agent(target: Target, args: list[str], stdin: bytes | None = None,
              timeout: float | None = None, max_out: int | None = None,
              on_out: Callable[[bytes], None] | None = None) -> Result:
    """Run `rgt-agent.pyz ARGS` on the box. Raises ClientError(UNREACHABLE) when ssh cannot connect,
    and a ClientError with a hint when the box lacks python or the agent. Reading the answer and
    its Error:/Hint: lines is agentcall's job.
    `on_out` takes stdout chunk by chunk instead (streamed answers: logs); then nothing is kept."""
    what = "`%s`" % " ".join(args[:1])
    return check_reach(target, run_remote(target, agent_command(target, args), stdin, timeout, max_out, what,
                                          on_out))


def run_python(target: Target, script: str, args: list[str] | None = None,
               stdin: bytes | None = None, timeout: float | None = None, max_out: int | None = None,
               bare: bool = False) -> Result:
    return check_reach(target, run_remote(target, python_command(target, script, args, bare=bare), stdin, timeout,
                                          max_out,
                                          "a box-side script"))
