"""rgt's own queue in front of Ray, without a cluster (a fake Jobs API at the seam): attempts are
submitted only while the cluster can place them, so no Ray Job waits past
RAY_JOB_START_WAIT_TIME_S; a GPU a finished cell let go of is used at once although Ray's report
still counts it; a job no node can hold is refused with the hint; one submission id, once."""
from __future__ import annotations

import json
import os

import pytest

from boxagent.base.home import Home
from boxagent.engine.ports import AttemptRef
from boxagent.engine.rayctl import RayProcesses

pytestmark = pytest.mark.xdist_group("ray")


class FakeRay:
    """The Jobs API's answers: per node (free, declared) GPUs as Ray's lagging report says them."""

    def __init__(self, nodes):
        self.report, self.submitted, self.refuse = nodes, [], set()
        self.placed = {}        # submission id -> the node Ray put it on
        self.ended = {}         # submission id -> (status, message) Ray says it ended with
        self.node_state = {}    # node id -> ALIVE | DEAD, as the State API lists it
        self.asked_nodes = 0

    def free_gpus(self):
        return dict(self.report)

    def submit(self, sid, entrypoint, gpus, metadata):
        if sid in [s for s, _g in self.submitted]:
            return "Job with submission_id %s already exists." % sid
        self.submitted.append((sid, gpus))
        return ""

    def jobs(self):
        out = {}
        for sid, _g in self.submitted:
            status, message = self.ended.get(sid, ("RUNNING", None))
            out[sid] = {"submission_id": sid, "status": status, "message": message,
                        "driver_node_id": self.placed.get(sid)}
        return out

    def nodes(self):
        self.asked_nodes += 1
        return {n: {"node_id": n, "node_ip": "10.0.0.6", "state": st, "state_message": None}
                for n, st in self.node_state.items()}


@pytest.fixture
def procs(tmp_path):
    p = RayProcesses(Home(str(tmp_path / "home")), None, None, 1.0, 5.0, lambda t: None, clock=lambda: 2001.0)
    fake = FakeRay({"head": (4.0, 4.0), "worker": (4.0, 4.0)})
    p.apis["http://ray:8265"] = fake    # the seam: one cluster's API
    return p, fake


def launch(p, i, gpus=1):
    ref = AttemptRef("sw-%d" % i, "s", 1)
    p.launch(ref, {"command": "true", "workdir": "/", "env": {}, "log": "/dev/null",
                   "ray": {"address": "http://ray:8265", "gpus": gpus}}, 1000.0)
    return ref


def test_only_what_the_cluster_can_place_is_submitted_and_a_freed_gpu_is_used_at_once(procs):
    p, fake = procs
    refs = [launch(p, i) for i in range(10)]
    assert len(fake.submitted) == 8 and len(p.waiting) == 2          # 2 nodes x 4 GPUs, the rest wait here
    fake.report = {"head": (0.0, 4.0), "worker": (0.0, 4.0)}          # Ray's report catches up: all used
    p.refresh(2000.0)
    assert len(fake.submitted) == 8
    # One cell ends (its shim's exit file): Ray's report still counts its GPU, rgt does not.
    open(p.home.stage_exit(*refs[0]), "w").write(json.dumps({"exit_code": 0, "signal": None, "ended_at": 2001}))
    assert p.exit_info(refs[0])["exit_code"] == 0
    p.urgent = True
    p.refresh(2001.0)
    assert len(fake.submitted) == 9 and p.waiting == [refs[9]]


def test_gpus_a_cell_let_go_of_on_its_node_place_a_multi_gpu_cell_there_at_once(procs):
    """Ray's per-node report lags too: a 2-GPU cell waits for ONE node with 2 free, and the node
    where a 2-GPU cell just ended has them, whatever the report still says."""
    p, fake = procs
    refs = [launch(p, i, gpus=2) for i in range(5)]
    assert len(fake.submitted) == 4 and p.waiting == [refs[4]]
    for (sid, _g), node in zip(fake.submitted, ["head", "head", "worker", "worker"]):
        fake.placed[sid] = node
    fake.report = {"head": (0.0, 4.0), "worker": (0.0, 4.0)}          # the report: every GPU in use
    p.urgent = True
    p.refresh(2000.0)
    assert len(fake.submitted) == 4
    open(p.home.stage_exit(*refs[2]), "w").write(json.dumps({"exit_code": 0, "signal": None, "ended_at": 2001}))
    assert p.exit_info(refs[2])["exit_code"] == 0
    p.urgent = True
    p.refresh(2001.0)                                                 # the report still says (0, 4)
    assert len(fake.submitted) == 5 and p.waiting == []


def test_a_node_busy_with_other_users_work_is_not_counted_free_for_a_multi_gpu_cell(procs):
    """What Ray counts in use on a node beyond rgt's own attempts there is other users' work."""
    p, fake = procs
    fake.report = {"head": (1.0, 4.0), "worker": (1.0, 4.0)}          # 3 of 4 GPUs busy on each, none ours
    launch(p, 1, gpus=2)
    assert fake.submitted == [] and len(p.waiting) == 1


