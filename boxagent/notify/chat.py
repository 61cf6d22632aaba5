"""Chat webhooks: Slack (incoming webhook), Discord (webhook), Telegram (bot sendMessage).

Each fits the message to the service's limit (Discord 2000 chars, Telegram 4096, a Slack
section 3000) before markup, and escapes what the service would otherwise interpret: log lines
are user text and may contain `<`, `&`, "@everyone" or triple backticks.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional
from urllib.parse import unquote, urlsplit

from boxagent.notify.types import BadURL, Item, Req, with_base
from boxagent.notify.messages import Message

JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8"}


def _segs(url: str) -> list:
    return [unquote(s) for s in urlsplit(url).path.split("/") if s]


def _json(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _fit_rendered(msg: Message, render: Any, limit: int) -> str:
    """Fit, render, and tighten again if markup pushed the text over (rare, a few chars)."""
    budget = limit
    for _ in range(8):
        out = render(msg.fit(budget))
        if len(out) <= limit:
            return out
        budget -= (len(out) - limit) + 8
    return out[:limit]


class Slack:
    LIMIT = 3000

    def endpoint(self, n: Any) -> Dict[str, Any]:
        sp = urlsplit(n.url)
        if sp.scheme == "slack":
            parts = [sp.netloc] + _segs(n.url)
            if len(parts) != 3 or not all(parts):
                raise BadURL("a Slack URL is slack://T.../B.../XXXX (the three parts of the webhook)")
            url = "https://hooks.slack.com/services/" + "/".join(parts)
        elif sp.scheme in ("http", "https"):
            url = n.url
        else:
            raise BadURL("Slack URLs are slack://T/B/X or https://hooks.slack.com/services/...")
        return {"url": with_base(url, n.base_url)}

    def takes(self, n: Any, item: Item) -> bool:
        return item.kind not in ("deadman", "ping")

    def request(self, n: Any, ep: Dict[str, Any], item: Item) -> Req:
        msg = item.rendered.fit(self.LIMIT, text=_slack_text)
        blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": _slack_text(msg)}}]
        body = {"text": _esc_slack(msg.first_line()), "blocks": blocks}
        return Req("POST", ep["url"], dict(JSON_HEADERS), _json(body))


def _esc_slack(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_text(msg: Message) -> str:
    out = ["*%s*" % _esc_slack(msg.first_line())]
    for p in msg.parts:
        if not p.lines:
            continue
        if p.role == "log":
            out.append("%s\n```%s```" % (p.header or "", _esc_slack("\n".join(p.lines)).replace("```", "'''")))
        else:
            out.append(_esc_slack(p.text()))
    return "\n".join(out)


class Discord:
    LIMIT = 2000

    def endpoint(self, n: Any) -> Dict[str, Any]:
        sp = urlsplit(n.url)
        if sp.scheme == "discord":
            parts = [sp.netloc] + _segs(n.url)
            if len(parts) != 2 or not all(parts):
                raise BadURL("a Discord URL is discord://WEBHOOK_ID/WEBHOOK_TOKEN")
            url = "https://discord.com/api/webhooks/%s/%s" % tuple(parts)
        elif sp.scheme in ("http", "https"):
            url = n.url
        else:
            raise BadURL("Discord URLs are discord://ID/TOKEN or https://discord.com/api/webhooks/ID/TOKEN")
        return {"url": with_base(url, n.base_url)}

    def takes(self, n: Any, item: Item) -> bool:
        return item.kind not in ("deadman", "ping")

    def request(self, n: Any, ep: Dict[str, Any], item: Item) -> Req:
        content = _fit_rendered(item.rendered, _discord_text, self.LIMIT)
        # A log line saying "@everyone" must not page a whole server.
        body = {"content": content, "allowed_mentions": {"parse": []}}
        return Req("POST", ep["url"], dict(JSON_HEADERS), _json(body))


def _discord_text(msg: Message) -> str:
    out = ["**%s**" % msg.first_line()]
    for p in msg.parts:
        if not p.lines:
            continue
        if p.role == "log":
            out.append("%s\n```\n%s\n```" % (p.header or "", "\n".join(p.lines).replace("```", "'''")))
        else:
            out.append(p.text())
    return "\n".join(out)


class Telegram:
    LIMIT = 4096

    def endpoint(self, n: Any) -> Dict[str, Any]:
        sp = urlsplit(n.url)
        if sp.scheme in ("tgram", "telegram"):
            token, chats = sp.netloc, _segs(n.url)
        elif sp.scheme in ("http", "https"):     # https://api.telegram.org/bot<TOKEN>/<CHAT>
            segs = _segs(n.url)
            token = segs[0][3:] if segs and segs[0].startswith("bot") else ""
            chats = segs[1:]
        else:
            raise BadURL("Telegram URLs are tgram://BOTTOKEN/CHATID")
        if not token or len(chats) != 1:
            raise BadURL("a Telegram URL is tgram://BOTTOKEN/CHATID (one chat per [[notify]] entry)")
        url = with_base("https://api.telegram.org/bot%s/sendMessage" % token, n.base_url)
        return {"url": url, "chat_id": chats[0]}

    def takes(self, n: Any, item: Item) -> bool:
        return item.kind not in ("deadman", "ping")

    def request(self, n: Any, ep: Dict[str, Any], item: Item) -> Req:
        # Telegram's 4096 counts the text after entity parsing, i.e. without our HTML tags.
        msg = item.rendered.fit(self.LIMIT)
        body = {"chat_id": ep["chat_id"], "text": _telegram_html(msg), "parse_mode": "HTML",
                "disable_web_page_preview": True}
        return Req("POST", ep["url"], dict(JSON_HEADERS), _json(body))

    @staticmethod
    def retry_after(body: bytes) -> Optional[float]:
        """A 429 from the Bot API names its wait in the body (`parameters.retry_after`), not a header."""
        try:
            data = json.loads(body.decode("utf-8"))
            return float(data["parameters"]["retry_after"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None


def _esc_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _telegram_html(msg: Message) -> str:
    out = ["<b>%s</b>" % _esc_html(msg.first_line())]
    for p in msg.parts:
        if not p.lines:
            continue
        if p.role == "log":
            out.append("%s\n<pre>%s</pre>" % (_esc_html(p.header or ""), _esc_html("\n".join(p.lines))))
        else:
            out.append(_esc_html(p.text()))
    return "\n\n".join(out)


SLACK = Slack()
DISCORD = Discord()
TELEGRAM = Telegram()
