"""What makes a report safe to open offline and in a mail client: nothing it loads or runs."""
from __future__ import annotations

import re
from html.parser import HTMLParser

URL_ATTRS = ("src", "href", "xlink:href", "srcset", "action", "formaction", "poster", "background", "data")
FORBIDDEN_TAGS = ("script", "iframe", "object", "embed", "link", "img", "image", "use", "foreignobject",
                  "base", "meta-refresh", "audio", "video", "source", "form", "input")


class _Scan(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.tags: dict[str, int] = {}

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag in FORBIDDEN_TAGS:
            self.problems.append("<%s> element" % tag)
        for name, value in attrs:
            if name.startswith("on"):
                self.problems.append("event handler %s on <%s>" % (name, tag))
            if name in URL_ATTRS and value is not None:
                self.problems.append("%s=%r on <%s>" % (name, value, tag))
            if name == "style" and value and "url(" in value.lower():
                self.problems.append("url() in a style attribute on <%s>" % tag)
            if tag == "meta" and name == "http-equiv" and (value or "").lower() != "content-security-policy":
                self.problems.append("<meta http-equiv=%r>" % value)   # a refresh would navigate away


def offline_problems(html: str) -> list[str]:
    """Everything that could reach the network or run code; [] for a clean report."""
    scan = _Scan()
    scan.feed(html)
    problems = list(scan.problems)
    for css in re.findall(r"<style[^>]*>(.*?)</style>", html, re.S | re.I):
        if re.search(r"url\s*\(", css, re.I):
            problems.append("url() in the stylesheet")
        if "@import" in css.lower() or "@font-face" in css.lower():
            problems.append("@import/@font-face in the stylesheet")
    return problems


def csp(html: str) -> str:
    m = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)"', html)
    return m.group(1) if m else ""


def tag_counts(html: str) -> dict[str, int]:
    scan = _Scan()
    scan.feed(html)
    return scan.tags
