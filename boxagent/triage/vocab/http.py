"""HTTP and RPC clients' exceptions (requests, urllib3, httpx/httpcore, aiohttp, grpc, curl,
huggingface_hub/transformers) and the HTTP status lines that mean "the server or the path to it
failed, try again" (RFC 9110: 429, 5xx).

A hub's "not found", "gated" or "offline mode" is no network blip: retrying the same config
fails the same way, so those are code_error (a wrong repo id, a missing token, HF_HUB_OFFLINE)."""
from __future__ import annotations

from boxagent.triage.vocab.table import lit, rx

REQ = "requests 2.32 requests/exceptions.py"
U3 = "urllib3 2.2 urllib3/exceptions.py"
HTTPX = "httpx 0.27 httpx/_exceptions.py (httpcore 1.0 httpcore/_exceptions.py)"
AIO = "aiohttp 3.9 aiohttp/client_exceptions.py"
GRPC = "grpcio 1.64 grpc.StatusCode (src/python/grpcio/grpc/__init__.py)"
GRPC_CORE = "gRPC core 1.64 src/core/client_channel (\"failed to connect to all addresses\")"
HF = "huggingface_hub 0.24 huggingface_hub/errors.py (utils/_errors.py before 0.23)"
TF_HUB = "transformers 4.44 src/transformers/utils/hub.py cached_file"
RFC = "RFC 9110 HTTP Semantics section 15.6 (5xx) and RFC 6585 section 4 (429)"
CURL = "curl 8.8 docs/libcurl/libcurl-errors.md (CURLE_* exit codes)"
PYURL = "CPython 3.12 Lib/urllib/error.py HTTPError.__str__ (\"HTTP Error %s: %s\")"
PYEXC = "CPython 3.12 Objects/exceptions.c (ConnectionError and its subclasses)"
PYHTTP = "CPython 3.12 Lib/http/client.py"
PYSSL = "CPython 3.12 Modules/_ssl.c and Lib/ssl.py (SSLError, SSLEOFError, read timeout)"
REQ_SSL = "requests 2.32 requests/exceptions.py SSLError"
WANDB = "wandb 0.17 wandb/errors/errors.py CommError and wandb/sdk/internal/internal_api.py (\"wandb: Network error\")"
GIT = "git 2.45 http.c / remote-curl.c (\"fatal: unable to access '%s': %s\")"

_S = False
_N = "network_transient"

