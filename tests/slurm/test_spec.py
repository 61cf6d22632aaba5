"""The job's backend and [slurm] tables through the real job validator: every problem with its
exact path, a normalised table that validates to itself, and the job + stage merge."""
from __future__ import annotations

import json

import pytest

from boxagent.engine import jobspec
from boxagent.slurm import spec as slurm_spec

BASE = {"name": "llm-sft", "workdir": "/scratch/u/proj", "backend": "slurm",
        "slurm": {"partition": "gpu", "gres": "gpu:a100:2", "time": "12h", "mem": "64G",
                  "cpus_per_task": 8, "nodes": 1, "account": "proj-42", "qos": "normal",
                  "extra": ["--constraint=a100", "--mail-type=END"]},
        "stage": [{"name": "prep", "run": "python prep.py", "slurm": {"gres": "none", "time": "30m"}},
                  {"name": "train", "run": "python train.py", "slurm": {"time": "2-00:00:00", "extra": ["--exclusive"]}}]}


def job(**top):
    j = json.loads(json.dumps(BASE))
    j.update(top)
    return j


def with_stage(i, **keys):
    j = job()
    j["stage"][i].update(keys)
    return j


def problems(j):
    with pytest.raises(jobspec.JobError) as exc:
        jobspec.validate(j)
    assert exc.value.code == 2
    return exc.value.problems


def test_good_table_is_normalised():
    spec = jobspec.validate(job())
    assert spec["backend"] == "slurm"
    assert spec["slurm"] == {"partition": "gpu", "gres": "gpu:a100:2", "time": "12:00:00", "mem": "65536M",
                             "cpus_per_task": 8, "nodes": 1, "account": "proj-42", "qos": "normal",
                             "extra": ["--constraint=a100", "--mail-type=END"]}
    assert spec["stage"][0]["slurm"] == {"gres": "none", "time": "00:30:00"}
    assert spec["stage"][1]["slurm"] == {"time": "2-00:00:00", "extra": ["--exclusive"]}


def test_normalised_spec_validates_to_itself():
    spec = jobspec.validate(job())
    assert jobspec.validate(json.loads(json.dumps(spec))) == spec


def test_local_job_spec_unchanged_by_the_backend_key():
    """Existing local jobs keep their identity (spec_sha256): no backend key is added."""
    plain = {"name": "a", "workdir": "/scratch/a", "stage": [{"name": "s", "run": "true"}]}
    spec = jobspec.validate(plain)
    assert "backend" not in spec and "slurm" not in spec
    assert slurm_spec.backend(spec) == "local"
    explicit = jobspec.validate(dict(plain, backend="local"))
    assert explicit["backend"] == "local"


def test_slurm_backend_without_table_gets_an_empty_one():
    spec = jobspec.validate({"name": "a", "backend": "slurm", "stage": [{"name": "s", "run": "true"}]})
    assert spec["slurm"] == {}


@pytest.mark.parametrize("value,expected", [
    ("1m", "00:01:00"), ("90m", "01:30:00"), ("36h", "1-12:00:00"), ("45s", "00:00:45"), ("1.5h", "01:30:00"),
    ("30:00", "00:30:00"),            # Slurm MM:SS
    ("4:00:00", "04:00:00"), ("1-12", "1-12:00:00"), ("2-03:04", "2-03:04:00"), ("2-03:04:05", "2-03:04:05"),
])
def test_time_forms(value, expected):
    assert jobspec.validate(job(slurm={"time": value}))["slurm"]["time"] == expected


