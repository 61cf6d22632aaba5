"""A real OpenSSH server on 127.0.0.1 for tests (openssh-server; .ci/run installs it).

start_sshd(tmp) -> SshServer with an ssh config file holding the alias `rgt-box` (and more
aliases on request), a temp host key and a temp authorized key. Runs as the current user
(root in CI). `sftp=False` removes the sftp subsystem, like RunPod's proxied SSH.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/bin/sshd", "/sbin/sshd")


def sshd_binary() -> str | None:
    for c in SSHD_CANDIDATES:
        if os.access(c, os.X_OK):
            return c
    return shutil.which("sshd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SshServer:
    proc: subprocess.Popen
    port: int
    config: Path          # ssh client config (-F) with the aliases
    key: Path
    dir: Path
    alias: str = "rgt-box"

    def ssh(self, *cmd: str, alias: str | None = None, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(["ssh", "-F", str(self.config), alias or self.alias, "--", *cmd],
                              capture_output=True, **kw)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def alias_names(n: int, prefix: str = "rgt-box") -> tuple[str, ...]:
    """rgt-box, rgt-box2, ... rgt-boxN (benchmarks use many aliases of the one sshd)."""
    return tuple(prefix if i == 1 else "%s%d" % (prefix, i) for i in range(1, n + 1))


def add_alias(server: "SshServer", alias: str, port: int | None = None, config: Path | None = None) -> Path:
    """Append an alias to (a copy of) the server's ssh config; port=a closed one for unreachable tests."""
    cfg = config or server.config
    block = "\n".join([
        "Host %s" % alias, "  HostName 127.0.0.1", "  Port %d" % (port or server.port), "  User %s" % _user(),
        "  IdentityFile %s" % server.key, "  IdentitiesOnly yes", "  StrictHostKeyChecking no",
        "  UserKnownHostsFile /dev/null", "  LogLevel ERROR", "  ControlMaster no", "  ConnectTimeout 5",
    ])
    text = cfg.read_text() if cfg.exists() else server.config.read_text()
    cfg.write_text(text + "\n" + block + "\n")
    return cfg


def counting_ssh(bin_dir: Path, count_file: Path) -> Path:
    """A `ssh` wrapper for the front of PATH that appends one line per invocation, then execs ssh."""
    real = shutil.which("ssh")
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "ssh"
    wrapper.write_text("#!/bin/sh\necho x >> '%s'\nexec '%s' \"$@\"\n" % (count_file, real))
    wrapper.chmod(0o755)
    return bin_dir


def start_sshd(tmp: Path, sftp: bool = True, aliases: tuple[str, ...] = ("rgt-box",)) -> SshServer:
    binary = sshd_binary()
    if not binary:
        raise RuntimeError("sshd not installed (apt-get install openssh-server)")
    tmp.mkdir(parents=True, exist_ok=True)
    os.chmod(tmp, 0o700)
    hostkey, userkey = tmp / "host_ed25519", tmp / "id_ed25519"
    for k in (hostkey, userkey):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(k)], check=True)
    auth = tmp / "authorized_keys"
    shutil.copy(str(userkey) + ".pub", auth)
    os.chmod(auth, 0o600)
    Path("/run/sshd").mkdir(exist_ok=True)  # privilege-separation dir sshd insists on
    port = free_port()
    lines = [
        "Port %d" % port, "ListenAddress 127.0.0.1", "HostKey %s" % hostkey,
        "AuthorizedKeysFile %s" % auth, "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "PubkeyAuthentication yes", "PermitRootLogin yes", "StrictModes no", "UsePAM no",
        "PidFile %s" % (tmp / "sshd.pid"), "LogLevel ERROR", "MaxStartups 100:30:200", "MaxSessions 100",
        "AcceptEnv LANG LC_*", "PrintMotd no",
    ]
    if sftp:
        lines.append("Subsystem sftp internal-sftp")
    (tmp / "sshd_config").write_text("\n".join(lines) + "\n")
    log = open(tmp / "sshd.log", "wb")
    proc = subprocess.Popen([binary, "-D", "-e", "-f", str(tmp / "sshd_config")], stdout=log, stderr=log)
    cfg = tmp / "ssh_config"
    blocks = []
    for a in aliases:
        blocks.append("\n".join([
            "Host %s" % a, "  HostName 127.0.0.1", "  Port %d" % port, "  User %s" % _user(),
            "  IdentityFile %s" % userkey, "  IdentitiesOnly yes", "  StrictHostKeyChecking no",
            "  UserKnownHostsFile /dev/null", "  LogLevel ERROR", "  ControlMaster no",
        ]))
    cfg.write_text("\n\n".join(blocks) + "\n")
    server = SshServer(proc, port, cfg, userkey, tmp, aliases[0])
    deadline = time.time() + 10
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("sshd exited: %s" % (tmp / "sshd.log").read_text())
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.05)
    return server


def _user() -> str:
    import pwd
    return pwd.getpwuid(os.getuid()).pw_name
