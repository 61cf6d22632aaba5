"""The smaller agent commands and outputs: configure, logs, handbook, version, status filters,
events (ids, rotation, heartbeat), preflight, the thread cap, HANDBOOK.md."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from boxagent.wire import events as events_mod
from tests.realbox import job


def test_configure_writes_config_atomically_0600_and_refuses_bad_input(box):
    out = box.agent("configure", stdin=json.dumps({"host": "box1", "sample_every": 5, "profile": {"name": "autodl"}}))
    assert out.returncode == 0, out.stderr
    path = box.home / "config.json"
    assert json.loads(path.read_text())["host"] == "box1"
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    for bad, msg in (("not json", "not valid JSON"), ("[1]", "must be a JSON object"),
                     ('{"sample_every": "fast"}', "config.sample_every"), ('{"profile": 3}', "config.profile")):
        out = box.agent("configure", stdin=bad)
        assert out.returncode == 2 and msg in out.stderr and "Traceback" not in out.stderr
    assert json.loads(path.read_text())["host"] == "box1"      # nothing written on error


def test_host_from_config_reaches_events_and_status(box):
    box.agent("configure", stdin=json.dumps({"host": "gpu-box-7"}))
    box.start()
    assert box.status_file()["host"] == "gpu-box-7"
    assert box.events("daemon_started")[0]["host"] == "gpu-box-7"


def test_logs_command(box):
    from boxagent.daemon import reading
    from boxagent.base.errors import UsageError
    from boxagent.base.home import Home
    box.submit(job("lg", box.workdir, {"name": "a", "run": "for i in 1 2 3 4 5; do echo line$i; done"},
                   {"name": "b", "run": "echo bee"}))
    box.start()
    box.wait_run("lg")
    out = box.agent("logs", "lg", "--stage", "a", "-n", "2")
    assert out.returncode == 0 and out.stdout == "line4\nline5\n"
    both = box.agent("logs", "lg", "-n", "1").stdout            # every stage that ran, with headers
    assert both.startswith("==> a (attempt 1): ") and "line5\n" in both and both.endswith("<==\nbee\n")
    home = Home(str(box.home))
    assert reading.logs(home, "lg", "a", 0, None).count("line") == 5
    for args, msg in ((("lg", "zz", 5, None), "no stage"), (("nope", None, 5, None), "no run named"),
                      (("lg", "a", 5, 9), "no log for attempt 9")):
        with pytest.raises(UsageError) as exc:
            reading.logs(home, *args)
        assert msg in exc.value.message and exc.value.hint
    out = box.agent("logs", "nope")
    assert out.returncode == 2 and out.stderr.startswith("Error:")


def test_handbook_names_commands_markers_and_reconnect(box):
    box.agent("configure", stdin=json.dumps({"host": "box1"}))
    box.submit(job("hb", box.workdir, {"name": "train", "run": "true"}, {"name": "eval", "run": "true"}))
    box.start()
    box.wait_run("hb")
    text = box.agent("handbook", "hb").stdout
    assert "rgt-client status box1" in text
    assert "resume hb" in text and "rgt-client pull box1 hb" in text
    for stage in ("train", "eval"):
        assert str(box.marker("hb", stage)) in text
    assert box.agent("handbook", "nope").returncode == 2


def test_version(box):
    out = box.agent("version", "--json")
    info = json.loads(out.stdout)
    assert out.returncode == 0 and info["version"] and info["python"].count(".") == 2
    assert info["build_sha256"] is None            # from a source tree
    assert box.agent("--version").stdout.startswith("rgt-agent ")


def test_status_filters_and_events(box):
    box.submit(job("s1", box.workdir, {"name": "a", "run": "true"}))
    box.submit(job("s2", box.workdir, {"name": "a", "run": "true"}))
    box.start()
    box.wait_run("s2")
    box.wait_event("run_succeeded", run="s2")
    st = json.loads(box.agent("status", "--json", "--run", "s2", "--events", "3").stdout)
    assert [r["name"] for r in st["runs"]] == ["s2"] and len(st["events"]) == 3
    assert st["schema"] == "rgt.status/1" and st["agent"]["running"] is True
    assert st["runs"][0]["stages"][0]["marker"].endswith("a.done")
    out = box.agent("status", "--run", "zz")
    assert out.returncode == 2 and "no run named 'zz'" in out.stderr and "Hint: runs here: s1, s2" in out.stderr
    # the plain status line is read without argparse; every other line still gets argparse's
    # checks, with Error:/Hint: and exit 2
    for bad, msg in ((["status", "--events", "x"], "invalid int value"), (["status", "--bogus"], "unrecognized"),
                     (["status", "--run"], "expected one argument")):
        out = box.agent(*bad)
        assert out.returncode == 2 and msg in out.stderr and "Hint:" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("argv, plain", [
    (["status"], {"json": False, "events": None, "run": None, "home": None}),
    (["--home", "/h", "status", "--json", "--events", "0", "--run", "r1"],
     {"json": True, "events": 0, "run": "r1", "home": "/h"}),
    (["--debug", "status", "--json"], {"json": True, "debug": True}),
    (["status", "--help"], None), (["status", "--events", "-1"], None), (["status", "extra"], None),
    (["status", "status"], None), (["--json", "status"], None), (["cancel", "r1"], None), ([], None),
    (["status", "--run", "--json"], None),
])
def test_the_plain_status_line_is_read_exactly_and_nothing_else(argv, plain):
    from boxagent.cli import _plain_status, build_parser
    got = _plain_status(argv)
    if plain is None:
        assert got is None
        return
    for key, value in plain.items():
        assert getattr(got, key) == value, key
    ref = build_parser(("boxagent.daemon.commands",)).parse_args(argv)   # what argparse makes of it
    assert {k: getattr(ref, k) for k in ("json", "events", "run", "home", "debug")} == \
        {k: getattr(got, k) for k in ("json", "events", "run", "home", "debug")} and ref.func is got.func


SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "status.schema.json")


def check_schema(value, schema, root, path="$"):
    """A small JSON Schema subset (type, const, enum, required, properties, additionalProperties,
    items, $ref): enough
    for docs/status.schema.json, and it runs where the jsonschema package is not installed."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].split("/")[-1]]
    types = schema.get("type")
    if types is not None:
        types = types if isinstance(types, list) else [types]
        py = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
              "integer": int, "number": (int, float)}
        ok = any(isinstance(value, py[t]) and not (t in ("integer", "number") and isinstance(value, bool))
                 for t in types)
        assert ok, "%s: %r is not %s" % (path, value, types)
    if "const" in schema:
        assert value == schema["const"], path
    if "enum" in schema:
        assert value in schema["enum"], "%s: %r not in %s" % (path, value, schema["enum"])
    if isinstance(value, dict):
        for key in schema.get("required", []):
            assert key in value, "%s: missing %s" % (path, key)
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                check_schema(value[key], sub, root, path + "." + key)
        if isinstance(schema.get("additionalProperties"), dict):
            for key, item in value.items():
                if key not in schema.get("properties", {}):
                    check_schema(item, schema["additionalProperties"], root, path + "." + key)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            check_schema(item, schema["items"], root, "%s[%d]" % (path, i))


