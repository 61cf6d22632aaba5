"""What rgt's driver writes into the head's RGT_HOME from what a node streams back (raydriver.
Attempt, run here without Ray: the module imports `ray` only in main()). The log grows only by
what continues it: a chunk sent again after a takeover is not written twice, and an offset past
the log's end (a node's mistake, or a hostile one) writes nothing, never a sparse file of any
size; the pid record says which folder on the node holds the attempt; the end is recorded in the
Jobs API's shape."""
from __future__ import annotations

import json
import os

from boxagent.engine.raydriver import Attempt


def _attempt(tmp_path):
    states = tmp_path / "state"
    states.mkdir(parents=True)
    req = {k: str(tmp_path / "home" / name) for k, name in (
        ("log", "runs/r/logs/s.1.log"), ("pid", "runs/r/stages/s.1.pid"), ("exit", "runs/r/stages/s.1.exit"),
        ("claim", "runs/r/stages/s.1.claim"))}
    os.makedirs(os.path.dirname(req["pid"]))
    return Attempt("sid1", req, str(states)), req


def test_the_log_grows_only_by_what_continues_it(tmp_path):
    att, req = _attempt(tmp_path)
    att.apply({"log": b"epoch 1\n", "at": 0})
    att.apply({"log": b"epoch 2\n", "at": 8})
    att.apply({"log": b"epoch 1\nepoch 2\nepoch 3\n", "at": 0})     # sent again from 0 (a takeover)
    att.apply({"log": b"x" * 10, "at": 10 ** 12})                    # far past the end: nothing
    att.apply({"log": b"tail\n", "at": -5})                          # before the start and short: nothing
    with open(req["log"], "rb") as fh:
        assert fh.read() == b"epoch 1\nepoch 2\nepoch 3\n"
    assert os.path.getsize(req["log"]) == 24
    # A driver that takes over starts from what the log holds here.
    again = Attempt("sid1", req, str(tmp_path / "state"))
    assert again.log_at == 24


def test_the_pid_record_names_the_nodes_folder_and_the_end_is_recorded(tmp_path):
    att, req = _attempt(tmp_path)
    att.apply({"start": {"start_time": 1, "driver_node_id": "n1", "node_ip": "10.0.0.6", "node_home": "/r/ray-node/ab"}})
    att.apply({"pid": {"shim_pid": 4242, "ray": {"host": "w1", "cuda_visible_devices": "3"}}})
    pid = json.loads(open(req["pid"]).read())
    assert pid["node_home"] == "/r/ray-node/ab" and pid["ray"]["host"] == "w1"
    assert os.path.exists(req["claim"])                  # the daemon reads when it was claimed
    att.apply({"exit": {"exit_code": 3, "signal": None}, "stopped": False})
    att.record(att.end)
    rec = json.loads((tmp_path / "state" / "sid1.json").read_text())
    assert rec["status"] == "FAILED" and rec["driver_exit_code"] == 3 and rec["driver_node_id"] == "n1"
    assert rec["driver_agent_http_address"] == "http://10.0.0.6:0"
    assert json.loads(open(req["exit"]).read())["exit_code"] == 3
    stopped, _req = _attempt(tmp_path / "b")
    stopped.apply({"exit": {"exit_code": None, "signal": 15}, "stopped": True})
    stopped.record(stopped.end)
    assert json.loads((tmp_path / "b" / "state" / "sid1.json").read_text())["status"] == "STOPPED"
