"""The job file: every bad input is refused with its exact path, exit 2, nothing written."""
from __future__ import annotations

import json
import os
import sys

import pytest

from boxagent.engine import jobspec
from tests.realbox import job, wait_for

GOOD = {"name": "resnet-a3", "workdir": "/tmp/proj", "env": {"WANDB_MODE": "online"},
        "stage": [{"name": "train", "run": "python train.py", "expect": ["ckpt/best.pt"],
                   "success_pattern": "Training completed", "timeout": "12h", "retries": 1},
                  {"name": "eval", "run": "python -m eval", "expect": ["results/metrics.json"]}],
        "artifacts": {"include": ["ckpt/best.pt", "results/**"]}}


def bad(**changes):
    j = json.loads(json.dumps(GOOD))
    for path, value in changes.items():
        target = j
        keys = path.split("__")
        for k in keys[:-1]:
            target = target[int(k)] if isinstance(target, list) else target[k]
        last = keys[-1]
        if value is DELETE:
            del target[last]
        elif isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return j


DELETE = object()

BAD_CASES = [
    ("name_missing", bad(name=DELETE), "name: required"),
    ("name_shell_chars", bad(name="a;rm -rf /"), "name: expected letters"),
    ("name_too_long", bad(name="a" * 65), "name: expected letters"),
    ("unknown_top_key", dict(GOOD, stagez=[]), "stagez: unknown key"),
    ("unknown_stage_key", bad(stage__1__retires=2), "stage[1].retires: unknown key"),
    ("bad_duration", bad(stage__1__timeout="abc"), 'stage[1].timeout: expected a duration like "90m", got "abc"'),
    ("zero_timeout", bad(stage__0__timeout="0s"), "stage[0].timeout: expected a duration above zero"),
    ("retries_too_many", bad(stage__0__retries=11), "stage[0].retries: expected an integer 0..10"),
    ("retries_bool", bad(stage__0__retries=True), "stage[0].retries: expected an integer"),
    ("fast_ratio_range", bad(stage__0__fast_ratio=1.5), "stage[0].fast_ratio: expected a number 0..1"),
    ("duplicate_stage", bad(stage__1__name="train"), 'stage[1].name: duplicate stage name "train" (also stage[0])'),
    ("run_and_wait", bad(stage__0__wait={"file": "x"}), "stage[0]: needs exactly one of `run`"),
    ("neither_run_nor_wait", bad(stage__0__run=DELETE), "stage[0]: needs exactly one of `run`"),
    ("bad_regex", bad(stage__0__success_pattern="(unclosed"), "stage[0].success_pattern: not a valid regular"),
    ("progress_without_done", bad(stage__0__progress_pattern=r"epoch (\d+)"), "stage[0].progress_pattern: needs a named group `done`"),
    ("abs_artifact", bad(artifacts={"include": ["/etc/passwd"]}), "artifacts.include[0]: must be relative"),
    ("dotdot_artifact", bad(artifacts={"include": ["../x"], "exclude": ["a/../../b"]}), "artifacts.include[0]: must not climb"),
    ("relative_workdir", bad(workdir="proj"), "workdir: expected an absolute path"),
    ("env_not_string", bad(env={"CUDA_VISIBLE_DEVICES": 0}), "env.CUDA_VISIBLE_DEVICES: expected a string"),
    ("env_bad_name", bad(env={"A-B": "x"}), "env.A-B: not a valid environment variable name"),
    ("no_stages", bad(stage=[]), "stage: expected a non-empty list"),
    ("stage_not_table", bad(stage=["python train.py"]), "stage[0]: expected a table"),
    ("expect_not_list", bad(stage__0__expect="ckpt/best.pt"), "stage[0].expect: expected a list of strings"),
    ("wait_two_forms", bad(stage__1__run=DELETE, stage__1__wait={"file": "a", "pid": 3}), "stage[1].wait: needs exactly one of"),
    ("wait_log_without_pattern", bad(stage__1__run=DELETE, stage__1__wait={"log": "a.log"}), "stage[1].wait.pattern: required"),
    ("wait_success_pattern", bad(stage__1__run=DELETE, stage__1__wait={"file": "a"}, stage__1__success_pattern="x"),
     "stage[1].success_pattern: a wait stage uses wait.pattern"),
    ("preflight_bad_size", dict(GOOD, preflight={"min_free_disk": "lots"}), 'preflight.min_free_disk: expected a size like "50G"'),
    ("preflight_unknown", dict(GOOD, preflight={"gpu": 1}), "preflight.gpu: unknown key"),
    ("rule_bad_pattern", dict(GOOD, rule=[{"class": "x", "pattern": "["}]), "rule[0].pattern: not a valid regular"),
    ("rule_bad_severity", dict(GOOD, rule=[{"class": "x", "pattern": "y", "severity": "fatal"}]), "rule[0].severity: expected one of"),
    ("stall_after_bad", dict(GOOD, stall_after="soon"), "stall_after: expected a duration"),
    ("stage_and_stages", dict(GOOD, stages=GOOD["stage"]), "stages: give either `stage` or its alias"),
]


