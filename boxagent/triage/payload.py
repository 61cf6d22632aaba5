"""Non-finite numbers under other names: an exception whose payload is NaN/inf is the run
diverging, whatever its type says. `AssertionError: tensor([nan, nan], device='cuda:0')`, a
check that printed the values it refused (`ValueError: ... found invalid values:` then
`tensor([[nan, nan], ...`), `RuntimeError: Loss is not finite: nan`.

reread(hit, following) returns a code_error hit whose line, or the few lines that detail it,
carry such a payload as a divergence hit (`was` keeps code_error, `emitter` says why), or
the hit unchanged (same object)."""
from __future__ import annotations

import re
from typing import Any, Dict

Hit = Dict[str, Any]

# A printed tensor/array whose first values are NaN/inf, a bare NaN value after a colon or an
# equals sign at the end of the message, or the words "not finite" / "non-finite".
_PAYLOAD = re.compile(
    r"(tensor|array)\(\[*\s*-?(nan|inf)\b|\[\[?\s*-?(nan|inf)(,|\s|\])|"
    r"(:|=|is|of) ?-?(nan|NaN|inf)\.?\s*$|[Nn]ot finite|[Nn]on-finite|contains? (NaN|nan|inf)")
_EXCEPTION = re.compile(r"(^|[.\s])[A-Z][A-Za-z0-9_]*(Error|Exception|Failure)(:|$)|"
                        r"Assertion `|AssertionError")
WHO = "its payload (NaN/inf values)"


def reread(h: Hit, following: str = "") -> Hit:
    if h.get("class") != "code_error" or h.get("tag") or h.get("source", "builtin") != "builtin":
        return h
    line = str(h.get("line") or "")
    if not _EXCEPTION.search(line):
        return h
    if not (_PAYLOAD.search(line) or any(_PAYLOAD.search(x) for x in following.splitlines()[:3])):
        return h
    out = dict(h, was="code_error", emitter=WHO, **{"class": "divergence"})
    if following:
        out["detail"] = following
    out.pop("remediation", None)
    out.pop("retryable", None)
    return out
