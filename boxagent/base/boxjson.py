"""The one reader of JSON that comes from the box (events, a run's history, status.json, state,
the agent's answers on the laptop): any line, however hostile, is a value or a skip, never a crash.

One line of 1,000 nested `[` in events.jsonl raised RecursionError, which every reader let
through (they caught ValueError): `rgt-agent start` failed, the daemon's notifier stopped while
status said nothing failed, `watch` printed a traceback and every `wait_for_change` failed. So
the text is bounded in size before it is parsed, parsed under a guard that turns every error a
hostile line can raise (RecursionError, MemoryError, UnicodeError, ValueError) into BadJSON (a
ValueError: callers that skip a corrupt line skip this too), and the value is bounded in depth:
a 900-deep list parses under the interpreter's limit and would blow the stack of the next
recursive reader (a renderer, json.dumps).
"""
from __future__ import annotations

from boxagent.base import quickjson

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any, Union

MAX_DEPTH = 100           # a job nests at most 32 (engine/joblimits); status and events wrap it a few more
MAX_BYTES = 64 << 20      # above any document the agent writes (status.json: a few MB)


class BadJSON(ValueError):
    """The text holds no JSON value within the bounds; str() says why (never the text)."""


def loads(raw: Union[bytes, str], max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of `raw` (bytes are read as UTF-8, bad bytes replaced); BadJSON otherwise."""
    if len(raw) > max_bytes:
        raise BadJSON("%d bytes, over the %d-byte bound" % (len(raw), max_bytes))
    try:
        text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else raw
        value = quickjson.loads(text)
    except RecursionError:
        raise BadJSON("nested deeper than this reader follows") from None
    except MemoryError:
        raise BadJSON("too big to parse in the memory there is") from None
    except (ValueError, UnicodeError, TypeError, OverflowError) as exc:
        raise BadJSON("not JSON (%s)" % type(exc).__name__) from None
    if _openers(text) > max_depth and _deeper_than(value, max_depth):
        raise BadJSON("nested deeper than %d lists/objects" % max_depth)
    return value


def value_or(raw: Union[bytes, str], default: Any = None, max_bytes: int = MAX_BYTES) -> Any:
    """loads(), or `default` for whatever holds no value within the bounds (the line is skipped)."""
    try:
        return loads(raw, max_bytes)
    except BadJSON:
        return default


def _openers(text: str) -> int:
    """An upper bound of the depth, in C speed: most documents have fewer brackets than the
    bound at all, and need no walk."""
    return text.count("[") + text.count("{")


def _deeper_than(value: Any, limit: int) -> bool:
    """Iterative: the walk itself must not recurse on the value it checks."""
    if not isinstance(value, (dict, list)):
        return False
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False
