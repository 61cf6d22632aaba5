"""The real Apprise (PyPI `apprise`, in the dev extra): delegation of the schemes rgt does not
speak, URL compatibility, and what rgt's own senders send next to what Apprise sends for the
same URL, request by request, to loopback receivers. The differences asserted here are the ones
docs/readme/notify.md lists as kept on purpose: when one changes, that list must change too.

Apprise's Slack, Discord and Telegram plugins post to fixed hosts; the tests point those class
constants at the loopback receiver (monkeypatch restores them), as rgt's `base_url` does."""
from __future__ import annotations

import json
import urllib.parse
import warnings

import pytest

with warnings.catch_warnings():       # apprise imports imghdr, deprecated in Python 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    apprise = pytest.importorskip("apprise", reason="Apprise comes with the dev extra: ./install.sh --dev")

from boxagent.notify.config import parse_entry, redact  # noqa: E402
from boxagent.notify.http import HttpClient  # noqa: E402
from boxagent.notify.messages import render_event  # noqa: E402
from boxagent.notify.registry import deliver  # noqa: E402
from boxagent.notify.types import Item  # noqa: E402
from tests.notify.receiver import event  # noqa: E402

EVENT = event("ev-cmp-1", summary="loss <nan> & diverged", cause=None, last_lines=["step 9 loss nan"])


def _item():
    return Item("event", EVENT, render_event(EVENT, "box1"))


def _send(entry):
    n = parse_entry(0, entry)
    http = HttpClient()
    try:
        return n, deliver(n, _item(), http)
    finally:
        http.close()


def _point_apprise_at(monkeypatch, receiver):
    from apprise.plugins.discord import NotifyDiscord
    from apprise.plugins.slack import NotifySlack
    from apprise.plugins.telegram import NotifyTelegram
    monkeypatch.setattr(NotifySlack, "webhook_url", receiver.url + "/services")
    monkeypatch.setattr(NotifyDiscord, "notify_url", receiver.url + "/api/webhooks")
    monkeypatch.setattr(NotifyTelegram, "notify_url", receiver.url + "/bot")


# -- delegation -------------------------------------------------------------------------------------
def test_scheme_rgt_does_not_speak_goes_to_the_real_apprise(make_hub, receiver):
    hub = make_hub([{"url": "form://127.0.0.1:%d/hook-Secr3tPath" % receiver.port, "id": "ap"}])
    assert hub.notifiers[0].format == "apprise"
    hub.publish(EVENT)
    req = receiver.wait_for(1)[0]
    form = urllib.parse.parse_qs(req.text())
    assert req.method == "POST" and req.path == "/hook-Secr3tPath"
    assert form["title"] == ["box1 \u00b7 resnet-a3/train failed: loss <nan> & diverged"]
    assert "step 9 loss nan" in form["message"][0]
    hub.stop(2)
    s = hub.summary()
    assert (s["sent"], s["pending"]) == (1, 0)
    assert "Secr3tPath" not in json.dumps(s) and s["targets"][0]["target"] == "form://127.0.0.1:%d/***" % receiver.port


def test_apprise_api_url_is_delegated_and_its_token_stays_secret(make_hub, receiver):
    token = "cfgT0kenXyz"
    hub = make_hub([{"url": "apprise://127.0.0.1:%d/%s" % (receiver.port, token)}])
    hub.publish(EVENT)
    req = receiver.wait_for(1)[0]
    assert req.path.startswith("/notify") and token in req.path + str(req.headers.get("X-Apprise-Config-ID"))
    assert urllib.parse.parse_qs(req.text())["title"][0].startswith("box1 \u00b7 resnet-a3/train failed")
    hub.stop(2)
    assert token not in json.dumps(hub.summary())


def test_format_apprise_delegates_a_scheme_rgt_also_speaks(receiver):
    _n, res = _send({"url": "json://127.0.0.1:%d/hook" % receiver.port, "format": "apprise"})
    assert res.ok
    body = receiver.wait_for(1)[0].json()
    assert body["version"] == "1.0" and body["title"].startswith("box1 \u00b7 ")


