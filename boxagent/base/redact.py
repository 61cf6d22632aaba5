"""One redaction for every error string that may reach status.json, a message, the outbox or a
terminal: it masks every secret value it knows, in every form an error may quote it.

An ntfy token with a CR/LF inside or a trailing newline was printed whole in `last_error`
(status.json, `status --json`, `notify-test`, the outbox): the HTTP library refused the header
and quoted it escaped ('Bearer tok\\r\\nen'), which matched neither the raw token nor its
%-quoted form. So each secret is masked as it is, stripped, %-quoted, escaped as repr() and
JSON write it, and line by line (each line-part long enough to matter).
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterable, List, Set
from urllib.parse import quote

MASK = "***"
MIN_PART = 4             # shorter pieces ("a", "ab") would mask ordinary words
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def forms(secret: str) -> List[str]:
    """Every spelling of `secret` an error message may carry, longest first."""
    out: Set[str] = set()
    if not isinstance(secret, str) or not secret:
        return []
    for value in {secret, secret.strip()}:
        out.update({value, repr(value)[1:-1], json.dumps(value)[1:-1], quote(value, safe=""),
                    value.encode("unicode_escape").decode("ascii", "replace")})
    # Any control character splits a quote of it (CR/LF, a tab: an HTTP library refuses the
    # value and quotes the part up to it), so each run between them is masked on its own.
    for line in _CONTROL.split(secret):
        line = line.strip()
        if len(line) >= MIN_PART:
            out.update({line, quote(line, safe="")})
    return sorted((f for f in out if len(f) >= MIN_PART or f == secret), key=len, reverse=True)


class Redactor:
    """Masks the forms of the secrets it was given; `scrub(text)`."""

    def __init__(self, secrets: Iterable[str] = ()):
        self._forms: List[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        found = set(self._forms)
        for s in secrets:
            found.update(forms(s))
        self._forms = sorted(found, key=len, reverse=True)

    def scrub(self, text: Any) -> Any:
        """`text` with every known secret masked; anything that is not text as it came."""
        if not isinstance(text, str):
            return text
        for f in self._forms:
            if f in text:
                text = text.replace(f, MASK)
        return text


# The process's redactor: the daemon and the notify commands add every configured notifier's
# secret values when they load them, and every error bound for status or a terminal passes it.
KNOWN = Redactor()


def scrub(text: Any) -> Any:
    return KNOWN.scrub(text)
