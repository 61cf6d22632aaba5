"""quickjson reads and writes exactly what the json package does, without importing it: any value
and any text, hostile ones included (NaN, 10**400, lone surrogates, control characters, a BOM,
trailing data), and the box's `status` path imports neither json nor re."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boxagent.base import quickjson
from tests.conftest import fuzz_examples

REPO = Path(__file__).resolve().parents[2]
FUZZ = settings(max_examples=fuzz_examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])

KEYS = st.one_of(st.text(max_size=8), st.integers(), st.floats(allow_nan=True), st.booleans(), st.none())
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=30), st.sampled_from([10 ** 400, -(2 ** 63), 1e308, 2.49e-320, "\ud800",
                                                           "\x00\x1f\u2028", "é\U0001f600"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner),
    st.dictionaries(KEYS, inner, max_size=4)), max_leaves=16)


class Odd:
    def __str__(self) -> str:
        return "an object \"quoted\"\n"


@FUZZ
@given(VALUES)
def test_dumps_writes_what_json_dumps_writes(value):
    assert quickjson.dumps(value) == json.dumps(value, indent=1, ensure_ascii=False, default=str)


def test_dumps_of_what_json_defaults_to_str_and_of_bad_values():
    value = {"a": [Odd(), {1.5: set()}, ()], "b": {}, "c": [], 7: True}
    assert quickjson.dumps(value) == json.dumps(value, indent=1, ensure_ascii=False, default=str)
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        quickjson.dumps(loop)
    with pytest.raises(TypeError, match="keys must be"):
        quickjson.dumps({(1, 2): 3})


@FUZZ
@given(VALUES, st.sampled_from([None, 1, 2]), st.sampled_from(["", " ", "\n\t\r "]))
def test_loads_reads_what_json_writes(value, indent, pad):
    text = pad + json.dumps(value, indent=indent) + pad
    got, want = quickjson.loads(text), json.loads(text)
    assert json.dumps(got) == json.dumps(want)       # NaN != NaN: compare their texts


@FUZZ
@given(st.text(alphabet=st.sampled_from(list('{}[]":,. \t\n0123456789-+eEtruefalsnNI\\\ufeff\x00a')), max_size=40))
def test_loads_fails_where_json_fails(text):
    try:
        want = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            quickjson.loads(text)
        return
    assert json.dumps(quickjson.loads(text)) == json.dumps(want)


@pytest.mark.parametrize("text", ["", "   ", "[1] x", "[1,]", "\ufeff[]", '{"a":1', '"\x01"', "NaNx", "01"])
def test_loads_refuses_what_json_refuses(text):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        quickjson.loads(text)


def test_the_box_status_path_imports_neither_json_nor_re(tmp_path):
    """Each cost the box's one-round-trip `status` 7 ms (re's enum, functools, collections)."""
    env = dict(os.environ, RGT_HOME=str(tmp_path), PYTHONPATH=str(REPO))
    code = ("import sys; from boxagent import cli; "
            "rc = cli.main(['status', '--json', '--events', '0']); "
            "sys.stderr.write(repr(sorted(m for m in ('json', 're', 'enum', 'typing') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stderr.strip().splitlines()[-1] == "[]", out.stderr
    assert json.loads(out.stdout)["agent"]["running"] is False
