"""Notifier configs: format inference, validation, redaction, secret scrubbing. (Apprise, real: test_notify_apprise.py.)"""
from __future__ import annotations

import pytest

from boxagent.notify.config import NotifyConfigError, parse_entry, parse_notifiers, redact
from boxagent.notify.registry import endpoint


@pytest.mark.parametrize("url,fmt", [
    ("ntfys://ntfy.sh/t", "ntfy"), ("ntfy://tk_x@host:8080/t", "ntfy"), ("https://ntfy.sh/t", "ntfy"),
    ("slack://T/B/X", "slack"), ("https://hooks.slack.com/services/T/B/X", "slack"),
    ("discord://1/tok", "discord"), ("https://discord.com/api/webhooks/1/tok", "discord"),
    ("tgram://123:abc/42", "telegram"), ("json://h/p", "json"), ("jsons://h/p", "json"),
    ("https://hc-ping.com/abcd-1234", "healthchecks"), ("file:///tmp/x.jsonl", "file"),
])
def test_format_inferred_from_url(url, fmt):
    assert parse_entry(0, {"url": url}).format == fmt


@pytest.mark.parametrize("url,shown", [
    ("ntfys://tk_abc@ntfy.sh/my-secret-topic", "ntfys://ntfy.sh/***"),
    ("slack://T0/B0/XYZ", "slack://***"),
    ("tgram://123:ABC/99", "tgram://***"),
    ("https://hc-ping.com/uuid-1", "https://hc-ping.com/***"),
    ("jsons://user:pw@hooks.example.com:8443/p/q", "jsons://hooks.example.com:8443/***"),
    ("file:///var/log/rgt.jsonl", "file:///var/log/rgt.jsonl"),
])
def test_redacted_targets(url, shown):
    assert redact(url) == shown


def test_scrub_masks_every_secret_piece():
    n = parse_entry(0, {"url": "tgram://123456:AAHsecret-Token/-1009876", "base_url": "http://127.0.0.1:1"})
    err = "ConnectionError: HTTPConnectionPool: Max retries with url: /bot123456:AAHsecret-Token/sendMessage"
    assert "AAHsecret" not in n.scrub(err) and "/bot***/sendMessage" in n.scrub(err)
    j = parse_entry(0, {"url": "json://h/hook-abc", "secret": "k3y-zz"})
    assert j.scrub("signature for k3y-zz at /hook-abc") == "signature for *** at /***"


def test_ntfy_endpoint_forms():
    assert endpoint(parse_entry(0, {"url": "ntfy://alerts"}))["base"] == "https://ntfy.sh"
    ep = endpoint(parse_entry(0, {"url": "ntfys://host.example/prefix/topic_1"}))
    assert ep == {"base": "https://host.example/prefix", "topic": "topic_1", "auth": None}
    with pytest.raises(NotifyConfigError, match="topic"):
        parse_entry(0, {"url": "ntfys://ntfy.sh/bad topic!"})
    with pytest.raises(NotifyConfigError, match="3 days"):
        parse_entry(0, {"url": "ntfys://ntfy.sh/t", "deadman": "4d"})


def test_errors_name_the_entry_and_never_the_url():
    with pytest.raises(NotifyConfigError) as exc:
        parse_notifiers([{"url": "ntfy://h/t"}, {"url": "https://secret-host.example/secret-path-zz"}])
    assert exc.value.message.startswith("notify entry 2")
    assert "secret-path-zz" not in exc.value.message
    with pytest.raises(NotifyConfigError, match="share the id"):
        parse_notifiers([{"url": "ntfy://h/t", "id": "a"}, {"url": "ntfy://h/u", "id": "a"}])
    with pytest.raises(NotifyConfigError, match="heartbeat"):
        parse_entry(0, {"url": "ntfy://h/t", "heartbeat": "soon"})


@pytest.mark.parametrize("url", ["ntfy:/mytopic", "ntfys:/ntfy.sh/t0p1c", "ntfy:mytopic", "https:/hooks.slack.com/x",
                                 "json://"])
def test_a_notifier_url_typo_is_refused_at_notify_set(url):
    """`ntfy:/mytopic` (one slash) was accepted and sent nowhere, silently."""
    with pytest.raises(NotifyConfigError) as err:
        parse_notifiers([{"url": url, "format": "ntfy"} if url.startswith("ntfy") else {"url": url, "format": "json"}])
    assert "notify entry 1" in err.value.message and err.value.hint
    assert "mytopic" not in err.value.message + err.value.hint and "t0p1c" not in err.value.message + err.value.hint


def test_well_formed_urls_still_pass_the_form_check():
    for url in ("ntfy://mytopic", "ntfys://ntfy.sh/t", "file:///tmp/x.jsonl", "https://hooks.slack.com/services/T/B/X"):
        parse_notifiers([{"url": url}])
