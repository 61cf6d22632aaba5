"""Every screen survives any JSON value in any field: the status text, patrol's line and the
report page, fed documents where one field (or a history point) is replaced by any JSON value,
including the numbers Python's json reads from a hostile file (1e999 -> inf, NaN, Infinity,
10**400, 1e308 as a time). The only way out other than a screen is the client's own "malformed
status" error (Error + Hint); a field fuzz of 400 history documents once crashed the report 389
times with an OverflowError."""
from __future__ import annotations

import copy
import json
from typing import Any, List

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boxagent.runlog import store
from rgt_client.status import statusdata
from rgt_client.errors import ClientError
from rgt_client.status.fetch import HostStatus
from rgt_client.status.poll import patrol_verdict
from rgt_client.status.render import render_status
from rgt_client.status.render_poll import patrol_detail
from rgt_client.report.page import render as render_report
from tests.client.test_render import BASE, FAILED, RUNNING
from tests.conftest import fuzz_examples
from tests.report.conftest import gpu, run_block, status as report_status

HOSTILE_NUMBERS = [float("inf"), float("-inf"), float("nan"), 1e308, -1e308, 10 ** 400, 2.49e-320, 0, -1,
                   2 ** 63, 1e18, True]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=30), st.sampled_from(HOSTILE_NUMBERS))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                    max_leaves=12)
FUZZ = settings(max_examples=fuzz_examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _paths(doc: Any, prefix: tuple = ()) -> List[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _replace(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


STATUS = dict(copy.deepcopy(BASE), runs=[RUNNING, FAILED], cost={
    "price_per_hour": 2.49, "currency": "USD", "since": "2025-01-01T00:00:00Z", "hours": 10.5, "spent": 26.1,
    "budget": 50.0, "budget_used_pct": 52.2, "idle_alert_after_s": 1800.0, "idle": None,
    "stop_deadline_at": None, "stop_deadline_in_s": None})
STATUS_PATHS = _paths(STATUS)


def _screens(doc: Any) -> None:
    try:
        status = statusdata.validate(doc, "box")
    except ClientError as exc:
        assert "malformed status" in exc.message
        return
    text = render_status(status, {"host": "box", "local_build_sha256": "a" * 64})
    assert isinstance(text, str)
    line = patrol_detail(patrol_verdict(HostStatus(target=None, status=status), 3600.0), "box")
    assert "\n" not in line


@FUZZ
@given(st.sampled_from(STATUS_PATHS), JSON)
def test_any_json_value_in_any_status_field_gives_a_screen_or_the_malformed_error(path, value):
    _screens(_replace(STATUS, path, value))


def _report_doc() -> dict:
    doc = report_status([run_block("r1")], gpus=[gpu(0)])
    return {"host": "box", "run": {"name": "r1", "state": "running", "started_at": "2030-01-01T00:00:00Z",
                                   "stages": [{"name": "train", "state": "running", "metrics": {"loss": 0.5}}]},
            "agent": doc.get("agent"), "cost": None,
            "history": {"source": "history.jsonl", "gpu_cols": ["util_pct", "mem_pct"],
                        "points": [{"t": 1893456000.0 + 60 * i, "s": 60, "m": [50.0, 1.0],
                                    "g": {"0": [90.0, 40.0]}, "x": {"loss": 1.0 / (i + 1)}, "st": "train"}
                                   for i in range(5)],
                        "events": [{"id": "e1", "at": "2030-01-01T00:01:00Z", "ts": 1893456060.0,
                                    "type": "stage_started", "severity": "info", "run": "r1", "stage": "train"}],
                        "info": []}}


REPORT = _report_doc()
REPORT_PATHS = _paths(REPORT)


@FUZZ
@given(st.sampled_from(REPORT_PATHS), JSON)
def test_any_json_value_in_any_report_field_gives_a_page(path, value):
    page = render_report(_replace(REPORT, path, value))
    assert page.startswith("<!DOCTYPE html>")


@FUZZ
@given(st.sampled_from(["t", "s", "m", "g", "x", "st"]), st.sampled_from(HOSTILE_NUMBERS))
def test_a_bad_number_in_history_gives_a_report_with_the_point_skipped(field, bad):
    doc = _replace(REPORT, ("history", "points", 2, field), bad)
    page = render_report(doc)
    assert page.startswith("<!DOCTYPE html>") and "r1" in page


def test_history_jsonl_with_1e999_infinity_and_t_1e308_reads_and_reports(tmp_path):
    """The field repro, through the agent's reader: the bad points are skipped, the rest drawn."""
    path = tmp_path / "history.jsonl"
    good = [{"k": "p", "t": 1893456000.0 + 60 * i, "s": 60, "m": [50.0, 1.0], "x": {"loss": 0.5}}
            for i in range(4)]
    lines = [json.dumps({"k": "h", "run": "r1", "step_s": 60})] + [json.dumps(p) for p in good]
    lines += ['{"k":"p","t":1e999,"m":[1,2]}', '{"k":"p","t":Infinity,"m":[1,2]}', '{"k":"p","t":1e308}',
              '{"k":"p","t":1893456999.0,"m":[1e999,Infinity],"x":{"loss":-Infinity}}']
    path.write_text("\n".join(lines) + "\n")
    hist = store.read(str(path))
    assert [p["t"] for p in hist["points"]] == [p["t"] for p in good] + [1893456999.0]
    doc = dict(REPORT, history=dict(REPORT["history"], points=hist["points"]))
    assert render_report(doc).startswith("<!DOCTYPE html>")
