"""backend = "ray" without a cluster: the job file's checks (every problem with its path) and the
diagnosis of a Ray job that ended without its shim's exit file (a dead node, a stop from outside)."""
from __future__ import annotations

import pytest

from boxagent.engine import jobspec
from boxagent.triage import diagnose

pytestmark = pytest.mark.xdist_group("ray")     # beside the other Ray tests (no cluster needed here)

BASE = {"name": "abl", "workdir": "/shared/abl", "backend": "ray", "gpus": 1,
        "ray": {"address": "http://10.0.0.5:8265"}, "stage": [{"name": "train", "run": "python train.py"}]}


def problems(**top):
    j = dict(BASE, **top)
    for k in [k for k, v in top.items() if v is None]:
        del j[k]
    with pytest.raises(jobspec.JobError) as exc:
        jobspec.validate(j)
    assert exc.value.code == 2
    return exc.value.problems


def test_a_ray_job_validates_to_itself():
    spec = jobspec.validate(dict(BASE))
    assert spec["backend"] == "ray" and spec["ray"] == {"address": "http://10.0.0.5:8265"}
    assert jobspec.validate(spec)["ray"] == spec["ray"]


@pytest.mark.parametrize("top,message", [
    ({"ray": {"address": "10.0.0.5:8265"}}, "ray.address: expected the dashboard's URL"),
    ({"ray": {"adress": "http://h:8265"}}, "ray.adress: unknown key (allowed: address, files)"),
    ({"ray": {"files": "local"}}, 'ray.files: expected "shared" (a filesystem every node shares) or "node"'),
    ({"ray": "http://h:8265"}, "ray: expected a table (address, files)"),
    ({"backend": None}, 'ray: only with backend = "ray"'),
    ({"gpus": "all"}, 'gpus: with backend = "ray", the GPUs each run holds on a node'),
    ({"preflight": {"gpus": 1}}, "preflight: it checks the host the agent runs on"),
])
def test_bad_ray_keys_are_refused_with_their_path(top, message):
    found = problems(**top)
    assert any(message in p for p in found), found


RAY_DEAD = {"submission_id": "rgt-1-abl-train-1", "status": "FAILED", "error_type": "JOB_SUPERVISOR_ACTOR_DIED",
            "message": "Job supervisor actor died: The actor died because its node has died. Node Id: ab12",
            "node_id": "ab12", "node_ip": "10.0.0.6",
            "node": {"node_id": "ab12", "node_ip": "10.0.0.6", "state": "DEAD",
                     "state_message": "health check failed due to missing too many heartbeats"}}


def test_a_job_on_a_dead_node_is_node_failure_with_rays_evidence_and_retryable():
    cause = diagnose({"exit_code": None, "signal": None, "no_exit_file": True, "ray": RAY_DEAD,
                      "last_lines": ["epoch 3 loss 0.4"]})
    assert cause["class"] == "node_failure" and cause["retryable"] is True
    assert any("node has died" in e for e in cause["evidence"])
    assert any("ab12 at 10.0.0.6 is DEAD: health check failed" in e for e in cause["evidence"])


def test_a_job_stopped_from_outside_rgt_is_killed_not_retried():
    rec = dict(RAY_DEAD, status="STOPPED", message="Job was intentionally stopped.", node=None)
    cause = diagnose({"exit_code": None, "signal": 15, "no_exit_file": True, "ray": rec})
    assert cause["class"] == "killed" and cause["retryable"] is False
    assert "stopped from outside rgt" in cause["summary"]


def test_with_the_shims_exit_file_the_log_decides_as_on_one_box():
    lines = ["Traceback (most recent call last):", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"]
    from boxagent.triage import StageWatch  # noqa: F401 - the same diagnosis path as a box's
    cause = diagnose({"exit_code": 1, "signal": None, "no_exit_file": False, "ray": dict(RAY_DEAD, node=None),
                      "last_lines": lines, "hits": [{"class": "cuda_oom", "severity": "critical", "line_no": 2,
                                                     "line": lines[1], "source": "builtin"}]})
    assert cause["class"] == "cuda_oom"


def test_status_shows_where_ray_placed_a_stage_and_its_gpus():
    from rgt_client.status.render_run import stage_head
    st = {"name": "train", "state": "running", "attempt": 2,
          "placement": {"state": "RUNNING", "node": "10.0.0.6", "host": "gpu-b", "gpus": "3"}}
    assert "ray RUNNING on gpu-b GPU 3" in stage_head(st)


def test_rays_word_that_the_node_died_is_node_failure_even_before_the_state_api_says_dead():
    rec = dict(RAY_DEAD, node={"node_id": "ab12", "node_ip": "10.0.0.6", "state": "ALIVE", "state_message": None})
    cause = diagnose({"exit_code": None, "signal": None, "no_exit_file": True, "ray": rec})
    assert cause["class"] == "node_failure" and cause["retryable"] is True
    assert any("node ab12 at 10.0.0.6 is ALIVE" in e for e in cause["evidence"])