ROWS = (
    rx(_N, r"Connection(Reset|Refused|Aborted)?Error", "ConnectionRefusedError: [Errno 111] "
       "Connection refused", PYEXC, ("ConnectionError", "ConnectionResetError",
                                     "ConnectionRefusedError", "ConnectionAbortedError"), "python"),
    lit(_N, "RemoteDisconnected", "http.client.RemoteDisconnected: Remote end closed connection "
        "without response", PYHTTP, "python"),
    lit(_N, "SSLError", "requests.exceptions.SSLError: HTTPSConnectionPool(host='huggingface.co', "
        "port=443): Max retries exceeded with url: /api (Caused by SSLError(SSLEOFError(8, 'EOF "
        "occurred in violation of protocol (_ssl.c:1007)')))", REQ_SSL, "http"),
    lit(_N, "EOF occurred in violation of protocol", "ssl.SSLEOFError: EOF occurred in violation "
        "of protocol (_ssl.c:2426)", PYSSL, "python"),
    lit(_N, "The read operation timed out", "TimeoutError: The read operation timed out", PYSSL,
        "python"),
    lit(_N, "Could not resolve host", "curl: (6) Could not resolve host: huggingface.co", CURL,
        "curl"),
    rx(_N, r"wandb: (ERROR )?Network error", "wandb: Network error (ConnectionError), entering "
       "retry loop.", WANDB, ("Network error",), "wandb"),
    lit(_N, "CommError", "wandb.errors.CommError: Run initialization has timed out after 90.0 sec.",
        WANDB, "wandb"),
    lit(_N, "couldn't connect to 'https", "OSError: We couldn't connect to 'https://huggingface.co' "
        "to load this file", TF_HUB, "hf_hub"),
    rx(_N, r"unable to access '[^']*': (Could not|Failed|Recv failure|GnuTLS|OpenSSL)",
       "fatal: unable to access 'https://github.com/x/y.git/': Failed to connect to github.com "
       "port 443 after 21 ms: Couldn't connect to server", GIT, ("unable to access",), "git"),
    lit(_N, "requests.exceptions.ConnectionError",
        "requests.exceptions.ConnectionError: ('Connection aborted.', RemoteDisconnected('Remote "
        "end closed connection without response'))", REQ, "http"),
    lit(_N, "ReadTimeout", "requests.exceptions.ReadTimeout: HTTPSConnectionPool(host='huggingface.co', "
        "port=443): Read timed out. (read timeout=10)", REQ, "http"),
    lit(_N, "ConnectTimeout", "requests.exceptions.ConnectTimeout: HTTPSConnectionPool(host="
        "'cdn-lfs.huggingface.co', port=443): Max retries exceeded", REQ, "http"),
    lit(_N, "ChunkedEncodingError", "requests.exceptions.ChunkedEncodingError: ('Connection broken: "
        "IncompleteRead(0 bytes read)', IncompleteRead(0 bytes read))", REQ, "http"),
    lit(_N, "requests.exceptions.ProxyError",
        "requests.exceptions.ProxyError: HTTPSConnectionPool(host='pypi.org', port=443): Max "
        "retries exceeded with url: /simple/ (Caused by ProxyError('Unable to connect to proxy'))",
        REQ, "http", _S),
    lit(_N, "('Connection aborted.', ", "urllib3.exceptions.ProtocolError: ('Connection aborted.', "
        "ConnectionResetError(104, 'Connection reset by peer'))", U3, "http"),
    lit(_N, "MaxRetryError", "urllib3.exceptions.MaxRetryError: HTTPSConnectionPool(host='s3.amazonaws"
        ".com', port=443): Max retries exceeded with url: /bucket/x", U3, "http"),
    lit(_N, "Max retries exceeded", "HTTPSConnectionPool(host='huggingface.co', port=443): "
        "Max retries exceeded with url: /api/models", U3, "http"),
    lit(_N, "NewConnectionError", "(Caused by NewConnectionError('<urllib3.connection.HTTPSConnection "
        "object at 0x7f>: Failed to establish a new connection: [Errno 111] Connection refused'))",
        U3, "http"),
    lit(_N, "Failed to establish a new connection",
        "Failed to establish a new connection: [Errno -3] Temporary failure in name resolution", U3,
        "http"),
    lit(_N, "NameResolutionError", "urllib3.exceptions.NameResolutionError: <urllib3.connection."
        "HTTPSConnection object>: Failed to resolve 'huggingface.co'", U3, "http"),
    lit(_N, "urllib3.exceptions.ProtocolError",
        "urllib3.exceptions.ProtocolError: Response ended prematurely", U3, "http"),
    lit(_N, "ReadTimeoutError", "urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host="
        "'cdn-lfs.hf.co', port=443): Read timed out.", U3, "http"),
    lit(_N, "ConnectTimeoutError", "urllib3.exceptions.ConnectTimeoutError: (<urllib3.connection."
        "HTTPSConnection object at 0x7f>, 'Connection to pypi.org timed out. (connect timeout=15)')",
        U3, "http"),
    lit(_N, "IncompleteRead", "http.client.IncompleteRead: IncompleteRead(1048576 bytes read, 523 more "
        "expected)", U3, "http"),
    lit(_N, "httpx.ConnectError", "httpx.ConnectError: [Errno 111] Connection refused", HTTPX,
        "http"),
    lit(_N, "httpx.ConnectTimeout", "httpx.ConnectTimeout: timed out", HTTPX, "http"),
    lit(_N, "httpx.ReadError", "httpx.ReadError: [Errno 104] Connection reset by peer", HTTPX,
        "http"),
    lit(_N, "httpx.PoolTimeout", "httpx.PoolTimeout", HTTPX, "http", _S),
    lit(_N, "RemoteProtocolError", "httpx.RemoteProtocolError: Server disconnected without sending a "
        "response.", HTTPX, "http"),
    lit(_N, "Server disconnected without sending a response",
        "httpcore.RemoteProtocolError: Server disconnected without sending a response.", HTTPX,
        "http"),
    lit(_N, "httpcore.ConnectError", "httpcore.ConnectError: [Errno -2] Name or service not known",
        HTTPX, "http"),
    lit(_N, "ClientConnectorError", "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to "
        "host api.wandb.ai:443 ssl:default [Connection reset by peer]", AIO, "http"),
    lit(_N, "Cannot connect to host", "Cannot connect to host huggingface.co:443 ssl:default "
        "[Temporary failure in name resolution]", AIO, "http"),
    lit(_N, "ServerDisconnectedError", "aiohttp.client_exceptions.ServerDisconnectedError: Server "
        "disconnected", AIO, "http"),
    lit(_N, "ClientPayloadError", "aiohttp.client_exceptions.ClientPayloadError: Response payload is "
        "not completed", AIO, "http"),
    lit(_N, "ServerTimeoutError", "aiohttp.client_exceptions.ServerTimeoutError: Timeout on reading "
        "data from socket", AIO, "http"),
    lit(_N, "ClientOSError", "aiohttp.client_exceptions.ClientOSError: [Errno 104] Connection reset by "
        "peer", AIO, "http"),
    lit(_N, "StatusCode.UNAVAILABLE", "grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that "
        "terminated with: status = StatusCode.UNAVAILABLE", GRPC, "grpc"),
    lit(_N, "StatusCode.DEADLINE_EXCEEDED", "status = StatusCode.DEADLINE_EXCEEDED details = \"Deadline "
        "Exceeded\"", GRPC, "grpc", _S),
    lit(_N, "failed to connect to all addresses", "details = \"failed to connect to all addresses; last "
        "error: UNAVAILABLE: ipv4:10.0.0.2:50051: Connection refused\"", GRPC_CORE, "grpc"),
    lit(_N, "HfHubHTTPError", "huggingface_hub.utils._errors.HfHubHTTPError: 504 Server Error: Gateway "
        "Time-out for url: https://huggingface.co/api/models/x", HF, "hf_hub", _S),
    lit(_N, "LocalEntryNotFoundError", "huggingface_hub.errors.LocalEntryNotFoundError: An error "
        "happened while trying to locate the file on the Hub and we cannot find the requested files "
        "in the local cache.", HF, "hf_hub"),
    lit(_N, "cannot find the requested files in the cached path",
        "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it "
        "in the cached files and it looks like gpt2 is not the path to a directory containing a file "
        "named config.json. Connection error, and we cannot find the requested files in the cached "
        "path.", TF_HUB, "hf_hub"),
    lit("code_error", "OfflineModeIsEnabled", "huggingface_hub.errors.OfflineModeIsEnabled: Cannot "
        "reach https://huggingface.co/api/models/gpt2: offline mode is enabled.", HF, "hf_hub"),
    lit("code_error", "GatedRepoError", "huggingface_hub.errors.GatedRepoError: 401 Client Error. "
        "Cannot access gated repo for url https://huggingface.co/meta-llama/x/resolve/main/config.json.",
        HF, "hf_hub"),
    lit("code_error", "RepositoryNotFoundError", "huggingface_hub.errors.RepositoryNotFoundError: 404 "
        "Client Error. Repository Not Found for url: https://huggingface.co/api/models/x", HF, "hf_hub"),
    lit("code_error", "RevisionNotFoundError", "huggingface_hub.errors.RevisionNotFoundError: 404 "
        "Client Error. Revision Not Found for url", HF, "hf_hub"),
    lit("code_error", "EntryNotFoundError: 404", "huggingface_hub.errors.EntryNotFoundError: 404 Client "
        "Error. Entry Not Found for url: https://huggingface.co/x/resolve/main/model.safetensors",
        HF, "hf_hub"),
    rx(_N, r"HTTP Error (429|5[0-9][0-9]): ", "urllib.error.HTTPError: HTTP Error 503: Service "
       "Unavailable", PYURL + "; " + RFC, ("HTTP Error 429: ", "HTTP Error 5"), "http"),
    rx(_N, r"429 Client Error: Too Many Requests",
       "requests.exceptions.HTTPError: 429 Client Error: Too Many Requests for url: "
       "https://huggingface.co/api/models/x", REQ + " Response.raise_for_status; " + RFC,
       ("429 Client Error",), "http"),
    rx(_N, r"HTTPError: 5[0-9][0-9]", "urllib.error.HTTPError: HTTPError: 503 Service Unavailable",
       PYURL + "; " + RFC, ("HTTPError: 5",), "http"),
    lit(_N, "429 Too Many Requests", "HTTP/1.1 429 Too Many Requests", RFC, "http"),
    lit(_N, "Service Unavailable", "HTTP/1.1 503 Service Unavailable", RFC, "http"),
    lit(_N, "Bad Gateway", "HTTP/1.1 502 Bad Gateway", RFC, "http"),
    rx(_N, r"Gateway Time-?out", "HTTP/1.1 504 Gateway Timeout", RFC, ("Gateway",), "http"),
    rx(_N, r"5[0-9][0-9] Server Error",
       "requests.exceptions.HTTPError: 502 Server Error: Bad Gateway for url: https://x/y",
       REQ + " Response.raise_for_status; " + RFC, ("Server Error",), "http"),
    lit(_N, "503 Service Unavailable", "<html><head><title>503 Service Unavailable</title></head>",
        RFC, "http"),
    lit(_N, "502 Bad Gateway", "<center><h1>502 Bad Gateway</h1></center>", RFC, "http"),
    lit(_N, "504 Gateway Time-out", "<center><h1>504 Gateway Time-out</h1></center>", RFC, "http"),
    rx(_N, r"curl: \((6|7|18|28|35|52|56)\) ",
       "curl: (56) Recv failure: Connection reset by peer", CURL, ("curl: (",), "curl"),
)
