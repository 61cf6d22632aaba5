"""The .NET runtime's HttpClient: the GitHub Actions and Azure Pipelines runners are .NET
programs, so a download the runner itself makes (an action's tarball, an artifact) times out
in HttpClient's words."""
from __future__ import annotations

from boxagent.triage.vocab.table import found_via, rx

HTTPCLIENT = ("dotnet/runtime 8.0 src/libraries/System.Net.Http/src/Resources/Strings.resx "
              "net_http_request_timedout (\"The request was canceled due to the configured "
              "HttpClient.Timeout of {0} seconds elapsing.\")")

ROWS = found_via(
    ("wave4/cases/network_transient/b-pytorch-108524-gha-action-download-timeout.log",),
    rx("network_transient", r"canceled due to the configured HttpClient\.Timeout of [0-9.]+ "
       r"seconds elapsing", "System.Threading.Tasks.TaskCanceledException: The request was "
       "canceled due to the configured HttpClient.Timeout of 100 seconds elapsing.", HTTPCLIENT,
       ("configured HttpClient.Timeout of",), "dotnet"),
)
