"""Each service's exact request shape, checked by a real HTTP receiver on loopback, through both
the requests path and the stdlib urllib path."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from tests.notify.receiver import event

BACKENDS = ["requests", "urllib"]


def rfc2047(value: str) -> str:
    assert value.startswith("=?UTF-8?B?") and value.endswith("?=")
    return base64.b64decode(value[10:-2]).decode("utf-8")


def _one(hub, receiver, ev):
    hub.publish(ev)
    return receiver.wait_for(1)[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_ntfy_headers_body_and_token(make_hub, receiver, backend):
    port = receiver.port
    hub = make_hub([{"url": "ntfy://tk_secrettoken@127.0.0.1:%d/my-topic" % port}], backend=backend)
    ev = event("ev-1", last_lines=["epoch 3 step 100", "Killed"],
               cause={"class": "cgroup_oom", "summary": "cgroup OOM kill", "remediation": "fewer workers",
                      "retryable": False, "evidence": ["oom_kill 0 -> 1"]})
    req = _one(hub, receiver, ev)
    assert req.method == "POST" and req.path == "/my-topic"
    assert req.headers["Priority"] == "5"
    assert req.headers["Authorization"] == "Bearer tk_secrettoken"
    assert req.headers["X-Sequence-ID"] == "ev-1"
    assert req.headers["Tags"] == "x"
    # http.client sends headers as latin-1: non-ASCII goes RFC 2047, which ntfy decodes
    assert rfc2047(req.headers["Title"]) == "box1 \u00b7 resnet-a3/train failed: cgroup OOM kill"
    body = req.text()
    assert "What to do:\nfewer workers" in body and "Killed" in body
    assert "rgt-client status box1" in body


def test_ntfy_basic_auth_and_non_ascii_title(make_hub, receiver):
    hub = make_hub([{"url": "ntfy://alice:pa%%20ss@127.0.0.1:%d/t1" % receiver.port}])
    req = _one(hub, receiver, event("ev-2", summary="显存不足 CUDA OOM", cause=None))
    assert req.headers["Authorization"] == "Basic " + base64.b64encode(b"alice:pa ss").decode()
    assert "显存不足" in rfc2047(req.headers["Title"])


def test_ntfy_base_url_override(make_hub, receiver):
    hub = make_hub([{"url": "ntfys://ntfy.sh/alerts-x", "base_url": receiver.url}])
    req = _one(hub, receiver, event("ev-3"))
    assert req.path == "/alerts-x"


@pytest.mark.parametrize("backend", BACKENDS)
def test_slack_text_and_blocks(make_hub, receiver, backend):
    hub = make_hub([{"url": "slack://T000/B000/XXXXSECRET", "base_url": receiver.url}], backend=backend)
    req = _one(hub, receiver, event("ev-4", summary="loss <nan> & diverged", cause=None))
    assert req.path == "/services/T000/B000/XXXXSECRET"
    assert req.headers["Content-Type"].startswith("application/json")
    body = req.json()
    assert body["text"].endswith("box1 \u00b7 resnet-a3/train failed: loss &lt;nan&gt; &amp; diverged")
    assert body["blocks"][0]["type"] == "section"
    assert body["blocks"][0]["text"]["type"] == "mrkdwn"
    assert body["blocks"][0]["text"]["text"].startswith("*")


def test_slack_https_url_infers_format(make_hub, receiver):
    hub = make_hub([{"url": "https://hooks.slack.com/services/T1/B1/Z1", "base_url": receiver.url}])
    assert hub.notifiers[0].format == "slack"
    assert _one(hub, receiver, event("ev-5")).path == "/services/T1/B1/Z1"


@pytest.mark.parametrize("backend", BACKENDS)
def test_discord_content_without_mentions(make_hub, receiver, backend):
    hub = make_hub([{"url": "discord://1234/TOKENXYZ", "base_url": receiver.url}], backend=backend)
    req = _one(hub, receiver, event("ev-6", last_lines=["@everyone look", "```oops```"]))
    assert req.path == "/api/webhooks/1234/TOKENXYZ"
    body = req.json()
    assert body["allowed_mentions"] == {"parse": []}
    assert body["content"].startswith("**\u274C box1")
    assert body["content"].count("```") == 2       # the log's own fences cannot break out
    assert len(body["content"]) <= 2000


@pytest.mark.parametrize("backend", BACKENDS)
def test_telegram_send_message(make_hub, receiver, backend):
    hub = make_hub([{"url": "tgram://123456:ABC-def/-100777", "base_url": receiver.url}], backend=backend)
    req = _one(hub, receiver, event("ev-7", summary="a <b> & c", cause=None, last_lines=["x < y"]))
    assert req.path == "/bot123456:ABC-def/sendMessage"
    body = req.json()
    assert body["chat_id"] == "-100777" and body["parse_mode"] == "HTML"
    assert "a &lt;b&gt; &amp; c" in body["text"] and "<pre>x &lt; y</pre>" in body["text"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_json_webhook_event_id_and_hmac(make_hub, receiver, backend):
    hub = make_hub([{"url": "json://127.0.0.1:%d/hook" % receiver.port, "secret": "hmac-key-1"}],
                   backend=backend)
    ev = event("ev-8")
    req = _one(hub, receiver, ev)
    assert req.path == "/hook"
    assert req.headers["X-Rgt-Event-Id"] == "ev-8"
    expect = "sha256=" + hmac.new(b"hmac-key-1", req.body, hashlib.sha256).hexdigest()
    assert req.headers["X-Rgt-Signature"] == expect
    sent = req.json()
    assert {k: sent[k] for k in ev} == ev        # the body is the event itself


def test_json_without_secret_has_no_signature(make_hub, receiver):
    hub = make_hub([{"url": receiver.url + "/h", "format": "json"}])
    req = _one(hub, receiver, event("ev-9"))
    assert "X-Rgt-Signature" not in req.headers


def test_healthchecks_start_fail_success(make_hub, receiver):
    hub = make_hub([{"url": receiver.url + "/ping/uuid-1", "format": "healthchecks"}])
    big = ["line %d %s" % (i, "x" * 200) for i in range(20)]
    hub.publish(event("r1", "run_started", "info"))
    hub.publish(event("s1", "stage_failed"))          # not a healthchecks event
    hub.publish(event("r2", "run_failed", "critical", failed_stage="train", last_lines=big,
                      cause={"summary": "cgroup OOM kill", "remediation": "fewer workers " * 800,
                             "evidence": ["e"] * 3}))
    hub.publish(event("r3", "run_succeeded", "info", stages=3, duration_s=15120,
                      artifacts={"files": 12, "bytes": 3_100_000_000}))
    reqs = receiver.wait_for(3)
    assert [r.path for r in reqs] == ["/ping/uuid-1/start", "/ping/uuid-1/fail", "/ping/uuid-1"]
    assert len(reqs[1].body) <= 10 * 1024
    assert "cgroup OOM kill" in reqs[1].text() and "What to do:" in reqs[1].text()
    assert reqs[2].text() == "\u2705 box1 \u00b7 resnet-a3 done \u2014 3 stages, 4h12m, 12 files (3.1 GB)"


def test_file_sink_appends_json_lines(make_hub, tmp_path):
    path = tmp_path / "out" / "notes.jsonl"
    hub = make_hub([{"url": "file://" + str(path)}])
    hub.publish(event("f1"))
    hub.publish(event("f2", "run_succeeded", "info", stages=1))
    hub.stop(5)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["id"] for x in lines] == ["f1", "f2"]
    assert lines[0]["severity"] == "critical" and lines[0]["text"].startswith("\u274C box1")


def test_notify_test_reaches_every_notifier(make_hub, receiver, receiver2):
    hub = make_hub([{"url": "ntfy://127.0.0.1:%d/t" % receiver.port},
                    {"url": receiver2.url + "/x", "format": "healthchecks"}], start=False)
    results = hub.send_test()
    assert [r["ok"] for r in results] == [True, True]
    assert receiver.wait_for(1)[0].headers["Tags"] == "bell"
    assert receiver2.wait_for(1)[0].path == "/x/log"
