"""Job files are validated on the client before anything reaches the box."""
from __future__ import annotations

import json
import shlex

import pytest

from rgt_client import exitcodes
from rgt_client.errors import ClientError
from rgt_client.jobs.jobfile import command_job, load_job, wait_job
from tests.sshd import counting_ssh

GOOD = '''
name = "resnet-a3"
workdir = "/tmp/proj"
[env]
WANDB_MODE = "offline"
[[stage]]
name = "train"
run = "python train.py"
expect = ["ckpt/best.pt"]
timeout = "12h"
[[stage]]
name = "eval"
run = "python eval.py"
'''


def test_toml_becomes_the_same_shape(tmp_path):
    p = tmp_path / "job.toml"
    p.write_text(GOOD)
    job = load_job(p)
    assert job["name"] == "resnet-a3" and [s["name"] for s in job["stage"]] == ["train", "eval"]
    assert json.loads(json.dumps(job)) == job


@pytest.mark.parametrize("text, needle", [
    ("name = \n", "not valid TOML"),
    ('name = "x"\n[[stage]]\nname = "a"\nrun = "true"\ntimeout = "abc"\n', "timeout"),
    ('name = "x"\nbogus = 1\n[[stage]]\nname = "a"\nrun = "true"\n', "bogus"),
    ('name = "bad name $(x)"\n[[stage]]\nname = "a"\nrun = "true"\n', "name"),
])
def test_bad_job_is_refused_locally_with_exit_2_and_no_ssh(tmp_path, text, needle, monkeypatch):
    from tests.client.conftest import Cli
    p = tmp_path / "job.toml"
    p.write_text(text)
    count = tmp_path / "ssh-count"
    bindir = counting_ssh(tmp_path / "bin", count)
    res = Cli()("run", "rgt-box", str(p), env={"PATH": "%s:%s" % (bindir, __import__("os").environ["PATH"])})
    assert res.exit_code == exitcodes.USAGE, res.output
    assert res.stderr.startswith("Error: ") and needle in res.stderr and "Hint: " in res.stderr
    assert not count.exists(), "nothing may reach the box for a bad job"


def test_one_word_is_a_shell_line_several_words_are_argv():
    assert command_job("a", ["python t.py | tee log"], None)["stage"][0]["run"] == "python t.py | tee log"
    words = ["python", "t.py", "--name", "it's $(x)"]
    line = command_job("a", words, "/w")["stage"][0]["run"]
    assert shlex.split(line) == words


def test_attach_needs_one_way_to_wait():
    assert wait_job("w", 42, None, None, None, None, "1h", None)["stage"][0] == \
        {"name": "wait", "wait": {"pid": 42}, "timeout": "1h"}
    job = wait_job("w", None, "/x/train.log", "done$", "Traceback", None, None, "/x")
    assert job["stage"][0]["wait"] == {"log": "/x/train.log", "pattern": "done$", "fail_pattern": "Traceback"}
    with pytest.raises(ClientError) as exc:
        wait_job("w", 42, "/x/log", "done", None, None, None, None)
    assert exc.value.code == exitcodes.USAGE


def test_attach_without_a_condition_is_usage_error(rgt_local):
    res = rgt_local("attach", "rgt-box", "--name", "w", "--log", "/x/log")
    assert res.exit_code == exitcodes.USAGE and "exactly one of" in res.stderr
