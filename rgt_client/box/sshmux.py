"""One ssh connection per box, reused: OpenSSH's own multiplexing (ControlMaster).

A box far away costs a whole handshake per command: `ssh true` took 1.58 s at a 150 ms round
trip, and every rgt command paid it again (`pull` three times). With a master connection the
later commands ride on it and pay one round trip. ansible turns this on by default for the same
reason.

- rgt adds `ControlMaster=auto`, `ControlPersist=60s` and a private `ControlPath` (a 0700
  directory of ours, `%C`: a hash of the host, port and user) to its own ssh calls.
- A user whose ssh config names ControlMaster, ControlPath or ControlPersist anywhere (or in a
  file it Includes) keeps their own setup, whatever it is (`ControlMaster no` included): rgt
  adds nothing. Reading the files costs no process, so `status` stays one ssh call.
- A master that stopped answering must not hang later calls: a call through it that times out
  or whose link broke ends that master (`ssh -O exit`, then the socket is removed), and the next
  call makes a new one. ServerAliveInterval also ends a master whose link died.
- `RGT_SSH_MULTIPLEX=0` turns it off; `rgt-client ssh-close HOST` ends a master now.
"""
from __future__ import annotations

import os
import stat
import sys

# Plain os.path, no pathlib: `status` computes these options before its ssh call starts, and
# pathlib's imports (urllib.parse, ipaddress) were 2.5 ms of it.

ENV_OFF = "RGT_SSH_MULTIPLEX"
PERSIST = "60s"
_SOCKET_MAX = 100        # sun_path is 104-108 bytes: the %C name is 40 more than the directory


def enabled() -> bool:
    return os.environ.get(ENV_OFF, "1").strip().lower() not in ("0", "no", "off", "false")


def control_dir() -> str:
    """A directory only this user can enter: the runtime dir, else the cache dir, else /tmp."""
    uid = os.getuid()
    for base in (os.environ.get("XDG_RUNTIME_DIR"), os.path.join(os.path.expanduser("~"), ".cache")):
        if base and os.path.isdir(base) and len(os.path.join(base, "rgt-ssh")) + 42 < _SOCKET_MAX:
            return os.path.join(base, "rgt-ssh")
    import tempfile     # the fallback only: not among a status's imports before its ssh call
    return os.path.join(tempfile.gettempdir(), "rgt-ssh-%d" % uid)


def not_private(d: str) -> str | None:
    """Why `d` cannot hold rgt's masters (None: it can). Created 0700 when missing.

    Field attack: with the fallback in a shared /tmp, another user's symlink
    `/tmp/rgt-ssh-0 -> /a/dir/the/victim/owns` passed a check that followed links; flipped
    between two directories, it handed that user 5 of 20 of the victim's `status` sessions
    (OpenSSH's multiplexing client does not check who owns the master it connects to). So the
    directory itself is looked at with lstat (a link is refused, never followed), it must be
    ours and 0700, and the folder it sits in must not let another user swap it: writable only
    by us or root, or sticky."""
    uid = os.getuid()
    if len(d) + 42 >= _SOCKET_MAX:
        return "is too long a path for ssh's sockets"
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        return "cannot be made (%s)" % (e.strerror or e)
    try:
        st = os.lstat(d)
        parent = os.stat(os.path.dirname(d))
    except OSError as e:
        return "cannot be read (%s)" % (e.strerror or e)
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != uid:
        return "belongs to another user (uid %d)" % st.st_uid
    if st.st_mode & 0o077:
        return "is open to other users (mode %o)" % (st.st_mode & 0o777)
    if parent.st_uid not in (uid, 0) or (parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX):
        return "sits in a folder another user may change (%s)" % os.path.dirname(d)
    return None


_warned: set[str] = set()


def _private(d: str) -> bool:
    """True when `d` is private; else sharing is off, said once per process on stderr."""
    why = not_private(d)
    if why is None:
        return True
    if d not in _warned:
        _warned.add(d)
        sys.stderr.write("Warning: ssh connection sharing is off: %s %s; each call opens its own "
                         "connection (remove it, or set XDG_RUNTIME_DIR to a private folder)\n" % (d, why))
    return False


def options(host: str, ssh_config: str | None) -> list[str]:
    """The -o options that multiplex rgt's calls to `host`, or none (off, or the user's own)."""
    if not enabled() or host == "local":
        return []
    if _config_mentions_control(ssh_config):
        return []
    d = control_dir()
    if not _private(d):
        return []
    return ["-o", "ControlMaster=auto", "-o", "ControlPersist=%s" % PERSIST,
            "-o", "ControlPath=%s" % os.path.join(d, "%C")]


_CONTROL_WORDS = ("controlmaster", "controlpath", "controlpersist")


def _keyword(line: str) -> tuple[str, str]:
    """(the first word of a config line, lowercased; what follows it). Read without a regex:
    `re`, glob and subprocess were 6 ms of what `status` imported before its ssh call."""
    text = line.lstrip()
    end = 0
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    return text[:end].lower(), text[end:]


def _config_files(ssh_config: str | None) -> list[str]:
    return [ssh_config] if ssh_config else [os.path.expanduser("~/.ssh/config"), "/etc/ssh/ssh_config"]


