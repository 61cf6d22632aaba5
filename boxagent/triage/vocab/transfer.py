"""Copying data onto and off the box: rsync's exit reasons and OpenSSH's client words for a
connection that dropped.

rsync ends with "rsync error: <reason> (code N) at file.c(line) [who=version]"; the reasons
for a socket, a protocol stream or a timeout are the link between the hosts failing
(transient: the same copy resumes with --partial); running out of buffers is host memory. An
errno line before it (No space left on device) is the cause when there is one, and its class
ranks above these. OpenSSH's client says the connection was closed or the server stopped
answering: the network or the far host, not the job's code.
"""
from __future__ import annotations

from boxagent.triage.vocab.table import rx

RSYNC = ("rsync 3.2.7 log.c rerr_names (RERR_SOCKETIO \"error in socket IO\" 10, RERR_STREAMIO \"error "
         "in rsync protocol data stream\" 12, RERR_MALLOC \"error allocating core memory buffers\" "
         "22, RERR_TIMEOUT \"timeout in data send/receive\" 30, RERR_CONTIMEOUT \"timeout waiting "
         "for daemon connection\" 35) and rwrite (\"rsync error: %s (code %d) at %s(%d) [%s=%s]\")")
SSH = ("OpenSSH 9.6 clientloop.c (\"Connection to %.64s closed by remote host.\", \"Timeout, server "
       "%s not responding.\", \"client_loop: send disconnect: %s\")")

_N = "network_transient"
_S = False

ROWS = (
    rx(_N, r"rsync error: (error in socket IO|error in rsync protocol data stream|timeout in data "
       r"send/receive|timeout waiting for daemon connection) \(code [0-9]+\)",
       "rsync error: error in socket IO (code 10) at io.c(785) [sender=3.2.7]", RSYNC,
       ("error in socket IO", "error in rsync protocol data stream", "timeout in data send/receive",
        "timeout waiting for daemon connection"), "rsync", _S),
    rx("cgroup_oom", r"rsync error: error allocating core memory buffers \(code 22\)",
       "rsync error: error allocating core memory buffers (code 22) at util2.c(106) [sender=3.1.3]",
       RSYNC, ("error allocating core memory buffers",), "rsync", _S),
    rx(_N, r"Connection to [^ ]+ closed by remote host|Timeout, server [^ ]+ not responding|"
       r"client_loop: send disconnect: ",
       "Connection to 203.0.113.7 closed by remote host.", SSH,
       ("closed by remote host", "not responding", "client_loop: send disconnect: "), "ssh", _S),
)
