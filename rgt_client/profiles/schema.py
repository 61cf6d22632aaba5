"""The profile schema, enforced: unknown keys and wrong types are refused with the
exact path of the problem, e.g. `profiles/x.toml: teardown[0].irreversible: expected true or
false`. Documented in docs/profile-schema.md; keep the two in step.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from boxagent.api import alert_thresholds, unsafe_regex_reason
from rgt_client.errors import ClientError

KINDS = ("ssh-rental", "cloud-api", "slurm", "kubernetes", "local")
SEVERITIES = ("info", "warning", "critical")
SCHEMA_DOC = "docs/profile-schema.md"


class _Problem(Exception):
    def __init__(self, where: str, message: str, hint: Optional[str] = None):
        super().__init__(message)
        self.where, self.message, self.hint = where, message, hint


Check = Callable[[Any, str], None]
_IDENT = re.compile(r"^[a-z][a-z0-9_]*$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_ENVNAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _str(v: Any, where: str) -> None:
    if not isinstance(v, str) or not v.strip():
        raise _Problem(where, "expected a non-empty string")


def _bool(v: Any, where: str) -> None:
    if not isinstance(v, bool):
        raise _Problem(where, "expected true or false")


def _number(v: Any, where: str) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _Problem(where, "expected a number")


def _count(v: Any, where: str) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise _Problem(where, "expected a whole number above 0")


def _int(v: Any, where: str) -> None:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Problem(where, "expected a whole number")


def _strlist(v: Any, where: str) -> None:
    if not isinstance(v, list):
        raise _Problem(where, "expected a list of strings")
    for i, item in enumerate(v):
        _str(item, "%s[%d]" % (where, i))


def _duration(v: Any, where: str) -> None:
    if not isinstance(v, str) or not _DURATION.match(v):
        raise _Problem(where, "expected a duration like 30s, 6h or 15d")


def _regex(v: Any, where: str) -> None:
    _str(v, where)
    try:
        re.compile(v)
    except re.error as exc:
        raise _Problem(where, "not a valid regular expression: %s" % exc) from None
    why = unsafe_regex_reason(v)
    if why is not None:                   # the agent runs profile rules on every log line
        raise _Problem(where, "the pattern %s" % why)


def _ident(v: Any, where: str) -> None:
    if not isinstance(v, str) or not _IDENT.match(v):
        raise _Problem(where, "expected a snake_case name like cuda_oom")


def known_thresholds() -> Tuple[str, ...]:
    """The agent's alert thresholds: a profile may override only those."""
    return alert_thresholds()


def _threshold(v: Any, where: str) -> None:
    _ident(v, where)
    known = known_thresholds()
    if v not in known:
        raise _Problem(where, "unknown threshold", "known thresholds: %s" % ", ".join(known))


def _name(v: Any, where: str) -> None:
    if not isinstance(v, str) or not _NAME.match(v):
        raise _Problem(where, "expected a lowercase name like my-box")


def _envname(v: Any, where: str) -> None:
    if not isinstance(v, str) or not _ENVNAME.match(v) or v.endswith("*"):
        raise _Problem(where, "expected an environment variable name")


def _schema_version(v: Any, where: str) -> None:
    if v != 1 or isinstance(v, bool):
        raise _Problem(where, "expected 1 (the only schema version)")


def _enum(*choices: str) -> Check:
    def check(v: Any, where: str) -> None:
        if v not in choices:
            raise _Problem(where, "expected one of %s" % ", ".join(choices))
    return check


def _key(where: str, key: str) -> str:
    return "%s.%s" % (where, key) if _IDENT.match(key) else '%s["%s"]' % (where, key)


def _map(value_check: Check, key_check: Optional[Check] = None) -> Check:
    def check(v: Any, where: str) -> None:
        if not isinstance(v, dict):
            raise _Problem(where, "expected a table")
        for k, item in v.items():
            if key_check:
                key_check(k, _key(where, k))
            value_check(item, _key(where, k))
    return check


def _table(spec: Mapping[str, Tuple[Check, bool]]) -> Check:
    def check(v: Any, where: str) -> None:
        if not isinstance(v, dict):
            raise _Problem(where, "expected a table")
        _check_table(v, spec, where)
    return check