def _matching(pattern: str) -> list[str]:
    """glob.glob(pattern), sorted. The common Include (Debian's `/etc/ssh/ssh_config.d/*.conf`: a
    `*` or `?` in the last part only) is matched here; anything else goes to glob, whose imports
    (re, fnmatch, contextlib) came before every `status`'s ssh call on such a system."""
    folder, last = os.path.split(pattern)
    if any(c in folder for c in "*?[") or "[" in last:
        import glob
        return sorted(glob.glob(pattern))
    if not any(c in last for c in "*?"):
        return [pattern] if os.path.lexists(pattern) else []
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return []
    hidden_too = last.startswith(".")      # glob's rule: a leading dot is matched only by a dot
    return sorted(os.path.join(folder, n) for n in names
                  if (hidden_too or not n.startswith(".")) and _wild(n, last))


def _wild(name: str, pattern: str) -> bool:
    """fnmatch for `*` and `?` only (no `[`), without a regex. One pass with a single restart
    point (the last `*` seen): a `*` may only ever grow, so the work is at most len(name) times
    len(pattern). The split-at-each-`*` recursion this replaces was exponential in the stars:
    an Include of `*a*a*a*a*a*b` over a folder with one 60-letter name held `status` 15 s."""
    n = p = 0
    star, mark = -1, 0            # the last `*` in the pattern, and where its run in name ends
    while n < len(name):
        if p < len(pattern) and pattern[p] == "*":
            star, mark, p = p, n, p + 1
        elif p < len(pattern) and pattern[p] in ("?", name[n]):
            n, p = n + 1, p + 1
        elif star >= 0:
            mark += 1             # let the last `*` take one more character, and retry after it
            n, p = mark, star + 1
        else:
            return False
    return all(c == "*" for c in pattern[p:])


def _config_mentions_control(ssh_config: str | None) -> bool:
    """Any Control* keyword in the config files or the files they Include (two levels)."""
    todo = [(p, 0) for p in _config_files(ssh_config)]
    seen: set[str] = set()
    while todo:
        path, depth = todo.pop()
        if path in seen or depth > 2:
            continue
        seen.add(path)
        try:
            with open(path, "r", encoding="utf-8", errors="replace") as fh:
                text = fh.read(1 << 20)
        except OSError:
            continue
        lines = [_keyword(line) for line in text.split("\n")]
        if any(word in _CONTROL_WORDS for word, _ in lines):
            return True
        base = os.path.dirname(path) if path.startswith("/etc/") else os.path.expanduser("~/.ssh")
        for word, rest in lines:
            if word != "include" or not rest[:1].isspace() or not rest.strip():
                continue
            for name in rest.split():
                pattern = os.path.join(base, os.path.expanduser(name.strip('"')))
                todo += [(p, depth + 1) for p in _matching(pattern)]
    return False


def close(host: str, ssh_config: str | None, extra: list[str] | None = None, timeout: float = 10.0) -> bool:
    """End rgt's master connection to `host`: `ssh -O exit`, and its socket removed even when
    the master does not answer (stopped, or wedged on a dead link), so no later call queues
    behind it. True when a master was there."""
    opts = options(host, ssh_config)
    if not opts:
        return False
    import subprocess
    base = ["ssh"] + (["-F", ssh_config] if ssh_config else []) + opts + list(extra or [])
    try:
        ok = subprocess.run(base + ["-O", "exit", host], capture_output=True, timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    sock = socket_path(host, ssh_config, extra)
    if sock is not None and os.path.exists(sock):
        try:
            os.unlink(sock)
            ok = True
        except OSError:
            pass
    return ok


def socket_path(host: str, ssh_config: str | None, extra: list[str] | None = None) -> str | None:
    """The master's socket for `host`: ControlPath's %C is the SHA-1 of local host name, remote
    host name, port and user, as `ssh -G` resolves them."""
    import subprocess
    argv = ["ssh"] + (["-F", ssh_config] if ssh_config else []) + list(extra or []) + ["-G", host]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    conf = dict(line.partition(" ")[::2] for line in out.splitlines())
    if not all(conf.get(k) for k in ("hostname", "port", "user")):
        return None
    import hashlib
    import socket
    name = hashlib.sha1(("%s%s%s%s" % (socket.gethostname(), conf["hostname"], conf["port"], conf["user"]))
                        .encode()).hexdigest()
    return os.path.join(control_dir(), name)


# A master that accepts and never answers (stopped, or wedged): a call through it waited its
# whole timeout, 125 s for `status`, and was then blamed on the network. ssh asks a master
# `-O check` over the local socket, with no network in between: a live master answers at once
# however far the box is, and with no master there ssh says so at once. Only a master that
# does not answer leaves the question hanging.
STALL_AFTER_S = 2.0       # no first byte by then: ask the master (a live one answers in ms)
STALL_PROBE_S = 1.5       # ...and it has this long to answer


def master_stalled(host: str, ssh_config: str | None, extra: list[str] | None = None,
                   timeout: float = STALL_PROBE_S) -> bool:
    """True when rgt's master for `host` does not answer `ssh -O check` within `timeout`."""
    opts = options(host, ssh_config)
    if not opts:
        return False
    import subprocess
    argv = ["ssh"] + (["-F", ssh_config] if ssh_config else []) + opts + list(extra or []) + ["-O", "check", host]
    try:
        subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return True
    except OSError:
        return False
    return False


def forget(host: str, ssh_config: str | None, extra: list[str] | None = None) -> None:
    """Take a master that does not answer out of the way (its socket removed; asking it to exit
    would only wait on it): the next call makes a new master at the same path."""
    sock = socket_path(host, ssh_config, extra)
    if sock is not None:
        try:
            os.unlink(sock)
        except OSError:
            pass
