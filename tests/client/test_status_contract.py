"""The status contract has one source, docs/status.schema.json, and every reader follows it: the
client's check (statusdata.SHAPE) names only fields the schema has, with the schema's types; every
field a renderer or a verdict reads is one the check has checked; and the real agent's answer
passes the check. A field read but never checked once turned a box's answer into
`internal error: TypeError` instead of an Error naming the field."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict, Iterator, Set

import pytest

from rgt_client import exitcodes
from rgt_client.box.transport import Target
from rgt_client.errors import ClientError
from rgt_client.status import statusdata
from rgt_client.status.fetch import HostStatus
from rgt_client.status.poll import WatchEvent, patrol_verdict
from rgt_client.status.render import error_lines, render_status
from rgt_client.status.render_poll import patrol_detail, watch_lines
from tests.client.test_hostile import status_doc
from tests.client.test_render import FAILED, FULL, RUNNING, scenario
from tests.hostile import run_client

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "status.schema.json").read_text())


# -- the check against the schema ---------------------------------------------------------------

def _resolve(node: Dict[str, Any]) -> Dict[str, Any]:
    while "$ref" in node:
        node = SCHEMA["$defs"][node["$ref"].split("/")[-1]]
    return node


def _types(node: Dict[str, Any]) -> Set[str]:
    """The JSON types a schema node allows (an enum or a const: the types of its values)."""
    node = _resolve(node)
    if "type" in node:
        return set(node["type"] if isinstance(node["type"], list) else [node["type"]])
    values = node.get("enum", [node["const"]] if "const" in node else [])
    names = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}
    found = {names[type(v)] for v in values}
    if "anyOf" in node or "oneOf" in node:
        for sub in node.get("anyOf", node.get("oneOf", [])):
            found |= _types(sub)
    return found


_KIND_TYPES = {"s": {"string"}, "b": {"boolean"}, "i": {"integer"}, "n": {"number", "integer"},
               "f": {"number", "integer"}, "m": {"number", "integer", "string"}}


def _shape_against_schema(shape: Any, node: Dict[str, Any], path: str) -> Iterator[str]:
    """Every way the check's shape differs from the schema at `path`."""
    node = _resolve(node)
    allowed = _types(node) - {"null"}
    if isinstance(shape, str):
        if not allowed or not allowed & _KIND_TYPES[shape]:
            yield "%s: checked as %r, the schema says %s" % (path, shape, sorted(allowed) or node)
    elif isinstance(shape, list):
        if "array" not in allowed:
            yield "%s: checked as a list, the schema says %s" % (path, sorted(allowed))
        else:
            yield from _shape_against_schema(shape[0], node.get("items", {}), path + "[]")
    else:
        if "object" not in allowed:
            yield "%s: checked as an object, the schema says %s" % (path, sorted(allowed))
            return
        for key, sub in shape.items():
            if key == "*":
                extra = node.get("additionalProperties")
                if not isinstance(extra, dict):
                    yield "%s.*: checked for any key, the schema names its keys" % path
                else:
                    yield from _shape_against_schema(sub, extra, path + ".*")
            elif key not in node.get("properties", {}):
                yield "%s.%s: checked, not in the schema" % (path, key)
            else:
                yield from _shape_against_schema(sub, node["properties"][key], "%s.%s" % (path, key))


def test_every_field_the_client_checks_is_in_the_schema_with_its_type():
    assert list(_shape_against_schema(statusdata.SHAPE, SCHEMA, "$")) == []


def test_the_cause_fields_the_triage_writes_are_in_the_schema_and_the_check():
    cause = SCHEMA["$defs"]["cause"]["properties"]
    for key in ("decided_by", "overruled", "confidence", "runner_up", "tell_apart", "decided_by_fact", "similar"):
        assert key in cause and key in statusdata.SHAPE["runs"][0]["stages"][0]["cause"], key
    assert set(cause["confidence"]["enum"]) >= {"high", "medium", "low"}


def test_the_renderers_stage_types_name_the_checked_fields():
    stage = statusdata.SHAPE["runs"][0]["stages"][0]
    assert set(statusdata.Stage.__annotations__) == set(stage)
    assert set(statusdata.Cause.__annotations__) == set(stage["cause"])
    assert set(statusdata.Progress.__annotations__) == set(stage["progress"])
    assert set(statusdata.SlurmWaiting.__annotations__) == set(stage["slurm_waiting"])


def test_the_real_agents_status_passes_the_check(agent):
    dead = json.loads(agent("status", "--json").stdout)
    assert statusdata.validate(dead, "box") is dead


