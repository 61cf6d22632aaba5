"""A traceback the log ends in, cut before its exception line, is read by the code it stopped
in: the network stack's (the standard library's sockets/TLS/HTTP client, urllib3, requests'
adapter, httpcore, aiohttp's connector, pip's downloader) is the network's failure; any other
code's is the job's. The frames are CPython's format (Lib/traceback.py), the module paths the
packages' own layout. An exit-0 run that printed the same frames decides nothing."""
from __future__ import annotations

import pytest

from boxagent.triage import cuttrace
from boxagent.triage.cli import report

HEADER = "Traceback (most recent call last):"


def _cause(tmp_path, text: str, exit_code: int = 1):
    p = tmp_path / "x.log"
    p.write_text(text, encoding="utf-8")
    return report(str(p), exit_code, [], "auto", None, probe_disks=False)["cause"]


def _frame(path: str, line: int, func: str, code: str) -> str:
    return '  File "%s", line %d, in %s\n    %s\n' % (path, line, func, code)


SITE = "/opt/conda/lib/python3.10/site-packages/"
LIB = "/opt/conda/lib/python3.10/"
OUTER = _frame("/work/train.py", 41, "<module>", "fetch(url)")

NETWORK_INNERMOST = [
    # CPython 3.10 Lib/http/client.py HTTPConnection.request -> _send_request
    _frame(LIB + "http/client.py", 1282, "request",
           "self._send_request(method, url, body, headers, encode_chunked)"),
    # CPython Lib/socket.py create_connection
    _frame(LIB + "socket.py", 845, "create_connection", "raise err"),
    # CPython Lib/ssl.py SSLSocket.recv_into
    _frame(LIB + "ssl.py", 1274, "recv_into", "return self.read(nbytes, buffer)"),
    # urllib3 2.x response.py HTTPResponse._error_catcher
    _frame(SITE + "urllib3/response.py", 710, "_error_catcher", "yield"),
    # urllib3 1.26 util/connection.py create_connection
    _frame(SITE + "urllib3/util/connection.py", 85, "create_connection", "sock.connect(sa)"),
    # requests 2.31 adapters.py HTTPAdapter.send
    _frame(SITE + "requests/adapters.py", 486, "send", "resp = conn.urlopen("),
    # httpcore 1.0 _sync/connection.py
    _frame(SITE + "httpcore/_sync/connection.py", 124, "_connect",
           "stream = self._network_backend.connect_tcp(**kwargs)"),
    # aiohttp 3.9 connector.py TCPConnector._wrap_create_connection
    _frame(SITE + "aiohttp/connector.py", 1025, "_wrap_create_connection",
           "return await self._loop.create_connection(*args, **kwargs)"),
    # pip 23 _internal/network/download.py, on Windows
    _frame("C:\\venv\\lib\\site-packages\\pip\\_internal\\network\\download.py", 160,
           "__call__", "for chunk in chunks:"),
    # pip's vendored cachecontrol reading the HTTP body
    _frame("C:\\venv\\lib\\site-packages\\pip\\_vendor\\cachecontrol\\filewrapper.py", 90,
           "read", "data = self.__fp.read(amt)"),
]


@pytest.mark.parametrize("innermost", NETWORK_INNERMOST)
def test_a_traceback_cut_in_the_network_stack_is_the_networks_failure(tmp_path, innermost):
    c = _cause(tmp_path, "Downloading model\n" + HEADER + "\n" + OUTER + innermost)
    assert c["class"] == "network_transient", c
    assert c["confidence"] == "medium" and c["runner_up"] == "code_error", c
    assert "cut before its exception line" in c["summary"], c


def test_a_chained_traceback_cut_right_under_its_header_is_read_by_the_one_above(tmp_path):
    text = (HEADER + "\n" + OUTER + _frame(SITE + "urllib3/connection.py", 174, "_new_conn",
                                           "conn = connection.create_connection(") +
            "socket.timeout: timed out\n\n"
            "During handling of the above exception, another exception occurred:\n\n" + HEADER + "\n")
    c = _cause(tmp_path, text)
    assert c["class"] == "network_transient", c