def _array(spec: Mapping[str, Tuple[Check, bool]]) -> Check:
    def check(v: Any, where: str) -> None:
        if not isinstance(v, list):
            raise _Problem(where, "expected an array of tables ([[%s]])" % where)
        for i, item in enumerate(v):
            _table(spec)(item, "%s[%d]" % (where, i))
    return check


def _check_table(v: Dict[str, Any], spec: Mapping[str, Tuple[Check, bool]], where: str) -> None:
    for key, item in v.items():
        if key not in spec:
            raise _Problem(_key(where, key) if where else key, "unknown key",
                           "known keys here: %s" % ", ".join(spec))
        spec[key][0](item, _key(where, key) if where else key)
    for key, (_check, required) in spec.items():
        if required and key not in v:
            raise _Problem(_key(where, key) if where else key, "missing (required)")


SSH = {"user": (_str, False), "scp": (_bool, False), "sftp": (_bool, False),
       "rsync": (_bool, False), "note": (_str, False)}
SURVIVAL = {"tier": (_str, True), "path": (_str, True), "survives_stop": (_bool, True),
            "survives_destroy": (_bool, True), "cap": (_str, False), "note": (_str, False)}
TEARDOWN = {"name": (_str, True), "stops_billing": (_bool, True), "irreversible": (_bool, True),
            "destroys": (_strlist, True), "still_bills": (_strlist, False), "note": (_str, False)}
DANGER = {"what": (_str, True), "after": (_duration, True)}
SPOT = {"grace_s": (_number, True), "signal": (_str, True), "notice": (_str, False)}
RULE = {"class": (_ident, True), "pattern": (_regex, True), "remediation": (_str, True),
        "severity": (_enum(*SEVERITIES), False), "retryable": (_bool, False)}
PROXY = {"hook": (_str, False), "env": (_map(_str, _envname), False), "url": (_str, False),
         "http": (_str, False), "https": (_str, False), "no_proxy": (_str, False)}
HF = {"home": (_str, False), "endpoint": (_str, False)}
DETECT = {"env": (_strlist, False), "paths": (_strlist, False), "weak_paths": (_strlist, False),
          "min_paths": (_count, False), "priority": (_int, False)}
TOP: Dict[str, Tuple[Check, bool]] = {
    "schema": (_schema_version, False), "name": (_name, False),
    "platform": (_str, True), "kind": (_enum(*KINDS), True), "verified": (_bool, True),
    "provenance": (_str, False), "summary": (_str, False),
    "ssh": (_table(SSH), False), "python": (_str, False),
    "state_dir": (_str, False), "data_dir": (_str, False), "durable_dir": (_str, False),
    "watch": (_strlist, False), "inode_caps": (_map(_count), False),
    "thresholds": (_map(_number, _threshold), False),
    "proxy": (_table(PROXY), False), "hf": (_table(HF), False), "tensorboard_dir": (_str, False),
    "survival": (_array(SURVIVAL), False), "teardown": (_array(TEARDOWN), False),
    "danger_clock": (_array(DANGER), False), "conveniences": (_strlist, False),
    "spot": (_table(SPOT), False), "rule": (_array(RULE), False), "detect": (_table(DETECT), False),
}


def validate(data: Any, display: str = "profile") -> None:
    """Raise ClientError naming `display: key.path: problem` for the first problem found."""
    try:
        if not isinstance(data, dict):
            raise _Problem("(top)", "expected a table")
        _check_table(data, TOP, "")
    except _Problem as p:
        raise ClientError("%s: %s: %s" % (display, p.where, p.message),
                          p.hint or "see %s for the schema" % SCHEMA_DOC) from None


def duration_s(text: str) -> float:
    m = _DURATION.match(text)
    return float(m.group(1)) * _UNIT_S[m.group(2)] if m else 0.0


def humanize_duration(text: str) -> str:
    m = _DURATION.match(text)
    if not m:
        return text
    words = {"s": "second", "m": "minute", "h": "hour", "d": "day"}
    n = m.group(1)
    return "%s %s%s" % (n, words[m.group(2)], "" if n == "1" else "s")
