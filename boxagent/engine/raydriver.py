"""rgt's long-lived Ray driver: one per cluster and daemon home, run ONLY by the cluster's own
Python as a Ray Job (`python -m boxagent.engine.raydriver DIR ID`, where `ray` is installed),
on the head, beside the daemon. The agent never imports this module or raycell.py: `ray` is
imported inside main(), and nothing of boxagent imports them (tests/ray/test_ray_driver.py).

Why it exists: a Ray Job per attempt costs Ray a JobSupervisor actor in a fresh worker process
that imports ray, 1 s alone and 8 s a wave of 8 on a loaded box (bench/ray_start_cost.py); a task
from a driver that stays up starts in a fraction of that.

It talks with the daemon through files under DIR (in the head's RGT_HOME):
  requests/<sid>.json    written by the daemon before anything starts: the attempt, its launch
                         record, gpus, and where its files go in RGT_HOME
  state/<sid>.start.json where the task runs: node id and address, host, GPU ids, node folder
  state/<sid>.json       written when the task ended, in the shape of a Jobs API record (status,
                         start/end time, node, error type and message)
  cancel/<sid>           written by the daemon: the driver passes it to the attempt's node
and it writes what the node streams back (raycell.py) into the head's RGT_HOME: the shim's claim
and pid record, the stage's log as it grows, the exit record. A request with a state record is
done. A new driver (the next generation, after one ended) asks the node where an earlier one
started an attempt, and follows that shim instead of starting it again.
"""
import hashlib
import json
import os
import socket
import sys
import time
from typing import Any, Dict

from boxagent.engine import raycell

IDLE_S = 0.2


def _write(path, data):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


class Attempt:
    """One request as the driver follows it."""

    def __init__(self, sid, req, states):
        self.sid, self.req, self.states = sid, req, states
        self.start = raycell._read(os.path.join(states, sid + ".start.json"))
        self.sent = os.path.exists(os.path.join(states, sid + ".sent"))
        self.cancel_sent = False
        self.end = {"gone": True}       # until the node streams the shim's end
        try:
            self.log_at = os.path.getsize(req["log"])   # what the run's log holds here already
        except OSError:
            self.log_at = 0

    def apply(self, item):
        """Write one streamed item where the daemon reads it."""
        req = self.req
        if "start" in item:
            self.start = item["start"]
            _write(os.path.join(self.states, self.sid + ".start.json"), self.start)
        elif "shim" in item:
            _write(os.path.join(self.states, self.sid + ".shim.json"), item["shim"])
            _claim(req["claim"])
        elif "pid" in item:
            _claim(req["claim"])
            _write(req["pid"], dict(item["pid"], node_home=self.start.get("node_home")))
        elif "log" in item:
            # Only what continues the log here: a byte offset past its end (a node's mistake, or
            # a hostile one) would make a sparse file of any size.
            data, at = item["log"], item.get("at")
            if not isinstance(at, int) or at > self.log_at or at + len(data) <= self.log_at:
                return
            os.makedirs(os.path.dirname(req["log"]), exist_ok=True)
            fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.pwrite(fd, data[self.log_at - at:], self.log_at)
            finally:
                os.close(fd)
            self.log_at = at + len(data)
        elif "exit" in item:
            _write(req["exit"], item["exit"])
        if "exit" in item or "gone" in item:
            self.end = item

    def record(self, end, error=None):
        """The Jobs-API-shaped record of how it ended."""
        start = self.start
        rec = {"status": "SUCCEEDED", "start_time": start.get("start_time"), "end_time": int(time.time() * 1000),
               "driver_node_id": start.get("driver_node_id"),
               "driver_agent_http_address": "http://%s:0" % start["node_ip"] if start.get("node_ip") else None,
               "message": None, "error_type": None, "driver_exit_code": None}
        if error is not None:
            rec.update(status="FAILED", error_type=error[0], message=error[1])
        elif end.get("gone"):
            rec.update(status="FAILED", error_type="ShimGone", message="the shim ended without its exit file")
        else:
            code = (end.get("exit") or {}).get("exit_code")
            rec["driver_exit_code"] = code
            rec["status"] = "STOPPED" if end.get("stopped") else "FAILED" if code not in (0, None) else "SUCCEEDED"
        _write(os.path.join(self.states, self.sid + ".json"), rec)


def _claim(path):
    """The head's copy of the shim's claim (the daemon reads when the attempt was claimed)."""
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _write(path, {"on": "ray node"})