# -- every field read is a field checked ---------------------------------------------------------

class _Seen(dict):
    """A status that writes down the path of every field read from it (`runs[].stages[].cause`)."""

    def __init__(self, value: Dict[str, Any], path: str, seen: Set[str]) -> None:
        super().__init__(value)
        self._path, self._seen = path, seen

    def _at(self, key: Any) -> str:
        return "%s.%s" % (self._path, key) if self._path else str(key)

    def __getitem__(self, key: Any) -> Any:
        self._seen.add(self._at(key))
        return _wrap(dict.__getitem__(self, key), self._at(key), self._seen)

    def get(self, key: Any, default: Any = None) -> Any:
        self._seen.add(self._at(key))
        return _wrap(dict.get(self, key, default), self._at(key), self._seen)

    def __contains__(self, key: Any) -> bool:
        self._seen.add(self._at(key))
        return dict.__contains__(self, key)

    def items(self) -> Any:  # type: ignore[override]
        return [(k, _wrap(v, self._at("*"), self._seen)) for k, v in dict.items(self)]

    def values(self) -> Any:  # type: ignore[override]
        return [v for _k, v in self.items()]


class _SeenList(list):
    def __init__(self, value: list, path: str, seen: Set[str]) -> None:
        super().__init__(_wrap(v, path + "[]", seen) for v in value)


def _wrap(value: Any, path: str, seen: Set[str]) -> Any:
    if isinstance(value, dict) and not isinstance(value, _Seen):
        return _Seen(value, path, seen)
    if isinstance(value, list) and not isinstance(value, _SeenList):
        return _SeenList(value, path, seen)
    return value


def _checked(shape: Any, path: str = "") -> Set[str]:
    out: Set[str] = set()
    if isinstance(shape, list):
        return _checked(shape[0], path + "[]")
    if isinstance(shape, dict):
        for key, sub in shape.items():
            at = "%s.%s" % (path, key) if path else key
            out.add(at)
            out |= _checked(sub, at)
    return out


def _normal(path: str, checked: Set[str]) -> str:
    """runs[].stages[].metrics.loss -> runs[].stages[].metrics.* where the check has a `*`."""
    parts = path.split(".")
    for i in range(1, len(parts)):
        head = ".".join(parts[:i])
        if head + ".*" in checked:
            parts[i] = "*"
    return ".".join(parts)


def _rich_status() -> Dict[str, Any]:
    """One answer that takes every branch of the renderers: runs in every state, a Slurm stage, a
    cause with all its notes, GPUs held by runs, a full state dir, cost, alerts, events."""
    failed = copy.deepcopy(FAILED)
    failed["stages"][0]["cause"].update(
        decided_by="oom_kill 0 -> 1", overruled=["line 4: RuntimeError (code_error)"] * 3,
        confidence="medium", runner_up="code_error", tell_apart="look at dmesg", decided_by_fact="oom_kill",
        retryable=False, similar=[{"source": "pytorch/pytorch#1", "url": "https://github.com/pytorch/pytorch/issues/1",
                                   "class": "cgroup_oom", "why": "a worker killed", "fix": "fewer workers",
                                   "score": 0.62}])
    failed["stages"][0].update(warnings=["loss became NaN"], exit_code=137, log="logs/train.log",
                               metrics={"loss": "nan", "acc": 0.5})
    running = copy.deepcopy(RUNNING)
    running.update(group="sweep", matrix={"lr": 0.1}, gpus=[0], created_at="2025-01-02T08:00:00Z",
                   started_at="2025-01-02T08:00:01Z", pending_pickup=True,
                   artifacts={"files": 3, "bytes": 1e9}, cost={"hours": 1.5, "spent": 3.0})
    running["stages"][1].update(kind="run", slurm_job_id="42", slurm_state="PENDING",
                                slurm_waiting={"text": "waiting for resources", "blocked": True})
    queued = {"name": "q1", "state": "queued", "stages": [{"name": "a", "state": "pending"}]}
    done = {"name": "d1", "state": "succeeded", "ended_at": "2025-01-02T09:30:00Z",
            "stages": [{"name": "t", "state": "succeeded", "warnings": ["slow"]}]}
    status = scenario([running, failed, queued, done], storage=dict(FULL), state="running",
                      machine_restarted=True)
    status["health"]["gpus"] = [{"index": 0, "name": "A100", "util_pct": 90.0, "memory_used_bytes": 4e9,
                                 "memory_total_bytes": 8e10, "temperature_c": 60, "power_w": 300,
                                 "throttle_reasons": ["HW_SLOWDOWN"], "lost": False, "run": "a3",
                                 "xid_last": {"code": 79}}]
    status["health"]["memory"].update(current_bytes=8e9, host_total_bytes=6.4e10)
    status["alerts"] = [{"severity": "critical", "type": "disk_full", "summary": "/ is 99% full"}]
    status["events"] = [{"at": "2025-01-02T09:59:00Z", "severity": "info", "type": "run_started",
                         "summary": "a3 started", "run": "a3", "stage": "train"}]
    status["metrics_history"] = {"b1/train/loss": {"stage": "train", "metric": "loss", "values": [1.0, 0.5]}}
    status["cost"] = {"price_per_hour": 2.0, "currency": "USD", "since": "2025-01-02T08:00:00Z", "hours": 2.0,
                      "spent": 4.0, "budget": 10.0, "budget_used_pct": 40.0, "idle_alert_after_s": 1800,
                      "stop_deadline_at": "2025-01-02T12:00:00Z", "stop_deadline_in_s": 7200,
                      "idle": {"since": "2025-01-02T09:00:00Z", "idle_s": 60, "spent": 0.03,
                               "reminders_sent": 1, "next_reminder_at": "2025-01-02T10:30:00Z"}}
    return statusdata.validate(status, "box")