BAD = [
    ("backend_unknown", job(backend="k8s"), 'backend: expected one of "local", "slurm", "ray", got "k8s"'),
    ("table_without_backend", job(backend="local"), 'slurm: only with backend = "slurm"'),
    ("stage_table_without_backend", dict(with_stage(0), backend="local", slurm=None),
     'stage[0].slurm: only with backend = "slurm"'),
    ("table_not_table", job(slurm="gpu"), "slurm: expected a table"),
    ("unknown_key", job(slurm={"partitions": "gpu"}), "slurm.partitions: unknown key (allowed: partition, gres"),
    ("stage_unknown_key", with_stage(1, slurm={"gpus": 2}), "stage[1].slurm.gpus: unknown key"),
    ("bare_minutes", job(slurm={"time": 60}), 'slurm.time: expected a duration with a unit ("90m"'),
    ("bare_minutes_string", job(slurm={"time": "60"}), "a bare number is minutes to Slurm and seconds to rgt"),
    ("time_garbage", with_stage(0, slurm={"time": "soon"}), 'stage[0].slurm.time: expected a duration'),
    ("time_zero", job(slurm={"time": "0m"}), "slurm.time: expected a time limit above zero"),
    ("mem_bare", job(slurm={"mem": 4096}), 'slurm.mem: expected a size with a unit ("16G", "512M") or "all"'),
    ("mem_bad", job(slurm={"mem": "lots G"}), 'slurm.mem: expected a size like "50G"'),
    ("mem_tiny", job(slurm={"mem": "10K"}), "slurm.mem: expected at least 1M"),
    ("cpus_zero", job(slurm={"cpus_per_task": 0}), "slurm.cpus_per_task: expected an integer >= 1, got 0"),
    ("nodes_bool", job(slurm={"nodes": True}), "slurm.nodes: expected an integer >= 1, got true"),
    ("nodes_string", job(slurm={"nodes": "2"}), 'slurm.nodes: expected an integer >= 1, got "2"'),
    ("partition_space", job(slurm={"partition": "gpu a100"}), 'slurm.partition: expected a partition name'),
    ("gres_bad", job(slurm={"gres": "gpu:1;rm"}), 'slurm.gres: expected a gres like "gpu:1"'),
    ("account_bad", job(slurm={"account": "a b"}), "slurm.account: expected an account name"),
    ("qos_int", job(slurm={"qos": 3}), "slurm.qos: expected a QOS name"),
    ("extra_not_list", job(slurm={"extra": "--exclusive"}), "slurm.extra: expected a list of sbatch options"),
    ("extra_short_option", job(slurm={"extra": ["-C", "a100"]}), 'slurm.extra[0]: expected one sbatch option starting with "--"'),
    ("extra_two_words", job(slurm={"extra": ["--constraint a100"]}), "slurm.extra[0]: expected one sbatch option"),
    ("extra_newline", job(slurm={"extra": ["--comment=a\nb"]}), "slurm.extra[0]: control characters"),
    ("extra_dependency", job(slurm={"extra": ["--dependency=afterany:1"]}), "slurm.extra[0]: --dependency is set by rgt"),
    ("extra_dep_prefix", job(slurm={"extra": ["--dep=afterany:1"]}), "slurm.extra[0]: --dependency is set by rgt"),
    ("extra_output", with_stage(1, slurm={"extra": ["--exclusive", "--output=/scratch/x"]}), "stage[1].slurm.extra[1]: --output is set by rgt"),
    ("extra_requeue", job(slurm={"extra": ["--requeue"]}), "slurm.extra[0]: --requeue is set by rgt"),
    ("extra_table_key", job(slurm={"extra": ["--mem=4G"]}), "slurm.extra[0]: --mem is the table's own key: set slurm.mem"),
    ("extra_table_prefix", job(slurm={"extra": ["--part=gpu"]}), "slurm.extra[0]: --partition is the table's own key"),
    ("extra_cpus", job(slurm={"extra": ["--cpus-per-task=4"]}), "--cpus-per-task is the table's own key: set slurm.cpus_per_task"),
    ("wait_stage_table", with_stage(1, run=None, wait={"file": "x"}),
     "stage[1].slurm: a wait stage runs on the submit host"),
]


@pytest.mark.parametrize("name,j,message", BAD, ids=[b[0] for b in BAD])
def test_bad_table_is_refused_with_its_path(name, j, message):
    for st in j.get("stage", []):        # the helpers above mark keys to drop with None
        for k in [k for k, v in st.items() if v is None]:
            del st[k]
    for k in [k for k, v in j.items() if v is None]:
        del j[k]
    found = problems(j)
    assert any(message in p for p in found), found


def test_all_problems_reported_at_once():
    found = problems(job(slurm={"time": "60", "mem": 1, "nodes": 0, "extra": ["-x"]}))
    assert len(found) == 4, found


def test_merge_stage_wins_and_extra_appends():
    j = {"partition": "gpu", "time": "12:00:00", "extra": ["--constraint=a100"]}
    s = {"time": "00:30:00", "extra": ["--exclusive"]}
    assert slurm_spec.merge(j, s) == {"partition": "gpu", "time": "00:30:00",
                                      "extra": ["--constraint=a100", "--exclusive"]}
    assert slurm_spec.merge(j, None) == j and slurm_spec.merge(None, s) == s
    assert j["extra"] == ["--constraint=a100"]          # inputs untouched


def test_mem_all_kept():
    assert jobspec.validate(job(slurm={"mem": "all"}))["slurm"]["mem"] == "all"


def test_mem_rounds_up_to_mebibytes():
    assert jobspec.validate(job(slurm={"mem": "1.5G"}))["slurm"]["mem"] == "1536M"
    assert jobspec.validate(job(slurm={"mem": "1500K"}))["slurm"]["mem"] == "2M"