def test_apprise_failed_send_is_retried_like_any_other(make_hub, receiver):
    receiver.responses = [(500, {}, b"down")]
    hub = make_hub([{"url": "form://127.0.0.1:%d/f" % receiver.port}])
    hub.publish(EVENT)
    receiver.wait_for(2)
    hub.stop(2)
    s = hub.summary()
    assert s["sent"] == 1 and s["failed"] == 0 and "apprise reported a failed send" in s["last_error"]


# -- URL compatibility ------------------------------------------------------------------------------
@pytest.mark.parametrize("url,fmt", [
    ("ntfy://127.0.0.1:8080/topic1", "ntfy"), ("ntfys://ntfy.sh/topic1", "ntfy"),
    ("ntfy://tk_abc123@ntfy.example.com/topic1", "ntfy"), ("ntfys://alice:pw@ntfy.example.com/t", "ntfy"),
    ("slack://T000/B000/XXXXSECRET", "slack"), ("discord://1234/TOKENXYZ", "discord"),
    ("tgram://123456:ABC-def/-100777", "telegram"), ("json://127.0.0.1:9/hook", "json"),
    ("jsons://hooks.example.com/h", "json"),
])
def test_rgt_url_forms_are_apprise_url_forms(url, fmt):
    assert parse_entry(0, {"url": url}).format == fmt
    assert apprise.Apprise().add(url), url


# -- the same URL, rgt's request next to Apprise's --------------------------------------------------
def _pair(receiver, receiver2, entry_rgt, entry_apprise):
    _n, mine = _send(entry_rgt)
    _n, theirs = _send(entry_apprise)
    assert mine.ok and theirs.ok, (mine.error, theirs.error)
    return receiver.wait_for(1)[0], receiver2.wait_for(1)[0]


def test_ntfy_rgt_vs_apprise(receiver, receiver2):
    url = "ntfy://tk_secret1@127.0.0.1:%d/topic1"
    mine, theirs = _pair(receiver, receiver2, {"url": url % receiver.port},
                         {"url": url % receiver2.port, "format": "apprise"})
    assert mine.method == theirs.method == "POST"
    assert mine.headers["Authorization"] == theirs.headers["Authorization"] == "Bearer tk_secret1"
    # rgt: the topic in the path, the message as the body, metadata in headers; Apprise: JSON to /.
    assert mine.path == "/topic1" and mine.headers["Content-Type"].startswith("text/plain")
    assert theirs.path == "/" and theirs.json()["topic"] == "topic1"
    assert mine.headers["Title"].startswith("=?UTF-8?B?") and theirs.json()["title"].startswith("box1 \u00b7")
    assert "step 9 loss nan" in mine.text() and "step 9 loss nan" in theirs.json()["message"]
    # Kept on purpose: severity -> Priority, emoji Tags, and X-Sequence-ID (a resend replaces, not doubles).
    assert (mine.headers["Priority"], mine.headers["Tags"], mine.headers["X-Sequence-ID"]) == ("5", "x", "ev-cmp-1")
    assert not {"X-Priority", "Priority", "X-Sequence-ID", "Tags", "X-Tags"} & set(theirs.headers)


def test_ntfy_lone_user_is_a_token_for_rgt_and_a_user_for_apprise(receiver, receiver2):
    url = "ntfy://myuser@127.0.0.1:%d/topic1"
    mine, theirs = _pair(receiver, receiver2, {"url": url % receiver.port},
                         {"url": url % receiver2.port, "format": "apprise"})
    assert mine.headers["Authorization"] == "Bearer myuser"
    assert theirs.headers["Authorization"].startswith("Basic ")


