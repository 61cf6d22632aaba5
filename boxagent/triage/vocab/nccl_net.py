"""NCCL's socket transport and bootstrap (the TCP side that every NCCL job uses to find its
peers, whatever the data path): the WARN lines of misc/socket.cc (include/socket.h before
2.12), the proxy service's, and the check macro of nccl-tests that many programs copy. These
words are NCCL's own verdict on its connections: "Connection refused" or "closed by remote
peer" in such a line is a collective's peer failing, not a download."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, lit, rx

SOCK = "NCCL 2.18 src/misc/socket.cc (WARN lines)"
SOCK_OLD = "NCCL 2.4-2.11 src/include/socket.h (WARN lines)"
PROXY = "NCCL 2.18 src/proxy.cc (proxy service WARN lines)"
BOOT = "NCCL 2.18 src/bootstrap.cc and src/misc/socket.cc (interface selection)"
TESTS = ("nccl-tests src/common.h NCCLCHECK (b188a15, 2017: \"NCCL failure %s:%d '%s'\"; v2.9-v2.19: "
         "\"%s: Test NCCL failure %s:%d '%s'\"), the message of ncclGetErrorString")

_N = "cases/nccl/"

ROWS = found_via(
    (_N + "nccl-975-bootstrap-ipv6-connect-abort.log", _N + "sglang-5594-nccl-connect-abort-scheduler.log"),
    lit("nccl", "socketStartConnect: Connect to",
        "n122:12251:12400 [5] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to "
        "10.0.0.82<38455> failed : Software caused connection abort", SOCK, "nccl"),
    rx("nccl", r"socket(StartConnect|PollConnect): exceeded (retries|timeouts)",
       "gpu1:311:402 [0] misc/socket.cc:466 NCCL WARN socketStartConnect: exceeded retries (20000)",
       SOCK, ("StartConnect: exceeded", "PollConnect: exceeded"), "nccl"),
    lit("nccl", "socketPollConnect poll() failed with error",
        "NCCL WARN socketPollConnect poll() failed with error Interrupted system call", SOCK, "nccl"),
    rx("nccl", r"NCCL WARN Connect to .* failed : ",
       "node1:6601:6625 [0] include/socket.h:390 NCCL WARN Connect to 10.1.1.2<43117> failed : "
       "Connection refused", SOCK_OLD, ("NCCL WARN Connect to",), "nccl"),
    lit("nccl", "socketTryAccept: Accept failed",
        "NCCL WARN socketTryAccept: Accept failed: Too many open files", SOCK, "nccl"),
    lit("nccl", "Bootstrap : no socket interface found",
        "NCCL WARN Bootstrap : no socket interface found", BOOT, "nccl"),
    lit("nccl", "NET/Socket : No usable listening interface found",
        "NCCL WARN NET/Socket : No usable listening interface found", BOOT, "nccl"),
    lit("nccl", "Net : No interface found in the same subnet as remote address",
        "NCCL WARN Net : No interface found in the same subnet as remote address 10.0.0.3<41467>",
        SOCK, "nccl"),
) + found_via(
    (_N + "nccl-tests-166-proxy-connect-closed-by-peer.log",),
    lit("nccl", "socketProgress: Connection closed by remote peer",
        "ubuntu:39964:40044 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by "
        "remote peer node1<57557>", SOCK, "nccl"),
    lit("nccl", "socketProgressOpt: Call to recv from",
        "NCCL WARN socketProgressOpt: Call to recv from 10.0.0.2<36519> failed : Connection reset by "
        "peer", SOCK, "nccl"),
    rx("nccl", r"\[Proxy Service [0-9]+\] Failed to execute operation ",
       "ubuntu:39964:40075 [0] proxy.cc:1519 NCCL WARN [Proxy Service 0] Failed to execute operation "
       "Connect from rank 0, retcode 2", PROXY, ("] Failed to execute operation ",), "nccl"),
    lit("nccl", "Socket recv failed while polling for opId",
        "ubuntu:39964:40044 [0] proxy.cc:1143 NCCL WARN Socket recv failed while polling for "
        "opId=0x7f6f18cb7f40", PROXY, "nccl"),
) + found_via(
    (_N + "nccl-tests-15-closed-by-remote-peer.log",),
    lit("nccl", "Net : Connection closed by remote peer",
        "server1:6601:6625 [0] include/socket.h:385 NCCL WARN Net : Connection closed by remote peer",
        SOCK_OLD, "nccl"),
    rx("nccl", r"NCCL WARN Call to recv failed : ",
       "NCCL WARN Call to recv failed : Connection reset by peer", SOCK_OLD,
       ("WARN Call to recv failed",), "nccl"),
) + found_via(
    (_N + "nccl-111-connect-refused-unhandled-system-error.log", _N + "nccl-tests-15-closed-by-remote-peer.log"),
    rx("nccl", r"NCCL failure [^ ]+:[0-9]+ '",
       "NCCL failure common.cu:921 'unhandled system error'", TESTS, ("NCCL failure ",), "nccl"),
) + found_via(
    (_N + "pytorch-38702-nccl-connect-refused-retrying.log",),
    # logged while it retries: a peer not up yet; a failure only when the job then dies
    rx("nccl", r"NCCL INFO Call to connect returned .*, retrying",
       "tj1:941227:943077 [0] NCCL INFO Call to connect returned Connection refused, retrying",
       SOCK + "; " + SOCK_OLD, ("Call to connect returned",), "nccl", False),
)