def _read_paths(status: Dict[str, Any]) -> Set[str]:
    seen: Set[str] = set()
    target = Target("box")
    client = {"host": "box", "show_events": True, "show_all": True, "build_match": False,
              "local_build_sha256": "b" * 64}
    for agent in ({}, {"running": False, "state": "stopped"}, {"state": "stale"}):
        one = copy.deepcopy(status)
        one["agent"].update(agent)
        render_status(_wrap(one, "", seen), client)
        for since in (60.0, 1e9):
            hs = HostStatus(target, status=_wrap(copy.deepcopy(one), "", seen))
            patrol_detail(patrol_verdict(hs, since), "box")
        for run in one["runs"]:
            for kind in ("run", "ended"):
                watch_lines(WatchEvent(kind, run=_wrap(copy.deepcopy(run), "runs[]", seen),
                                       status=_wrap(copy.deepcopy(one), "", seen)), "box", str(run["name"]))
    error_lines("box", ClientError("x", "y", exitcodes.ERROR))
    return seen


def test_every_field_the_renderers_read_is_checked_first():
    checked = _checked(statusdata.SHAPE)
    unchecked = sorted({_normal(p, checked) for p in _read_paths(_rich_status())} - checked)
    assert unchecked == []


# -- the drift it found --------------------------------------------------------------------------

def test_a_cause_with_five_overruled_notes_in_an_object_is_a_malformed_status_not_an_internal_error(hostile, sshd):
    doc = status_doc()
    doc["runs"][0]["state"] = "failed"
    doc["runs"][0]["stages"][0].update(state="failed", cause={
        "class": "cgroup_oom", "summary": "killed", "remediation": "smaller batches", "retryable": False,
        "evidence": ["oom_kill 0 -> 1"], "overruled": {"note%d" % i: "line %d: an earlier error" % i for i in range(5)}})
    hostile.answer("status", stdout=doc)
    res = run_client(["status", "rgt-box"] + hostile.args(), sshd.config)
    assert res.rc == exitcodes.ERROR, res.text
    assert "rgt-box sent a malformed status: runs[0].stages[0].cause.overruled: expected a list" in res.err_text
    assert "internal error" not in res.err_text and "Traceback" not in res.err_text


@pytest.mark.parametrize("field, value, named", [
    ("decided_by", ["a", "list"], "cause.decided_by: expected a string"),
    ("overruled", ["one", 2], "cause.overruled[1]: expected a string"),
    ("confidence", 0.9, "cause.confidence: expected a string"),
    # the nearest known failures a box names: each field typed before a renderer draws it
    ("similar", {"source": "x"}, "cause.similar: expected a list"),
    ("similar", [{"source": "x", "score": "0.9"}], "cause.similar[0].score: expected a finite number"),
    ("similar", [{"source": "x", "score": float("inf")}], "cause.similar[0].score: expected a finite number"),
    ("similar", [{"source": ["x"], "score": 0.5}], "cause.similar[0].source: expected a string"),
    ("similar", ["like pytorch#1"], "cause.similar[0]: expected an object"),
])
def test_a_cause_note_of_the_wrong_type_is_named(field, value, named):
    failed = copy.deepcopy(FAILED)
    failed["stages"][0]["cause"][field] = value
    with pytest.raises(ClientError) as err:
        statusdata.validate(scenario([failed]), "box")
    assert named in err.value.message