def test_slack_rgt_vs_apprise(monkeypatch, receiver, receiver2):
    _point_apprise_at(monkeypatch, receiver2)
    receiver2.default = (200, {}, b"ok")                  # what Slack answers; Apprise checks it
    url = "slack://T000/B000/XXXXSECRET"
    mine, theirs = _pair(receiver, receiver2, {"url": url, "base_url": receiver.url}, {"url": url, "format": "apprise"})
    assert mine.method == theirs.method == "POST"
    assert mine.path == theirs.path == "/services/T000/B000/XXXXSECRET"
    assert mine.headers["Content-Type"] == theirs.headers["Content-Type"] == "application/json; charset=utf-8"
    ours, apprises = mine.json(), theirs.json()
    # rgt: top-level text + a mrkdwn section (Block Kit); Apprise: a legacy attachment.
    assert set(ours) == {"text", "blocks"} and ours["blocks"][0]["text"]["type"] == "mrkdwn"
    assert "attachments" in apprises and "blocks" not in apprises and "text" not in apprises
    # Both escape Slack's control characters in the text.
    assert "&lt;nan&gt; &amp;" in ours["text"] and "&lt;nan&gt; &amp;" in apprises["attachments"][0]["title"]


def test_discord_rgt_vs_apprise(monkeypatch, receiver, receiver2):
    _point_apprise_at(monkeypatch, receiver2)
    url = "discord://1234/TOKENXYZ"
    mine, theirs = _pair(receiver, receiver2, {"url": url, "base_url": receiver.url}, {"url": url, "format": "apprise"})
    assert mine.method == theirs.method == "POST"
    assert mine.path == theirs.path.split("?")[0] == "/api/webhooks/1234/TOKENXYZ"
    ours, apprises = mine.json(), theirs.json()
    assert "content" in ours and "content" in apprises
    # Kept on purpose: a log line saying "@everyone" must not page a whole server.
    assert ours["allowed_mentions"] == {"parse": []} and "allowed_mentions" not in apprises


def test_telegram_rgt_vs_apprise(monkeypatch, receiver, receiver2):
    _point_apprise_at(monkeypatch, receiver2)
    url = "tgram://123456:ABC-def/-100777"
    mine, theirs = _pair(receiver, receiver2, {"url": url, "base_url": receiver.url}, {"url": url, "format": "apprise"})
    assert mine.path == theirs.path == "/bot123456:ABC-def/sendMessage"
    ours, apprises = mine.json(), theirs.json()
    assert ours["parse_mode"] == apprises["parse_mode"] == "HTML"
    assert str(ours["chat_id"]) == str(apprises["chat_id"]) == "-100777"
    # Kept on purpose: rgt escapes the text for HTML mode; Apprise passes "<nan>" through, which
    # Telegram refuses ("can't parse entities").
    assert "&lt;nan&gt; &amp;" in ours["text"] and "<nan> &" in apprises["text"]


def test_json_rgt_vs_apprise(receiver, receiver2):
    url = "json://127.0.0.1:%d/hook"
    mine, theirs = _pair(receiver, receiver2, {"url": url % receiver.port, "secret": "k1"},
                         {"url": url % receiver2.port, "format": "apprise"})
    assert mine.method == theirs.method == "POST" and mine.path == theirs.path == "/hook"
    assert mine.headers["Content-Type"].startswith("application/json")
    assert theirs.headers["Content-Type"].startswith("application/json")
    # rgt: the event itself (type, severity, run, stage, cause...), its id and an HMAC in headers;
    # Apprise: a rendered title/message.
    ours, apprises = mine.json(), theirs.json()
    assert ours["id"] == "ev-cmp-1" and ours["type"] == "stage_failed" and ours["severity"] == "critical"
    assert mine.headers["X-Rgt-Event-Id"] == "ev-cmp-1" and mine.headers["X-Rgt-Signature"].startswith("sha256=")
    assert set(apprises) >= {"version", "title", "message", "type"} and "id" not in apprises


def test_redacted_target_for_apprise_urls():
    assert redact("apprise://host.example:8000/cfgtoken") == "apprise://host.example:8000/***"
    assert redact("mailto://user:pw@gmail.com") == "mailto://gmail.com/***"
