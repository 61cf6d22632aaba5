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
from rgt_client.box.sshresolve import (DEFAULT_IDENTITIES, Resolved, forget_key_command, keyscan_command,
                                      offered_fingerprints, resolve)
from rgt_client.textsafe import safe_line

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
    """(what happened, the hint) for one kind of failure. Every command in a hint runs as
    written with the user's own config (tests/client/test_ssh_hints.py runs each one)."""
    check = ssh_words(host, ssh_config, "true")
    accept = ssh_words(host, ssh_config, "-o", "StrictHostKeyChecking=accept-new", "true")
    if kind == HOST_KEY_UNKNOWN:
        return ("%s's host key is not known here yet (first contact)" % host,
                "%s; if it matches, connect once and accept it: %s" % (_offered(host, ssh_config), accept))
    if kind == HOST_KEY_CHANGED:
        r = resolve(host, ssh_config)
        forget = forget_key_command(r) if r is not None else "ssh-keygen -R HOSTNAME"
        return ("%s's host key has CHANGED since the last connection" % host,
                "a new box behind the same address (a re-created instance) or someone in between: %s; "
                "if it is the new box, remove the old key: %s, then accept the new one: %s"
                % (_offered(host, ssh_config, r), forget, accept))
    if kind == AUTH:
        return ("%s refused the login (authentication failed)" % host,
                "%s; then: %s" % (_auth_why(host, ssh_config), check))
    if kind == NO_SUCH_HOST:
        close = difflib.get_close_matches(host, known_hosts, n=1, cutoff=0.6)
        meant = "did you mean %s? " % close[0] if close else ""
        where = ("your ssh config (%s)" % ssh_config) if ssh_config else \
            "your ssh config (~/.ssh/config, or pass --ssh-config FILE / set RGT_SSH_CONFIG)"
        return ("no host named %s (the name does not resolve)" % host,
                "%scheck the name, or add it to %s; then: %s" % (meant, where, check))
    return ("cannot reach %s" % host, "check the box is up and the network to it: %s" % check)


def _offered(host: str, ssh_config: str | None, r: Resolved | None = None) -> str:
    """The fingerprint the box offers now, beside the command that shows it, to compare with the
    one the provider shows (a first-contact hint said "compare the fingerprint" and showed none)."""
    r = r or resolve(host, ssh_config)
    if r is None:
        return "compare the key's fingerprint with the one your provider shows"
    prints = offered_fingerprints(r)
    seen = ("the box offers %s" % ", ".join(safe_line(p) for p in prints)) if prints else \
        "the box offered no key in time"
    return "%s (%s); compare it with the one your provider shows" % (seen, keyscan_command(r))


def _auth_why(host: str, ssh_config: str | None) -> str:
    """A missing ssh-agent is to blame only when the config names no key and no agent runs."""
    r = resolve(host, ssh_config)
    named = r.identities if r is not None else []
    named = named or [k for k in DEFAULT_IDENTITIES if os.path.exists(os.path.expanduser(k))]
    if named:
        return "the box refused the key %s: check it is in the box's authorized_keys (and that the file's " \
               "permissions are 600)" % ", ".join(named[:3])
    if not os.environ.get("SSH_AUTH_SOCK"):
        return ("no ssh-agent in this environment (SSH_AUTH_SOCK is unset, as under cron) and no IdentityFile "
                "in your ssh config: name the key with IdentityFile")
    return "the box refused the keys your ssh-agent offered: name the right one with IdentityFile"


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
