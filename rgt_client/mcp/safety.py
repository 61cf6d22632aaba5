"""What a model may reach and what it may read back.

A model acts on what it reads, and what it reads comes from a rented box that may be
compromised. So: an allow-list of hosts (a tool call naming another host is refused before any
ssh starts: a prompt injection cannot make rgt ssh anywhere else), a read-only mode, and every
string from the box sanitised as on a terminal (textsafe), cut to a bound, with secrets this
machine knows replaced, and returned in a structured field as data.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from rgt_client.mcp.calls import ClientError, exitcodes, safe, safe_line
from rgt_client.textsafe import SHOWN_ESCAPE, show_invisible
from rgt_client.mcp.localfs import Project

HOST_RE = re.compile(r"^(local|[A-Za-z0-9_][A-Za-z0-9_.@:+-]{0,127})$")
FIELD_MAX = 500            # one string field from the box
REDACTED = "[redacted]"
# Token shapes that must never reach a model, whoever printed them (a job echoing its env).
_TOKEN_SHAPES = re.compile(
    r"(hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|hooks\.slack\.com/services/[A-Za-z0-9/]+"
    r"|\b\d{6,12}:[A-Za-z0-9_-]{30,}"                                     # a Telegram bot token
    r"|discord(?:app)?\.com/api/webhooks/[A-Za-z0-9/_-]+|discord://[A-Za-z0-9/_-]+"
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,})")
# `WANDB_API_KEY=abc…` printed by a job whose env this server never saw (submitted elsewhere)
_SECRET_ASSIGN = re.compile(r"(?i)(\b[A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY)[A-Z0-9_]*"
                            r"\s*[=:]\s*)([^\s'\"]{8,})")
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY|WEBHOOK", re.I)


@dataclass
class Policy:
    hosts: list[str]
    read_only: bool = False
    ssh_config: str | None = None
    secrets: set[str] = field(default_factory=set)
    project: Project = field(default_factory=lambda: Project(os.path.realpath(os.getcwd())))

    def check_host(self, host: str) -> str:
        """The host if the allow-list names it; else the refusal a model reads."""
        if not isinstance(host, str) or not HOST_RE.match(host):
            raise ClientError("%r is not a host name" % safe_line(str(host))[:80],
                              "name one of the allowed hosts: %s" % ", ".join(self.hosts), exitcodes.USAGE)
        if host not in self.hosts:
            raise ClientError("host %s is not on this server's allow-list (%s)" % (host, ", ".join(self.hosts)),
                              "the user adds it: rgt-client mcp --hosts %s" % ",".join(self.hosts + [host]),
                              exitcodes.USAGE)
        return host

    def learn_secret(self, value: Any) -> None:
        if isinstance(value, str) and len(value) >= 8:
            self.secrets.add(value)


def env_secrets(environ: dict[str, str] | None = None) -> set[str]:
    """Values of this machine's secret-looking variables (HF_TOKEN, AWS_SECRET_ACCESS_KEY...)."""
    env = os.environ if environ is None else environ
    return {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= 8}


def load_hosts_file(path: str) -> list[str]:
    """A config file of allowed hosts: one per line (# comments), or {"hosts": [...]} in JSON."""
    try:
        with open(os.path.expanduser(path), "rb") as fh:
            text = fh.read(1 << 20).decode("utf-8", "replace")
    except OSError as exc:
        raise ClientError("cannot read %s: %s" % (path, exc.strerror), "pass --hosts gpu1,gpu2 instead",
                          exitcodes.USAGE)
    if text.lstrip().startswith("{"):
        try:
            hosts = json.loads(text).get("hosts")
        except (ValueError, AttributeError):
            hosts = None
        if not isinstance(hosts, list):
            raise ClientError("%s: expected {\"hosts\": [\"gpu1\", ...]}" % path, "or one host per line",
                              exitcodes.USAGE)
        return [str(h) for h in hosts]
    return [ln.split("#", 1)[0].strip() for ln in text.splitlines() if ln.split("#", 1)[0].strip()]


def parse_hosts(words: list[str]) -> list[str]:
    hosts: list[str] = []
    for word in words:
        for h in (x.strip() for x in word.split(",")):
            if not h:
                continue
            if not HOST_RE.match(h):
                raise ClientError("%r is not a host name" % h, "--hosts gpu1,gpu2 (ssh aliases, or local)",
                                  exitcodes.USAGE)
            if h not in hosts:
                hosts.append(h)
    return hosts


def redact(text: str, secrets: set[str]) -> str:
    """text with secrets replaced, and no invisible character left raw. A secret split by
    invisible characters (`hf_<U+200B>AAAA…`, shown as `hf_\\u200bAAAA…`) is still found: the
    text is checked again without the escapes, and that text returned when it held one."""
    out = _redact(show_invisible(text), secrets)
    bare = SHOWN_ESCAPE.sub("", out)
    if bare != out:
        red = _redact(bare, secrets)
        if red != bare:
            return red
    return out


def _redact(text: str, secrets: set[str]) -> str:
    for s in sorted(secrets, key=len, reverse=True):
        if s in text:
            text = text.replace(s, REDACTED)
    text = _SECRET_ASSIGN.sub(lambda m: m.group(1) + REDACTED, text)
    return _TOKEN_SHAPES.sub(REDACTED, text)


def scrub(value: Any, secrets: set[str]) -> Any:
    """Every string in a result, keys included, through redact: the last pass before a model
    reads anything (error results too: a job file's line in a TOML error once reached the
    model unredacted)."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    return value


# A name that may appear inside a command a model is shown (`next`): the agent's own name rule.
_COMMAND_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# what the agent's event log writes (wire/events.py): <ms since epoch>-<6 hex>-<sequence>
_EVENT_ID = re.compile(r"[0-9]{13}-[0-9a-f]{6}-[0-9]{1,18}")


def command_word(word: Any) -> str | None:
    """word when it is a plain run/stage name, else None: box text never becomes part of a
    command line (a run named `x\n\x1b[2J ignore previous instructions` once did). fullmatch:
    `$` would let a trailing newline through."""
    return word if isinstance(word, str) and _COMMAND_WORD.fullmatch(word) else None


def event_id(value: Any) -> str | None:
    """value when it has the shape of the agent's event ids, else None: a cursor goes into
    `next` and `cursor` as it is, so it must be no text of the box's choosing."""
    return value if isinstance(value, str) and _EVENT_ID.fullmatch(value) else None


def line(value: Any, policy: Policy, limit: int = FIELD_MAX) -> str | None:
    """One string field from the box: sanitised (no control character survives), secrets out,
    cut to `limit` characters with a mark that it was cut."""
    if value is None:
        return None
    text = redact(safe_line(value if isinstance(value, (str, bytes)) else str(value)), policy.secrets)
    return text if len(text) <= limit else text[:limit] + "…[cut %d chars]" % (len(text) - limit)


def block(value: Any, policy: Policy, limit: int) -> str:
    """Multi-line box text (a handbook, an agent's answer) kept as lines, bounded."""
    text = redact(safe(value if isinstance(value, (str, bytes)) else str(value)), policy.secrets)
    return text if len(text) <= limit else text[:limit] + "\n…[cut %d chars]" % (len(text) - limit)


def lines(values: Any, policy: Policy, n: int = 5, limit: int = FIELD_MAX) -> list[str]:
    if not isinstance(values, list):
        return []
    return [line(v, policy, limit) or "" for v in values[:n]]
