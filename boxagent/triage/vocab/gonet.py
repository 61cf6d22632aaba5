"""Go's network errors, as Go tools print them (docker pulls, containerd, kubelet, ollama,
the Hugging Face and S3 clients written in Go): `dial tcp 1.2.3.4:443: i/o timeout`,
`lookup registry-1.docker.io on 127.0.0.53:53: no such host`. The errno words under them
(`connect: connection refused`) are errno's rows, in Go's lower-case spelling."""
from __future__ import annotations

from typing import Tuple

from boxagent.triage.vocab.table import Row, found_via, lit, rx

POLL = "Go 1.22 src/internal/poll/fd.go (ErrDeadlineExceeded: \"i/o timeout\")"
DNS = ("Go 1.22 src/net/net.go and dnsclient_unix.go (DNSError: errNoSuchHost \"no such host\", "
       "errServerMisbehaving \"server misbehaving\")")
HTTP = ("Go 1.22 src/net/http/transport.go (\"net/http: TLS handshake timeout\") and client.go "
        "(\"(Client.Timeout exceeded while awaiting headers)\")")

CTX = ("Go 1.22 src/context/context.go (DeadlineExceeded: \"context deadline exceeded\") as "
       "net/http's url.Error prints it (\"Get \\\"URL\\\": ...\")")

_N = "network_transient"

ROWS: Tuple[Row, ...] = (
    rx(_N, r"(dial|read|write) (tcp|udp)[46]? [^ ]*: i/o timeout",
       "Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp "
       "54.236.113.205:443: i/o timeout", POLL, (": i/o timeout",), "go"),
    rx(_N, r"lookup [^ ]+ on [^ ]+: (no such host|server misbehaving|i/o timeout)",
       "Error: pull model manifest: Get \"https://registry.ollama.ai/v2/library/llama3/manifests/"
       "latest\": dial tcp: lookup registry.ollama.ai on 127.0.0.53:53: no such host", DNS,
       ("lookup ",), "go"),
    rx(_N, r"lookup [^ ]+: no such host", "dial tcp: lookup huggingface.co: no such host", DNS,
       (": no such host",), "go"),
    lit(_N, "net/http: TLS handshake timeout",
        "Error response from daemon: Get \"https://registry-1.docker.io/v2/\": net/http: TLS "
        "handshake timeout", HTTP, "go"),
    lit(_N, "Client.Timeout exceeded while awaiting headers",
        "Get \"https://registry-1.docker.io/v2/\": net/http: request canceled while waiting for "
        "connection (Client.Timeout exceeded while awaiting headers)", HTTP, "go"),
    rx(_N, r"(Get|Head|Post|Put) \"https?://[^\"]*\": context deadline exceeded",
       "Error response from daemon: Get \"https://nvcr.io/v2/\": context deadline exceeded", CTX,
       (": context deadline exceeded",), "go"),
    lit(_N, "request canceled while waiting for connection",
        "net/http: request canceled while waiting for connection", HTTP, "go"),
)

# An OpError without an address (the dial timed out while it was still resolving the name):
# Go prints the op and the network only.
OPERR = ("Go 1.22 src/net/net.go (*OpError).Error (op + \" \" + net, then \" \" + Addr only when "
         "Addr != nil, then \": \" + Err)")

ROWS += found_via(
    ("wave4/cases/network_transient/kube-scheduler-sim-136-docker-go-mod-download-io-timeout.log",),
    rx(_N, r"(dial|read|write) (tcp|udp)[46]?: i/o timeout",
       "go: github.com/golang/mock@v1.4.4: Get \"https://proxy.golang.org/github.com/golang/mock/"
       "@v/v1.4.4.mod\": dial tcp: i/o timeout", OPERR, (": i/o timeout",), "go"),
)