def test_status_json_matches_the_schema(box):
    schema = json.loads(open(SCHEMA_PATH).read())
    dead = json.loads(box.agent("status", "--json").stdout)       # no daemon ever ran
    check_schema(dead, schema, schema)
    box.submit(job("sch", box.workdir, {"name": "a", "run": "echo loss=0.5; echo loss=nan",
                                        "metrics_pattern": r"loss=(?P<loss>\S+)"}, {"name": "b", "run": "exit 2"}))
    box.submit(job("sch2", box.workdir, {"name": "w", "wait": {"file": "never"}, "timeout": "30s"}))
    box.start()
    box.wait_run("sch")
    box.wait_event("run_failed", run="sch")
    box.wait_stage("sch2", "w", "running")
    status = json.loads(box.agent("status", "--json").stdout)
    check_schema(status, schema, schema)
    assert status["health"] is not None and status["events"]
    assert status["agent"]["state"] == "running" and status["agent"]["storage"]["state"] == "ok"
    sch = next(r for r in status["runs"] if r["name"] == "sch")
    assert sch["stages"][0]["metrics"] == {"loss": "nan"}     # the last value, as JSON can carry it
    def no_constant(name):
        raise AssertionError("status --json holds %s: not JSON" % name)
    json.loads(box.agent("status", "--json").stdout, parse_constant=no_constant)
    try:
        import jsonschema
    except ImportError:
        return
    jsonschema.validate(status, schema)
    jsonschema.validate(dead, schema)


def test_event_ids_unique_and_rotation(tmp_path):
    log = events_mod.EventLog(str(tmp_path / "events.jsonl"), "h", rotate_bytes=2000)
    ids = set()
    for i in range(60):
        ev = log.emit({"type": "heartbeat", "severity": "info", "summary": "x" * 40, "n": i}, 1000.0 + i)
        ids.add(ev["id"])
        assert ev["at"].endswith("Z") and ev["host"] == "h" and ev["n"] == i
    assert len(ids) == 60
    assert os.path.getsize(tmp_path / "events.jsonl") < 2400 and (tmp_path / "events.jsonl.1").exists()
    assert [e["n"] for e in events_mod.tail(str(tmp_path / "events.jsonl"), 3)] == [57, 58, 59]
    assert events_mod.tail(str(tmp_path / "missing"), 3) == []