def main(argv):
    base, me = argv[1], argv[2]
    import ray
    from ray import cloudpickle
    from ray import exceptions as rex
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    cloudpickle.register_pickle_by_value(raycell)    # the node runs it without rgt installed
    ray.init(address=os.environ.get("RAY_ADDRESS") or "auto", logging_level=40, log_to_driver=False)
    cell = ray.remote(num_cpus=0, max_retries=0)(raycell.cell)
    follow = ray.remote(num_cpus=0, max_retries=0)(raycell.follow)
    where = ray.remote(num_cpus=0, max_retries=0)(raycell.where)
    cancel = ray.remote(num_cpus=0, max_retries=0)(raycell.cancel)
    reqs, states, cancels = (os.path.join(base, d) for d in ("requests", "state", "cancel"))
    for d in (reqs, states, cancels):
        os.makedirs(d, exist_ok=True)
    # The first word: the daemon waits for it, and says so when the head sees another disk here.
    _write(os.path.join(base, "driver-%s.json" % me), {"driver": me, "host": socket.gethostname(), "pid": os.getpid(),
                                                       "node_id": ray.get_runtime_context().get_node_id(),
                                                       "at": time.time()})
    agents = {}             # (pyz path, size, mtime) -> (sha256, the object ref of its bytes), put once
    running: Dict[Any, Attempt] = {}        # the attempt's task (a generator) -> the attempt
    seen = set()

    def on(node_id):
        return NodeAffinitySchedulingStrategy(node_id, soft=False)

    def agent_of(req):
        """The agent's .pyz for the node (read and put into Ray's object store once per build)."""
        if not req.get("pyz"):
            return None
        st = os.stat(req["pyz"])
        key = (req["pyz"], st.st_size, st.st_mtime_ns)
        if key not in agents:
            with open(req["pyz"], "rb") as fh:
                raw = fh.read()
            agents[key] = (hashlib.sha256(raw).hexdigest(), ray.put(raw))
        req["pyz_sha256"] = agents[key][0]
        return agents[key][1]

    def takeover(att):
        """An earlier driver may have started it: find its node, follow its shim there."""
        nodes = [att.start["driver_node_id"]] if att.start.get("driver_node_id") else \
            [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        for node in nodes:
            try:
                found = ray.get(where.options(scheduling_strategy=on(node)).remote(att.req), timeout=60)
            except Exception:       # noqa: BLE001 - a node that cannot answer did not run it for us
                continue
            if found:
                if not att.start.get("driver_node_id"):
                    att.apply({"start": dict(att.start, driver_node_id=found["node_id"],
                                             node_home=found["node_home"])})
                offset = att.log_at
                return follow.options(scheduling_strategy=on(found["node_id"])).remote(att.req, found["shim"], offset)
        return None

    while True:
        for name in sorted(os.listdir(reqs)):
            sid = name[:-5]
            if not name.endswith(".json") or sid in seen or os.path.exists(os.path.join(states, sid + ".json")):
                continue
            req = raycell._read(os.path.join(reqs, name))
            if not req:
                continue        # half-written: the daemon writes it atomically, so a retry sees it whole
            seen.add(sid)
            att = Attempt(sid, req, states)
            earlier = att.start or att.sent or os.path.exists(req["claim"])
            gen = takeover(att) if earlier else None
            if gen is None and (att.start or os.path.exists(req["claim"])):
                att.record({}, ("ShimGone", "no live node has the shim an earlier rgt driver started for it"))
                continue
            if gen is None:
                # Sent before it is sent: a driver that ends before the node's first word leaves
                # this mark, and the next one asks every node before it starts the attempt.
                _write(os.path.join(states, sid + ".sent"), {"driver": me, "at": time.time()})
                gen = cell.options(num_gpus=req.get("gpus") or 0).remote(req, agent_of(req))
            running[gen] = att
        for gen, att in running.items():
            if not att.cancel_sent and att.start.get("driver_node_id") and os.path.exists(os.path.join(cancels, att.sid)):
                att.cancel_sent = True
                cancel.options(scheduling_strategy=on(att.start["driver_node_id"])).remote(att.req)
        if not running:
            time.sleep(IDLE_S)
            continue
        # Wake at the first item of any attempt, then take every item already there: a log
        # arrives as many items, and the exit record is the last (one item a pass made a
        # chatty stage's exit seconds late).
        if ray.wait(list(running), num_returns=1, timeout=IDLE_S)[0]:
            for ref in ray.wait(list(running), num_returns=len(running), timeout=0)[0]:
                stream: Any = ref   # an ObjectRefGenerator (each attempt's task yields as it goes)
                while _take(ray, rex, stream, running) and ray.wait([stream], timeout=0)[0]:
                    pass


def _take(ray, rex, stream, running):
    """Apply the attempt's next item; False once its task ended (its record written)."""
    att = running[stream]
    try:
        item = ray.get(next(stream))
    except StopIteration:
        running.pop(stream)
        att.record(att.end)
        return False
    except (rex.NodeDiedError, rex.WorkerCrashedError, rex.OwnerDiedError, rex.RayTaskError,
            rex.RayError) as exc:
        running.pop(stream)
        att.record({}, _failure(ray, rex, exc, att.start.get("driver_node_id")))
        return False
    att.apply(item)
    return True


def _failure(ray, rex, exc, node):
    said = str(exc)[:2000]
    if isinstance(exc, rex.NodeDiedError) or _node_dead(ray, node):
        # In the Jobs API's words for a job whose node died ("... its node has died. Node Id:
        # <id>"), which the daemon reads as node_failure: a task on a killed node said only "the
        # node it was running on is dead", and was judged an exit without its exit file.
        return type(exc).__name__, "the task's node has died. Node Id: %s. Ray: %s" % (node, said)
    return type(exc).__name__, "%s (node id: %s)" % (said, node)


def _node_dead(ray, node_id):
    """The GCS's word that the node is no longer alive (a task on a node that died may end as
    WorkerCrashedError before any NodeDiedError)."""
    if not node_id:
        return False
    try:
        return any(n.get("NodeID") == node_id and not n.get("Alive") for n in ray.nodes())
    except Exception:       # noqa: BLE001 - asking is best effort; the record still says what Ray raised
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv))
