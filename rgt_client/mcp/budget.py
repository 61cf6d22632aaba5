"""Every answer has a byte budget, and says what it left out.

A model's context is what it pays with. On a box with 1,000 active runs get_status once
answered 530 KB and every wait_for_change 92 KB, so the answer size grew with the box, not
with the question. The tools choose what matters first (summary.py lists running and failed
runs, counts the rest); this is the backstop that holds whatever a box sends to the budget:
the longest list is shortened from its end until the JSON fits, and `left_out` says how
many items of which field went, and how to get them.
"""
from __future__ import annotations

import json
from typing import Any

BUDGET = 16 * 1024          # bytes of a result's JSON (the text block is the same JSON)
LOGS_BUDGET = 56 * 1024     # read_logs: 48 KB of log text (its bound since the start) and its JSON
STRING_FLOOR = 200          # a string is cut to this, with a mark, when no list is left to shorten
HOW = "ask for less: get_status(host, run=NAME) for one run, get_status(host, page=N) for the next runs"


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
            left[path] = left.get(path, 0) + n
            continue
        cut = _longest_string(data, "")
        if cut is None:
            break
        holder, key, path = cut
        text = holder[key]
        keep = max(STRING_FLOOR, len(text) // 2)
        if keep >= len(text):
            break
        holder[key] = text[:keep] + "…[cut]"
        left[path + " (chars)"] = left.get(path + " (chars)", 0) + len(text) - keep
    data["left_out"] = {"items": left, "how": HOW}
    return data


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
        if isinstance(value, str) and len(value) > STRING_FLOOR + 8 and (best is None or len(value) > best[0]):
            best = (len(value), holder, key, sub)
        elif isinstance(value, (dict, list)):
            inner = _longest_string(value, sub)
            if inner is not None and (best is None or len(inner[0][inner[1]]) > best[0]):
                best = (len(inner[0][inner[1]]),) + inner
    return best[1:] if best else None


def _children(node: Any, path: str) -> list[tuple[Any, Any, str]]:
    if isinstance(node, dict):
        return [(node, k, "%s.%s" % (path, k) if path else str(k)) for k in node if k != "left_out"]
    if isinstance(node, list):
        return [(node, i, "%s[]" % path) for i in range(len(node))]
    return []