def test_heartbeat_events_are_rate_limited(box):
    from boxagent.base.units import parse_iso_utc as parse_at
    box.env["RGT_HEARTBEAT_EVERY"] = "0.3"
    box.start()
    from tests.realbox import wait_for
    beats = wait_for(lambda: box.events("heartbeat")[2:] and box.events("heartbeat"), 10, "3 heartbeats")
    times = [parse_at(e["at"]) for e in beats]
    assert all(b - a >= 0.29 for a, b in zip(times, times[1:]))
    assert all(e["severity"] == "info" and "runs" in e for e in beats)


def test_preflight_failure_fails_the_run_before_any_stage(box):
    box.submit(job("pf", box.workdir, {"name": "train", "run": "touch ran"}, preflight={"gpus": 64}))
    box.start()
    run = box.wait_run("pf")
    assert run["state"] == "failed" and run["cause"]["class"] == "preflight_failed"
    assert run["cause"]["evidence"] and run["stages"][0]["state"] == "pending"
    assert not (box.workdir / "ran").exists()
    assert box.wait_event("run_failed", run="pf")["cause"]["class"] == "preflight_failed"


@pytest.mark.skipif((os.cpu_count() or 1) < 2 or not shutil.which("taskset"), reason="needs 2+ CPUs and taskset")
def test_thread_pools_capped_to_the_cpu_quota_unless_the_job_sets_them(box):
    # A cpuset narrower than the host is a CPU quota (docker --cpuset-cpus): one core here.
    box.submit(job("omp", box.workdir, {"name": "a", "run": 'echo "$OMP_NUM_THREADS $MKL_NUM_THREADS" > a.txt'},
                   {"name": "b", "run": 'echo "$OMP_NUM_THREADS $MKL_NUM_THREADS" > b.txt',
                    "env": {"OMP_NUM_THREADS": "7"}}))
    box.daemon(prefix=["taskset", "-c", "0"])
    box.wait_run("omp")
    assert (box.workdir / "a.txt").read_text().split() == ["1", "1"]
    assert (box.workdir / "b.txt").read_text().split() == ["7", "1"]


def test_stage_env_values_never_reach_argv_or_status(box):
    box.submit(job("sec", box.workdir, {"name": "a", "run": "sleep 0.3"}, env={"WANDB_API_KEY": "s3cr3t-token"}))
    box.start()
    box.wait_stage("sec", "a", "running")
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                assert b"s3cr3t-token" not in open("/proc/%s/cmdline" % pid, "rb").read()
            except OSError:
                pass
    box.wait_run("sec")
    assert "s3cr3t-token" not in (box.home / "status.json").read_text()
    assert "s3cr3t-token" not in (box.home / "events.jsonl").read_text()
    assert oct(os.stat(box.home / "runs/sec/spec.json").st_mode & 0o777) == "0o600"


def test_configure_reaches_a_running_daemon(box):
    box.start()
    out = box.agent("configure", stdin=json.dumps({"host": "renamed-box"}))
    assert out.returncode == 0
    box.submit(job("cfg", box.workdir, {"name": "a", "run": "true"}))
    assert box.wait_event("run_succeeded", run="cfg")["host"] == "renamed-box"


def test_unusable_state_directory_is_an_error_not_a_traceback(box):
    blocker = box.tmp / "a-file"
    blocker.write_text("")
    out = box.agent("--home", str(blocker / "home"), "submit", "-",
                    stdin=json.dumps(job("x", box.workdir, {"name": "a", "run": "true"})))
    assert out.returncode == 1 and out.stderr.startswith("Error: ") and "Hint: " in out.stderr
    assert "Traceback" not in out.stderr


def test_resubmitting_a_finished_run_does_not_promise_it_will_start(box):
    j = job("done-once", box.workdir, {"name": "a", "run": "true"})
    box.daemon()
    assert box.submit(j).returncode == 0
    box.wait_run("done-once")
    box.agent("stop")
    again = box.submit(j)
    assert again.returncode == 0
    assert "identical job" in again.stdout and "succeeded" in again.stdout
    assert "daemon is not running" not in again.stderr
    fresh = box.submit(job("not-yet", box.workdir, {"name": "a", "run": "true"}))
    assert "daemon is not running" in fresh.stderr