@pytest.mark.parametrize("name,job,message", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_job_is_refused_with_its_path(name, job, message):
    with pytest.raises(jobspec.JobError) as exc:
        jobspec.validate(job)
    assert message in exc.value.message
    assert exc.value.code == 2


@pytest.mark.parametrize("name,job,message", BAD_CASES[:8], ids=[c[0] for c in BAD_CASES[:8]])
def test_cli_bad_job_exit_2_nothing_written(box, name, job, message):
    out = box.submit(job)
    assert out.returncode == 2
    assert out.stderr.startswith("Error: stdin: ") and message in out.stderr and "Hint: " in out.stderr
    assert "Traceback" not in out.stderr
    assert not (box.home / "inbox").exists() or not [n for n in os.listdir(box.home / "inbox") if n.endswith(".json")]
    assert not (box.home / "runs").exists() or os.listdir(box.home / "runs") == []


def test_all_problems_reported_at_once():
    with pytest.raises(jobspec.JobError) as exc:
        jobspec.validate(bad(name="bad name", stage__0__timeout="x", stage__1__retries=-1))
    assert len(exc.value.problems) == 3 and "3 problems" in exc.value.message


def test_malformed_text(box):
    out = box.agent("submit", "-", stdin='{"name": "x", ')
    assert out.returncode == 2 and "not valid JSON" in out.stderr
    out = box.agent("submit", "-", stdin='name = "x"\n[[stage]\n')
    assert out.returncode == 2 and "not valid TOML" in out.stderr
    out = box.agent("submit", str(box.tmp / "missing.json"))
    assert out.returncode == 2 and "cannot read the job file" in out.stderr
    out = box.agent("submit", "-", stdin="[1, 2]")
    assert out.returncode == 2 and "must be an object" in out.stderr


def test_normalised_spec_validates_to_itself_with_defaults():
    spec = jobspec.validate(dict(GOOD, stages=GOOD["stage"], stage=None) if False else GOOD)
    assert spec["stage"][0]["timeout"] == 12 * 3600.0
    assert spec["stage"][1]["retries"] == 0 and spec["stage"][1]["fast_ratio"] == 0.5
    assert jobspec.validate(spec) == spec
    alias = {k: v for k, v in GOOD.items() if k != "stage"}
    alias["stages"] = GOOD["stage"]
    assert jobspec.validate(alias) == spec


def test_wait_default_timeout_and_home_workdir():
    spec = jobspec.validate({"name": "w", "stage": [{"name": "w", "wait": {"pid": 1}}]}, home_dir="/home/u")
    assert spec["workdir"] == "/home/u" and spec["stage"][0]["timeout"] == jobspec.DEFAULT_WAIT_TIMEOUT
    spec = jobspec.validate({"name": "w", "workdir": "~/proj", "stage": [{"name": "a", "run": "x"}]})
    assert spec["workdir"] == os.path.join(os.path.expanduser("~"), "proj")


def test_toml_job(box):
    toml = '''name = "tomljob"
workdir = "%s"
[env]
A = "1"
[[stage]]
name = "s"
run = "echo $A > a.txt"
expect = ["a.txt"]
timeout = "90m"
''' % box.workdir
    path = box.tmp / "job.toml"
    path.write_text(toml)
    out = box.agent("submit", str(path), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"run": "tomljob", "state": "queued", "duplicate": False}


def test_resubmit_identical_is_a_noop_and_different_is_refused(box):
    j = {"name": "dup", "workdir": str(box.workdir), "stage": [{"name": "s", "run": "echo x >> count"}]}
    assert json.loads(box.submit(j, "--json").stdout)["duplicate"] is False
    again = box.submit(j, "--json")
    assert again.returncode == 0 and json.loads(again.stdout) == {"run": "dup", "state": "queued", "duplicate": True}
    other = dict(j, stage=[{"name": "s", "run": "echo y"}])
    out = box.submit(other)
    assert out.returncode == 2 and "different job" in out.stderr and "cancel" in out.stderr
    box.start()
    box.wait_run("dup")
    again = box.submit(j, "--json")
    assert json.loads(again.stdout) == {"run": "dup", "state": "succeeded", "duplicate": True}
    out = box.submit(other)                               # finished name, different job: needs --replace
    assert out.returncode == 2 and "--replace" in out.stderr
    out = box.submit(other, "--replace")
    assert out.returncode == 0, out.stderr
    # the old run is "succeeded" too: wait for the daemon to have archived it and run the new one
    archive = box.home / "runs" / ".archive"
    wait_for(lambda: archive.is_dir() and os.listdir(archive), 20, "the replaced run archived")
    run = box.wait_run("dup", "succeeded")
    assert box.wait_run("dup")["spec_sha256"] != ""
    archived = os.listdir(archive)
    assert len(archived) == 1 and archived[0].startswith("dup.")
    assert (box.workdir / "count").read_text() == "x\n"
    assert run["stages"][0]["state"] == "succeeded"


# -- input limits: each refused at submit (exit 2, Error + Hint, nothing written) -------------
def _refused(box, text, name=None, timeout=30):
    """Submit `text` (stdin, or a file called `name`): exit 2, Error + Hint, nothing written."""
    if name:
        path = box.tmp / name
        path.write_text(text)
        out = box.agent("submit", str(path), timeout=timeout)
    else:
        out = box.agent("submit", "-", stdin=text, timeout=timeout)
    assert out.returncode == 2, (out.returncode, out.stderr[-500:])
    assert out.stderr.startswith("Error: ") and "\nHint: " in out.stderr
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr
    assert not (box.home / "runs").exists() or os.listdir(box.home / "runs") == []
    assert not (box.home / "inbox").exists() or not [n for n in os.listdir(box.home / "inbox") if n.endswith(".json")]
    return out.stderr


def _stage_job(workdir="/tmp/w", **stage):
    return {"name": "lim", "workdir": workdir, "stage": [dict({"name": "s", "run": "true"}, **stage)]}


def test_job_over_1_mib_is_refused_before_parsing(box):
    big = json.dumps(_stage_job(run="echo " + "x" * (jobspec.MAX_JOB_BYTES)))
    err = _refused(box, big)
    assert "at most 1024 KiB" in err


@pytest.mark.parametrize("fmt", ["json", "toml_arrays", "toml_dotted_keys"])
def test_200000_deep_nesting_is_refused_not_a_recursion_error(box, fmt):
    n = 200000
    if fmt == "json":
        text, name = '{"name": "x", "stage": %s%s}' % ("[" * n, "]" * n), None
    elif fmt == "toml_arrays":
        text, name = 'name = "x"\nx = %s%s\n' % ("[" * n, "]" * n), "deep.toml"
    else:                                  # tomllib is quadratic in a dotted key: hours, not depth
        text, name = 'name = "x"\n%s = 1\n' % ".".join(["a"] * n), "dotted.toml"
    if name and sys.version_info < (3, 11):
        pytest.skip("TOML jobs need Python >= 3.11 on the box")
    err = _refused(box, text, name, timeout=20)
    assert "nested deeper than 32" in err or "dots outside strings" in err


def test_nesting_of_33_levels_is_refused_with_its_path():
    job = _stage_job()
    deep = job["stage"][0]["env"] = {}
    for _ in range(40):
        deep["a"] = {}
        deep = deep["a"]
    with pytest.raises(jobspec.JobError) as exc:
        jobspec.validate(job)
    assert exc.value.problems[0].startswith("stage[0].env.a.a.") and "nested deeper than 32" in exc.value.problems[0]


def test_100000_stages_are_refused_quickly(box):
    job = {"name": "many", "workdir": "/tmp/w", "stage": [{"name": "s%d" % i, "run": "true"} for i in range(100000)]}
    with pytest.raises(jobspec.JobError) as exc:
        jobspec.validate(job)
    assert exc.value.problems == ["stage: 100000 stages; at most 1000 (split the work into several "
                                  "jobs, or loop inside one stage's script)"]
    job["stage"] = job["stage"][:jobspec.MAX_STAGES + 1]      # what fits in a 1 MiB job text
    assert "at most 1000" in _refused(box, json.dumps(job))
    job["stage"] = job["stage"][:jobspec.MAX_STAGES]
    assert jobspec.validate(job)["stage"][-1]["name"] == "s999"


def test_env_value_of_100_mb_is_refused():
    with pytest.raises(jobspec.JobError) as exc:
        jobspec.validate(dict(_stage_job(), env={"BLOB": "x" * (100 << 20)}))
    assert exc.value.problems == ["env.BLOB: the value is 102400 KiB; at most 64 KiB a variable (the "
                                  "kernel refuses 128 KiB): put it in a file and pass its path"]


def test_env_value_over_64_kib_is_refused_at_submit(box):
    err = _refused(box, json.dumps(_stage_job(env={"BLOB": "x" * (65 << 10)})))
    assert "stage[0].env.BLOB: the value is 65 KiB; at most 64 KiB" in err


def test_env_of_job_and_stage_together_over_256_kib_is_refused():
    env = dict(("V%d" % i, "x" * (60 << 10)) for i in range(3))
    job = dict(_stage_job(env=dict(("S%d" % i, "y" * (60 << 10)) for i in range(2))), env=env)
    with pytest.raises(jobspec.JobError) as exc:
        jobspec.validate(job)
    assert exc.value.problems == ["stage[0].env: env and the job's env are 300 KiB together; at most 256 KiB"]


def test_run_command_over_64_kib_is_refused(box):
    err = _refused(box, json.dumps(_stage_job(run="echo " + "x" * (64 << 10))))
    assert "stage[0].run: the command is 64 KiB; at most 64 KiB (put it in a script" in err


NUL_CASES = [
    ("run", _stage_job(run="python train.py\x00--lr 1")),
    ("env_name", dict(_stage_job(), env={"A\x00B": "1"})),
    ("env_value", _stage_job(env={"A": "x\x00y"})),
    ("workdir", _stage_job(workdir="/tmp/w\x00x")),
    ("expect", _stage_job(expect=["ckpt/\x00best.pt"])),
    ("glob", dict(_stage_job(), artifacts={"include": ["ckpt/*\x00.pt"]})),
    ("wait_log", {"name": "lim", "stage": [{"name": "w", "wait": {"log": "a\x00.log", "pattern": "done"}}]}),
]


@pytest.mark.parametrize("where,job", NUL_CASES, ids=[c[0] for c in NUL_CASES])
def test_nul_byte_is_refused_not_killed_from_outside_later(box, where, job):
    err = _refused(box, json.dumps(job))
    assert "NUL byte" in err


@pytest.mark.parametrize("text,name", [
    ('{"name": "x", "stage": [{"name": "s", "run": "true", "timeout": Infinity}]}', None),
    ('{"name": "x", "stage": [{"name": "s", "run": "true", "timeout": NaN}]}', None),
    ('{"name": "x", "stage": [{"name": "s", "run": "true", "fast_ratio": -Infinity}]}', None),
    ('name = "x"\n[[stage]]\nname = "s"\nrun = "true"\ntimeout = inf\n', "inf.toml"),
    ('name = "x"\n[[stage]]\nname = "s"\nrun = "true"\nexpected_duration = nan\n', "nan.toml"),
], ids=["json_inf", "json_nan", "json_minus_inf", "toml_inf", "toml_nan"])
def test_non_finite_number_is_refused(box, text, name):
    if name and sys.version_info < (3, 11):
        pytest.skip("TOML jobs need Python >= 3.11 on the box")
    err = _refused(box, text, name)
    assert "expected a finite number" in err


def test_limits_through_rgt_client_run(rgt_local, tmp_path, client_config):
    """`rgt-client run` validates with the agent's code before it connects anywhere."""
    cases = {"deep.toml": 'name = "x"\nx = %s%s\n' % ("[" * 200000, "]" * 200000),
             "dotted.toml": 'name = "x"\n%s = 1\n' % ".".join(["a"] * 200000),
             "inf.toml": 'name = "x"\n[[stage]]\nname = "s"\nrun = "true"\ntimeout = inf\n',
             "nul.json": json.dumps(_stage_job(run="a\x00b")),
             "big.json": json.dumps(_stage_job(run="x" * (2 << 20))),
             "stages.json": json.dumps({"name": "x", "stage": [{"name": "s%d" % i, "run": "t"} for i in range(1001)]})}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        res = rgt_local("run", "no-such-host", str(tmp_path / name))
        assert res.exit_code == 2, (name, res.output[-300:])
        assert "Error: " in res.output and "Hint: " in res.output, (name, res.output[-300:])


def test_resubmitting_a_changed_job_under_a_failed_runs_name_hints_replace_with_the_file(box):
    """The hint said `resume` first, which reruns the OLD job; the new job needs --replace, and
    the client says it as the command to type, with the file."""
    from rgt_client.box.agentcall import client_hint
    from rgt_client.jobs.cmd import with_job_file
    j = job("chg", box.workdir, {"name": "s", "run": "exit 3"})
    assert box.submit(j).returncode == 0
    box.start()
    box.wait_run("chg", "failed")
    out = box.submit(dict(j, stage=[{"name": "s", "run": "echo fixed"}]))
    assert out.returncode == 2 and "different job" in out.stderr
    hint = next(line[len("Hint: "):] for line in out.stderr.splitlines() if line.startswith("Hint: "))
    assert "resume" not in hint and "--replace" in hint
    said = with_job_file(client_hint(hint, "gpu1"), "gpu1", "jobs/train v2.toml")
    assert "`rgt-client run gpu1 'jobs/train v2.toml' --replace`" in said, said
