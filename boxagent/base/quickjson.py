"""JSON read and written with CPython's own C scanner and string encoder, without `import json`.

`import json` imports `re`, and `re` imports enum, functools and collections: 7 ms of CPU on a
2-core box, a third of what the one-round-trip `status` cost there after the interpreter's own
start, and the same again on the laptop before `status` could start its ssh call. The parsing
itself was never the cost: `_json` (the C accelerator the json package wraps) scans a document
without any of it. So this module drives `_json` directly and writes indented text itself.

What it reads and writes is exactly what `json.loads(text)` and `json.dumps(obj, indent=1,
ensure_ascii=False, default=str)` read and write (tests/core/test_quickjson.py holds it to that,
value by value): the same NaN/Infinity, the same errors (ValueError), the same bytes out.
Without `_json` (an interpreter built without it) both fall back to the json package.
"""
from __future__ import annotations

TYPE_CHECKING = False   # annotations only: importing typing costs every status on the box a few ms
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List

try:
    import _json
except ImportError:          # pragma: no cover - CPython always builds _json; PyPy has no _json
    _json = None             # type: ignore[assignment]

_WHITESPACE = " \t\n\r"       # JSON's whitespace, as json.decoder.WHITESPACE matches it
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _Context(object):
    """What the C scanner reads off json.JSONDecoder, with json.loads' defaults."""
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_CONSTANTS.__getitem__)
    memo: Dict[Any, Any] = {}  # read only by the pure-Python scanner; the C one keeps its own


_scan = _json.make_scanner(_Context()) if _json is not None else None  # type: ignore[arg-type]
_quote = _json.encode_basestring if _json is not None else str


def loads(text: str) -> Any:
    """json.loads(text) for a str: the value, or ValueError (json's own JSONDecodeError when the
    scanner raises it)."""
    if _scan is None:         # pragma: no cover
        import json
        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration as stop:
        raise ValueError("Expecting value: char %d" % stop.value) from None
    if end != len(text) and text[end:].strip(_WHITESPACE):
        raise ValueError("Extra data: char %d" % end)
    return value


def dumps(obj: Any) -> str:
    """json.dumps(obj, indent=1, ensure_ascii=False, default=str)."""
    if _scan is None:         # pragma: no cover
        import json
        return json.dumps(obj, indent=1, ensure_ascii=False, default=str)
    out: List[str] = []
    _write(obj, out, 0, {})
    return "".join(out)


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "Infinity"
    if value == -float("inf"):
        return "-Infinity"
    return float.__repr__(value)


def _scalar(value: Any) -> Any:
    """The text of a scalar, or None for a list, a dict or anything else."""
    if isinstance(value, str):
        return _quote(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    return None


def _write(value: Any, out: List[str], level: int, seen: dict) -> None:
    text = _scalar(value)
    if text is not None:
        out.append(text)
    elif isinstance(value, (list, tuple)):
        _container(value, out, level, seen, "[]", _items_of_list)
    elif isinstance(value, dict):
        _container(value, out, level, seen, "{}", _items_of_dict)
    else:                     # default=str: its text, written as the string it is
        _write(str(value), out, level, seen)


def _container(value: Any, out: List[str], level: int, seen: dict, brackets: str,
               items: Callable[[Any], Any]) -> None:
    if not value:
        out.append(brackets)
        return
    if id(value) in seen:
        raise ValueError("Circular reference detected")
    seen[id(value)] = value
    indent = "\n" + " " * (level + 1)
    out.append(brackets[0])
    first = True
    for key, item in items(value):
        out.append(indent if first else "," + indent)
        first = False
        if key is not None:
            out.append(key)
        _write(item, out, level + 1, seen)
    out.append("\n" + " " * level + brackets[1])
    del seen[id(value)]


def _items_of_list(value: Any) -> Any:
    for item in value:
        yield None, item


def _items_of_dict(value: dict) -> Any:
    for key, item in value.items():
        yield _key(key) + ": ", item


def _key(key: Any) -> str:
    if isinstance(key, str):
        return _quote(key)
    if isinstance(key, float):
        return _quote(_float(key))
    if key is True or key is False or key is None:
        return _quote(_scalar(key))
    if isinstance(key, int):
        return _quote(int.__repr__(key))
    raise TypeError("keys must be str, int, float, bool or None, not %s" % key.__class__.__name__)
