"""libcurl's own failure texts (its failf() strings), as the programs that link it pass them on
without curl's exit-code line: Julia's Downloads.jl (RequestError with `code` and `message`), R's
curl package, git. http.py has the curl command's lines."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

LIBCURL = ("curl 8.8 lib/vtls/openssl.c ossl_connect_common (failf(data, \"SSL connection "
           "timeout\")), lib/connect.c (\"Connection timed out after %ld milliseconds\"), "
           "lib/multi.c (\"Operation timed out after %ld milliseconds with %ld bytes received\"), "
           "Julia 1.10 Downloads.jl src/Downloads.jl RequestError")

ROWS = found_via(
    ("wave4/cases/network_transient/julia-52142-pkg-registries-ssl-connection-timeout.log",),
    rx("network_transient", r"SSL connection timeout|(Connection|Operation|Resolving) timed out "
       r"after [0-9]+ milliseconds",
       "RequestError: SSL connection timeout while requesting https://pkg.julialang.org/registries",
       LIBCURL, ("SSL connection timeout", "timed out after "), "libcurl"),
)
