"""Secrets never in errors: an ntfy token with CR/LF inside or a trailing newline was printed
whole in `last_error` (notify-test, status.json, status --json, the outbox), escaped by the HTTP
library that refused it. One redaction (boxagent/base/redact.py) masks every form of it."""
from __future__ import annotations

import json

import pytest

from boxagent.base.redact import Redactor, forms
from tests.realbox import job, wait_for

TOKEN_PARTS = ("tokQx81ab", "en7Zsecret")


@pytest.mark.parametrize("token", ["tokQx81ab\r\nen7Zsecret", "tokQx81ab\nen7Zsecret\n", "tokQx81ab\ren7Zsecret\r\n"])
def test_a_token_with_cr_lf_is_masked_in_every_spelling(token):
    r = Redactor([token])
    for text in (token, repr(token), json.dumps(token), "Bearer %r" % token, token.strip(),
                 "header value: 'Bearer %s'" % token.encode("unicode_escape").decode()):
        out = r.scrub("error: " + text)
        assert not any(part in out for part in TOKEN_PARTS), out
    assert all(len(f) >= 4 for f in forms("ab\ncd\nlongerpart"))    # no 2-letter mask of ordinary words


def _set(box, url):
    out = box.agent("notify-set", stdin=json.dumps({"notify": [{"url": url}]}))
    assert out.returncode == 0, out.stderr


def test_a_secret_in_an_error_never_reaches_notify_test_status_or_the_outbox(box, receiver):
    """The field repro: ntfy://TOKEN@host/topic with %0D%0A inside the token and a trailing %0A."""
    _set(box, "ntfy://tokQx81ab%%0D%%0Aen7Zsecret%%0A@127.0.0.1:%d/topic-abc" % receiver.port)
    out = box.agent("notify-test", "--json")
    assert out.returncode == 1 and "Invalid" in out.stdout, out.stdout
    assert not any(p in out.stdout + out.stderr for p in TOKEN_PARTS), out.stdout
    box.start()
    assert box.submit(job("r", box.workdir, {"name": "s", "run": "false"})).returncode == 0
    box.wait_run("r")
    wait_for(lambda: (box.status_file().get("notifications") or {}).get("last_error"), 20, "a failed send")
    texts = [(box.home / "status.json").read_text(), box.agent("status", "--json").stdout]
    texts += [p.read_text() for p in (box.home / "outbox").rglob("*") if p.is_file()]
    texts += [(box.home / "daemon.log").read_text()]
    for text in texts:
        assert not any(p in text for p in TOKEN_PARTS), text[:2000]


RELAY_PARTS = ("re1ayQ", "P4thZk", "T0kenW")
BASE_PATHS = ["re1ayQP4thZk\r\nT0kenW", "re1ayQ\r\nP4thZkT0kenW", "re1ayQP4thZkT0kenW\r\n",
              "re1ayQ\tP4thZk\nT0kenW", "re1ayQ%0D%0AP4thZkT0kenW\r"]


@pytest.mark.parametrize("path", BASE_PATHS)
@pytest.mark.parametrize("url", ["ntfy://127.0.0.1:{port}/topic-abc", "slack://T1/B1/XXXX", "json://127.0.0.1/hook"])
def test_a_base_url_with_cr_lf_never_reaches_notify_test(box, receiver, url, path):
    """The field repro: CR/LF in a relay base_url's path; the HTTP library refused it and quoted
    the path up to the CR into last_error, notify-test and the outbox."""
    base = "http://127.0.0.1:%d/%s" % (receiver.port, path)
    out = box.agent("notify-set", stdin=json.dumps({"notify": [{"url": url.format(port=receiver.port),
                                                                 "base_url": base}]}))
    assert out.returncode == 0, out.stderr
    out = box.agent("notify-test", "--json")
    assert not any(p in out.stdout + out.stderr for p in RELAY_PARTS), out.stdout


def test_a_base_url_with_cr_lf_never_reaches_status_the_outbox_or_the_log(box, receiver):
    base = "http://127.0.0.1:%d/%s" % (receiver.port, BASE_PATHS[0])
    out = box.agent("notify-set", stdin=json.dumps({"notify": [{"url": "ntfy://127.0.0.1:1/topic-abc",
                                                                 "base_url": base}]}))
    assert out.returncode == 0, out.stderr
    box.start()
    assert box.submit(job("r", box.workdir, {"name": "s", "run": "false"})).returncode == 0
    box.wait_run("r")
    wait_for(lambda: (box.status_file().get("notifications") or {}).get("last_error"), 20, "a failed send")
    texts = [(box.home / "status.json").read_text(), box.agent("status", "--json").stdout,
             box.agent("status").stdout, (box.home / "daemon.log").read_text()]
    texts += [p.read_text() for p in (box.home / "outbox").rglob("*") if p.is_file()]
    for text in texts:
        assert not any(p in text for p in RELAY_PARTS), text[:2000]


# A notify URL's credentials travel to the receiver in another spelling than the URL's: an HTTP
# library's debug log prints the header it sent (`Authorization: Basic base64(user:pass)`), and
# that form once passed every redaction: only the URL, `user` and `pass` were learned.
WIRE_URLS = ["ntfy://alice:s3cr3tPw4711@127.0.0.1:{port}/topic-abc",
             "ntfy://al%40ice.example:s3cr%2F3t%3APw~4711@127.0.0.1:{port}/topic-abc",
             "json://hookuser:Hk-pa55word-99@127.0.0.1:{port}/hook",
             "json://onlyauser99@127.0.0.1:{port}/hook",
             "ntfy://tk_AbCdEfGh12345678@127.0.0.1:{port}/topic-abc"]


@pytest.mark.parametrize("url", WIRE_URLS)
def test_every_form_a_notify_credential_travels_in_is_learned(box, receiver, url):
    """The real sender's Authorization header, as the real receiver got it, is masked by what the
    box learns (its own errors) and by what the MCP server learns (`notify_secret_strings`)."""
    from boxagent.api import notify_secret_strings
    from rgt_client.mcp.safety import redact
    url = url.format(port=receiver.port)
    _set(box, url)
    out = box.agent("notify-test", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    sent = [r.headers.get("Authorization") for r in receiver.requests]
    assert sent and all(sent), sent
    learned = notify_secret_strings([{"url": url}])
    box_side = Redactor(learned)
    for header in sent:
        credential = header.split(" ", 1)[1]
        for line in ("send: Authorization: %s" % header, "{'Authorization': '%s'}" % header,
                     "header %s" % credential.rstrip("=")):
            assert credential.rstrip("=") not in box_side.scrub(line), (header, line)
            assert credential.rstrip("=") not in redact(line, set(learned)), (header, line)