def test_a_traceback_cut_in_the_jobs_own_code_stays_the_jobs(tmp_path):
    c = _cause(tmp_path, HEADER + "\n" + OUTER + _frame("/work/model.py", 9, "forward",
                                                        "x = self.proj(x)"))
    assert c["class"] == "code_error", c


def test_a_traceback_with_its_exception_line_is_decided_by_that_line(tmp_path):
    text = (HEADER + "\n" + OUTER + _frame(SITE + "urllib3/response.py", 710, "_error_catcher",
                                           "yield") + "KeyError: 'labels'\n")
    c = _cause(tmp_path, text)
    assert c["class"] == "code_error", c


def test_a_run_that_ended_0_is_no_failure_whatever_frames_it_printed(tmp_path):
    text = "Downloading model\n" + HEADER + "\n" + OUTER + NETWORK_INNERMOST[3]
    assert _cause(tmp_path, text, exit_code=0) is None


def test_output_after_the_frames_means_the_traceback_was_not_cut():
    lines = (HEADER + "\n" + OUTER + NETWORK_INNERMOST[0] + "step 12 loss 0.31\n").splitlines()
    assert cuttrace.network_cut(lines) is None


# CPython 3.10 Lib/asyncio/tasks.py wait_for: the awaited task is cancelled (CancelledError in
# it) and TimeoutError is raised from it; the client's own network error came first.
@pytest.mark.parametrize("network_line", [
    "wandb: Network error (ConnectTimeout), entering retry loop.",
    "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.example.com', port=443): "
    "Max retries exceeded with url: /v1 (Caused by NewConnectionError('<urllib3.connection."
    "HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno 111] "
    "Connection refused'))",
])
@pytest.mark.parametrize("consequence", [
    "asyncio.exceptions.CancelledError",
    "concurrent.futures._base.CancelledError",
    "asyncio.exceptions.TimeoutError",
])
def test_a_network_error_explains_the_cancel_of_the_wait_on_it(tmp_path, network_line,
                                                               consequence):
    text = (network_line + "\n" + HEADER + "\n" +
            _frame(LIB + "asyncio/tasks.py", 458, "wait_for", "fut.result()") + consequence + "\n")
    c = _cause(tmp_path, text)
    assert c["class"] == "network_transient", c


def test_a_cancel_with_no_network_error_before_it_stays_the_jobs(tmp_path):
    text = (HEADER + "\n" + _frame(LIB + "asyncio/tasks.py", 458, "wait_for", "fut.result()") +
            "asyncio.exceptions.CancelledError\n")
    assert _cause(tmp_path, text)["class"] != "network_transient"


# rich 13 rich/traceback.py: the stack in a rounded box, each frame `PATH:LINE in FUNC`, the
# failing line marked ❱, the exception line under the box's bottom edge
def _rich_box(path: str, line: int, func: str, code: str) -> str:
    w = 98
    row = lambda t: "\u2502 " + t.ljust(w - 2) + " \u2502\n"      # noqa: E731
    return ("\u256d" + " Traceback (most recent call last) ".center(w, "\u2500") + "\u256e\n" +
            row("/work/train.py:41 in <module>") + row("") +
            row("%s:%d in %s" % (path, line, func)) + row("") +
            row("\u2771 %4d %s" % (line, code)))


def test_a_rich_traceback_cut_inside_its_box_is_the_jobs_crash_in_its_last_frame(tmp_path):
    text = _rich_box("F:\\venv\\lib\\site-packages\\bitsandbytes\\functional.py", 13,
                     "<module>", "import bitsandbytes.cextension as lib")
    c = _cause(tmp_path, text)
    assert c["class"] == "code_error" and "functional.py:13 in <module>" in c["summary"], c


def test_a_rich_traceback_cut_in_the_network_stack_is_the_networks_failure(tmp_path):
    c = _cause(tmp_path, _rich_box(SITE + "urllib3/connectionpool.py", 715, "urlopen",
                                   "httplib_response = self._make_request("))
    assert c["class"] == "network_transient", c


def test_a_rich_box_closed_and_followed_by_output_is_not_cut():
    lines = (_rich_box("/work/model.py", 9, "forward", "x = self.proj(x)") +
             "\u2570" + "\u2500" * 98 + "\u256f\nKeyError: 'labels'\n").splitlines()
    assert cuttrace.cut_traceback(lines) is None
