"""What an ssh failure was, from OpenSSH's own words, and what to do about it.

Every failure used to read "cannot reach HOST" with `ssh HOST true` as the hint: a first
contact with an unknown host key, a cron job without its ssh-agent and a stopped sshd looked
the same, and the hint's command failed for users whose hosts live in `--ssh-config`.
"""
from __future__ import annotations

import difflib
import os
import re
import shlex

from rgt_client import exitcodes

UNREACHABLE, HOST_KEY_UNKNOWN, HOST_KEY_CHANGED, AUTH, NO_SUCH_HOST = (
    "unreachable", "host_key_unknown", "host_key_changed", "auth_failed", "no_such_host")

# (kind, pattern) in order: the first that matches names the failure (OpenSSH's messages).
_KINDS = (
    (HOST_KEY_CHANGED, re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for \S+ has changed")),
    (HOST_KEY_UNKNOWN, re.compile(r"No \S+ host key is known for|Host key verification failed")),
    (AUTH, re.compile(r"Permission denied \(|Too many authentication failures|Load key .*: (invalid format|"
                      r"bad permissions|error in libcrypto)|UNPROTECTED PRIVATE KEY FILE|no such identity")),
    (NO_SUCH_HOST, re.compile(r"Could not resolve hostname|Name or service not known|nodename nor servname")),
)
CODES = {UNREACHABLE: exitcodes.UNREACHABLE, HOST_KEY_UNKNOWN: exitcodes.HOST_KEY,
         HOST_KEY_CHANGED: exitcodes.HOST_KEY, AUTH: exitcodes.AUTH_FAILED, NO_SUCH_HOST: exitcodes.UNREACHABLE}


def kind_of(stderr: str) -> str:
    for kind, rx in _KINDS:
        if rx.search(stderr):
            return kind
    return UNREACHABLE


def ssh_words(host: str, ssh_config: str | None, *rest: str) -> str:
    """`ssh [-F FILE] HOST REST...` as the user should type it (their own -F file)."""
    words = ["ssh"] + (["-F", ssh_config] if ssh_config else []) + list(rest[:-1]) + [host] + list(rest[-1:])
    return " ".join(shlex.quote(w) for w in words)


def what_and_hint(kind: str, host: str, ssh_config: str | None, known_hosts: list[str]) -> tuple[str, str]:
    """(what happened, the hint) for one kind of failure."""
    check = ssh_words(host, ssh_config, "true")
    if kind == HOST_KEY_UNKNOWN:
        return ("%s's host key is not known here yet (first contact)" % host,
                "compare the key's fingerprint with the one your provider shows, then connect once and "
                "accept it: %s" % ssh_words(host, ssh_config, "-o", "StrictHostKeyChecking=accept-new", "true"))
    if kind == HOST_KEY_CHANGED:
        return ("%s's host key has CHANGED since the last connection" % host,
                "a new box behind the same address (a re-created instance) or someone in between: check "
                "the fingerprint with your provider; if it is the new box, remove the old key "
                "(ssh-keygen -R HOSTNAME) and connect once: %s" % check)
    if kind == AUTH:
        why = ("no ssh-agent in this environment (SSH_AUTH_SOCK is unset, as under cron): name the key "
               "with IdentityFile in your ssh config" if not os.environ.get("SSH_AUTH_SOCK")
               else "the box refused the keys offered: check IdentityFile (and its permissions, 600)")
        return ("%s refused the login (authentication failed)" % host, "%s; then: %s" % (why, check))
    if kind == NO_SUCH_HOST:
        close = difflib.get_close_matches(host, known_hosts, n=1, cutoff=0.6)
        meant = "did you mean %s? " % close[0] if close else ""
        return ("no host named %s (the name does not resolve)" % host,
                "%scheck the name, or add it to your ssh config; then: %s" % (meant, check))
    return ("cannot reach %s" % host, "check the box is up and the network to it: %s" % check)


def known_host_names(ssh_config: str | None) -> list[str]:
    """Hosts rgt has used, and the Host aliases of the ssh config (no wildcards)."""
    from rgt_client.box.hostsfile import load_all
    names = set(load_all())
    path = ssh_config or os.path.expanduser("~/.ssh/config")
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 20)
    except OSError:
        text = ""
    for m in re.finditer(r"^\s*Host\s+(.+)$", text, re.I | re.M):
        names.update(w for w in m.group(1).split() if not any(c in w for c in "*?!"))
    return sorted(names)