def test_a_job_no_node_can_hold_waits_for_a_node_to_join_then_is_refused_with_the_hint(procs):
    """A cluster just formed reports its nodes one by one: a job no node reported so far can hold
    waits INFEASIBLE_S for one to join; then it is refused, never left waiting in Ray."""
    from boxagent.engine.rayctl import INFEASIBLE_S
    p, fake = procs
    ref = launch(p, 1, gpus=5)                                        # at 1000.0
    assert fake.submitted == [] and p.waiting == [ref] and p.exit_info(ref) is None
    p.urgent = True
    p.refresh(1000.0 + INFEASIBLE_S - 1)
    assert p.waiting == [ref] and p.exit_info(ref) is None
    p.urgent = True
    p.refresh(1000.0 + INFEASIBLE_S)
    assert fake.submitted == [] and p.waiting == []
    info = p.exit_info(ref)
    assert "no node of the Ray cluster at http://ray:8265 has 5 GPUs (the nodes declare 4, 4)" in info["error"]
    assert "lower the job's `gpus`" in info["hint"]


def test_a_job_waiting_for_a_node_with_its_gpus_goes_when_one_joins(procs):
    p, fake = procs
    fake.report = {"head": (0.0, 0.0)}                                 # the head alone reported, no GPU
    ref = launch(p, 1, gpus=1)
    assert fake.submitted == [] and p.waiting == [ref]
    fake.report = {"head": (0.0, 0.0), "worker": (4.0, 4.0)}          # the worker's first report
    p.urgent = True
    p.refresh(1010.0)
    assert [g for _s, g in fake.submitted] == [1] and p.waiting == []


def test_the_submission_id_is_written_before_the_submission_and_never_submitted_twice(procs, tmp_path):
    p, fake = procs
    fake.report = {"head": (0.0, 4.0), "worker": (0.0, 4.0)}          # full: it waits
    ref = launch(p, 1)
    sid = json.loads(open(os.path.join(p.home.stage_dir("sw-1"), "s.1.ray")).read())["submission_id"]
    assert fake.submitted == [] and sid.startswith("rgt-")
    # A new daemon (the old one SIGKILLed after the POST, before it wrote submitted_at) finds the
    # attempt file, submits it again: Ray's "already exists" binds it, no second job.
    fake.submitted.append((sid, 1))
    again = RayProcesses(p.home, None, None, 1.0, 5.0, lambda t: None, clock=lambda: 1000.0)
    again.apis["http://ray:8265"] = fake
    fake.report = {"head": (3.0, 4.0), "worker": (4.0, 4.0)}
    assert again.shim_state(ref) == "alive" and again.waiting == [ref]
    again.urgent = True
    again.refresh(1001.0)
    assert fake.submitted == [(sid, 1)] and again.waiting == []


def test_a_cluster_whose_load_report_names_no_node_yet_is_waited_for_never_refused(procs):
    """Ray's load report is empty for the first seconds of a cluster (seen on a just-started
    loopback cluster: every cell of a sweep was refused as "the nodes declare none")."""
    p, fake = procs
    fake.report = {}
    ref = launch(p, 1)
    assert fake.submitted == [] and p.waiting == [ref] and p.exit_info(ref) is None
    fake.report = {"head": (4.0, 4.0), "worker": (4.0, 4.0)}
    p.urgent = True
    p.refresh(2002.0)
    assert [g for _s, g in fake.submitted] == [1.0] and p.waiting == []


def test_an_attempt_that_failed_without_its_exit_file_waits_for_the_nodes_word_past_a_slow_health_check(tmp_path):
    """Ray's health check gives up on a node 15 s to a minute after it stops answering. A job
    that failed without its exit file (nothing but a kill ends a shim so) on a node still listed
    ALIVE waits for the node's word: judged after 3 x the exit grace, a lost node under load was
    taken for a command that died, and its cell was never retried."""
    from boxagent.engine.rayctl import NODE_VERDICT_S
    now = [1000.0]
    p = RayProcesses(Home(str(tmp_path / "home")), None, None, 1.0, 1.0, lambda t: None, clock=lambda: now[0])
    fake = FakeRay({"head": (4.0, 4.0), "worker": (4.0, 4.0)})
    p.apis["http://ray:8265"] = fake
    ref = launch(p, 1)
    (sid, _g), = fake.submitted
    fake.placed[sid] = "worker"
    fake.node_state = {"head": "ALIVE", "worker": "ALIVE"}
    fake.ended[sid] = ("FAILED", "Job supervisor actor died unexpectedly")     # no word of the node
    p.urgent = True
    p.refresh(now[0])
    assert p.exit_info(ref) is None                     # the exit file may still be on its way
    for later in (2.0, 10.0, 60.0):                     # 3 x the exit grace is 3 s
        now[0] = 1000.0 + later
        assert p.exit_info(ref) is None, later
    assert fake.asked_nodes <= 4                        # asked once a poll, not at every look
    fake.node_state["worker"] = "DEAD"
    now[0] += 1.0
    info = p.exit_info(ref)
    assert info["ray"]["node"]["state"] == "DEAD" and info["ray"]["node"]["node_id"] == "worker", info
    # A node that stays ALIVE: judged from Ray's record once the wait is over.
    ref2 = launch(p, 2)
    sid2 = fake.submitted[-1][0]
    fake.placed[sid2], fake.ended[sid2] = "head", ("FAILED", "Job supervisor actor died unexpectedly")
    p.urgent = True
    p.refresh(now[0])
    start = now[0]
    assert p.exit_info(ref2) is None
    now[0] = start + NODE_VERDICT_S + 1
    assert p.exit_info(ref2)["ray"]["node"]["state"] == "ALIVE"
