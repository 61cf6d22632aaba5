"""What the user's own ssh config makes of a host (`ssh -G`), and the host key a box offers
(`ssh-keyscan`), for hints a user can run as written.

A changed host key's hint said `ssh-keygen -R HOSTNAME`: that edits ~/.ssh/known_hosts, while
the key lived in the known-hosts file the user's `-F` config names, stored as `[10.200.4.2]:2222`
(ssh's form for a port other than 22). So hints ask ssh itself where the key is, and under which
name. Called on a failure's path only: each is one short local subprocess, bounded.
"""
from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass, field

TIMEOUT_S = 5.0
# What `ssh -G` lists as identityfile when the config names none (OpenSSH's defaults).
DEFAULT_IDENTITIES = ("~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk", "~/.ssh/id_ed25519",
                      "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss", "~/.ssh/id_dsa")


@dataclass
class Resolved:
    """The fields of `ssh -G` the hints need."""
    hostname: str
    port: int = 22
    known_hosts: str | None = None          # the first UserKnownHostsFile
    key_alias: str | None = None            # HostKeyAlias: the name ssh stores the key under
    identities: list[str] = field(default_factory=list)     # set in the config (not the defaults)

    @property
    def key_name(self) -> str:
        """The host as known_hosts stores it: `[host]:port` for a port other than 22."""
        name = self.key_alias or self.hostname
        return name if self.port == 22 or self.key_alias else "[%s]:%d" % (name, self.port)


def _ssh_config_args(ssh_config: str | None) -> list[str]:
    return ["-F", ssh_config] if ssh_config else []


def resolve(host: str, ssh_config: str | None) -> Resolved | None:
    """`ssh -G` for the host through the user's config, or None when ssh cannot say."""
    try:
        out = subprocess.run(["ssh", *_ssh_config_args(ssh_config), "-G", host], capture_output=True,
                             text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    fields: dict[str, list[str]] = {}
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        fields.setdefault(key.lower(), []).append(value.strip())
    known = (fields.get("userknownhostsfile") or [""])[0].split()
    ids = [i for i in fields.get("identityfile") or [] if i not in DEFAULT_IDENTITIES]
    try:
        port = int((fields.get("port") or ["22"])[0])
    except ValueError:
        port = 22
    alias = (fields.get("hostkeyalias") or [""])[0]
    return Resolved((fields.get("hostname") or [host])[0], port,
                    os.path.expanduser(known[0]) if known and known[0] != "none" else None,
                    alias if alias and alias != "none" else None, ids)


def forget_key_command(r: Resolved) -> str:
    """The command that removes the box's old key from the file ssh keeps it in."""
    words = ["ssh-keygen"] + (["-f", r.known_hosts] if r.known_hosts else []) + ["-R", r.key_name]
    return " ".join(shlex.quote(w) for w in words)


def keyscan_command(r: Resolved) -> str:
    """The command that shows the key's fingerprint the box offers now."""
    return "ssh-keyscan -p %d %s 2>/dev/null | ssh-keygen -lf -" % (r.port, shlex.quote(r.hostname))


def offered_fingerprints(r: Resolved) -> list[str]:
    """The fingerprints of the host keys the box offers now (`ssh-keyscan`, then `ssh-keygen -l`),
    e.g. "SHA256:abc… (ED25519)"; [] when the box does not answer in time."""
    try:
        scan = subprocess.run(["ssh-keyscan", "-T", str(int(TIMEOUT_S)), "-p", str(r.port), r.hostname],
                              capture_output=True, timeout=TIMEOUT_S + 2, stdin=subprocess.DEVNULL)
        if scan.returncode != 0 or not scan.stdout.strip():
            return []
        keys = subprocess.run(["ssh-keygen", "-lf", "-"], input=scan.stdout, capture_output=True,
                              timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return []
    out = []
    for line in keys.stdout.decode("utf-8", "replace").splitlines():
        words = line.split()
        if len(words) >= 3 and words[1].startswith("SHA256:"):
            out.append("%s %s" % (words[1], words[-1]))
    return out[:4]
