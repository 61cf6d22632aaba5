"""Every answer has a byte budget, and says what it left out.

A model's context is what it pays with. On a box with 1,000 active runs get_status once
answered 530 KB and every wait_for_change 92 KB, so the answer size grew with the box, not
with the question. The tools choose what matters first (summary.py lists running and failed
runs, counts the rest); this is the backstop that holds whatever a box sends to the budget:
the longest list is shortened from its end until the JSON fits, then the longest strings (by
UTF-8 bytes), then whole entries below the top (a box chooses dict keys too), and `left_out`
says how many items, bytes or entries of which field went, and how to get them.
"""
from __future__ import annotations

import json
from typing import Any

BUDGET = 16 * 1024          # bytes of a result's JSON (the text block is the same JSON)
LOGS_BUDGET = 56 * 1024     # read_logs: 48 KB of log text (its bound since the start) and its JSON
STRING_FLOOR = 200          # bytes: a string is cut to this, with a mark, when no list is left to shorten
HOW = "ask for less: get_status(host, run=NAME) for one run, get_status(host, page=N) for the next runs"
# left_out names a field by its path, and a path is made of the box's dict keys: a 60,000-character
# key once came back twice in left_out, 120 KB for a 16 KB budget. A path is cut to PATH_BYTES of
# JSON, and after LEFT_NAMED paths the rest are counted together.
PATH_BYTES = 100
LEFT_NAMED = 12
OTHER = "(other fields)"


def size(data: Any) -> int:
    return len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def fit(data: dict[str, Any], budget: int = BUDGET) -> dict[str, Any]:
    """data, shortened until its JSON is at most `budget` bytes; what went is in `left_out`."""
    if size(data) <= budget:
        return data
    left: dict[str, int] = {}
    while True:
        over = size(data) + size({"left_out": {"items": left, "how": HOW}}) - budget
        if over <= 0:
            break
        found = _longest(data, "")
        if found is not None:
            holder, key, path = found
            items = holder[key]
            each = max(1, size(items) // len(items))
            n = min(len(items), max(1, over // each))      # most of the excess at once, then one by one
            del items[len(items) - n:]
            _note(left, path, n)
            continue
        cut = _longest_string(data, "")
        if cut is not None:
            holder, key, path = cut
            raw = holder[key].encode("utf-8")
            # bytes, not characters: 200 four-byte characters are 800 bytes
            kept = raw[:max(STRING_FLOOR, len(raw) // 2)].decode("utf-8", "ignore")
            holder[key] = kept + "…[cut]"
            _note(left, path, len(raw) - len(kept.encode("utf-8")), " (bytes)")
            continue
        # Nothing left to shorten, yet over: dict keys are the box's too (40 keys of 60 emoji once
        # kept diagnose at 54 KB). Drop the biggest entry below the top; last, the answer itself.
        drop = _biggest_entry(data, "")
        if drop is None:
            data = {}
            _note(left, "(the whole answer)", 1)
            break
        holder, key, path = drop
        del holder[key]
        _note(left, path, 1)
    data["left_out"] = {"items": left, "how": HOW}
    if size(data) > budget:        # only a budget too small for left_out itself
        data = {"left_out": {"items": {"(the whole answer)": 1}, "how": HOW}}
    return data


def _note(left: dict[str, int], path: str, n: int, unit: str = "") -> None:
    """Count n under path in left_out: the path cut to PATH_BYTES of JSON, and past LEFT_NAMED
    paths under OTHER."""
    whole, path = path, path[:PATH_BYTES]
    while size(path) > PATH_BYTES:                  # escapes and wide characters count in bytes
        path = path[:-1]
    if path != whole:
        path += "…"
    name = path + unit
    if name not in left and len(left) >= LEFT_NAMED:
        name = OTHER + unit
    left[name] = left.get(name, 0) + n


def _biggest_entry(node: Any, path: str, top: bool = True) -> tuple[Any, Any, str] | None:
    """(holder, key, path) of the dict entry with the most JSON bytes, key included, below the
    answer's own top-level fields (a top-level field is kept while anything under it can go)."""
    best: tuple[int, Any, Any, str] | None = None
    for holder, key, sub in _children(node, path):
        value = holder[key]
        if not top and isinstance(holder, dict):
            n = size({key: value})
            if best is None or n > best[0]:
                best = (n, holder, key, sub)
        if isinstance(value, (dict, list)):
            inner = _biggest_entry(value, sub, False)
            if inner is not None:
                n = size({inner[1]: inner[0][inner[1]]}) if isinstance(inner[0], dict) else 0
                if best is None or n > best[0]:
                    best = (n,) + inner
    if best is None and top:
        found = [(size({k: node[k]}), node, k, str(k)) for k in node if k != "left_out"] if isinstance(node, dict) else []
        best = max(found, key=lambda t: t[0]) if found else None
    return best[1:] if best else None


def _longest(node: Any, path: str) -> tuple[Any, Any, str] | None:
    """(holder, key, path) of the non-empty list with the most JSON bytes."""
    best: tuple[int, Any, Any, str] | None = None
    for holder, key, sub in _children(node, path):
        value = holder[key]
        if isinstance(value, list) and value:
            n = size(value)
            if best is None or n > best[0]:
                best = (n, holder, key, sub)
        inner = _longest(value, sub) if isinstance(value, (dict, list)) else None
        if inner is not None:
            n = size(inner[0][inner[1]])
            if best is None or n > best[0]:
                best = (n,) + inner
    return best[1:] if best else None


def _longest_string(node: Any, path: str) -> tuple[Any, Any, str] | None:
    best: tuple[int, Any, Any, str] | None = None
    for holder, key, sub in _children(node, path):
        value = holder[key]
        n = len(value.encode("utf-8")) if isinstance(value, str) else 0
        if n > STRING_FLOOR + 8 and (best is None or n > best[0]):
            best = (n, holder, key, sub)
        elif isinstance(value, (dict, list)):
            inner = _longest_string(value, sub)
            m = len(inner[0][inner[1]].encode("utf-8")) if inner is not None else 0
            if inner is not None and (best is None or m > best[0]):
                best = (m,) + inner
    return best[1:] if best else None


def _children(node: Any, path: str) -> list[tuple[Any, Any, str]]:
    if isinstance(node, dict):
        return [(node, k, "%s.%s" % (path, k) if path else str(k)) for k in node if k != "left_out"]
    if isinstance(node, list):
        return [(node, i, "%s[]" % path) for i in range(len(node))]
    return []
