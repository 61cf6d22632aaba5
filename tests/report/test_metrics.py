"""metrics_pattern: validated at submit with its exact path, read by the StageWatch as it tails
the log (complete lines and tqdm's redrawn line), last values in status_block()."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from boxagent.engine import jobspec
from boxagent.triage import StageWatch
from boxagent.triage.metrics import MetricsTracker, compile_metrics_pattern, number, pattern_problem, reading

LOSS = r"loss[=: ]+(?P<loss>[0-9.eE+-]+)"


def _job(**stage):
    return {"name": "j", "workdir": "/tmp", "stage": [dict({"name": "train", "run": "true"}, **stage)]}


def test_submit_keeps_a_pattern_with_named_groups():
    spec = jobspec.validate(_job(metrics_pattern=LOSS + r".*acc (?P<acc>[0-9.]+)"))
    assert spec["stage"][0]["metrics_pattern"].startswith("loss")
    assert jobspec.validate(spec) == spec          # the normalised spec validates to itself


@pytest.mark.parametrize("pattern, words", [
    (r"loss=([0-9.]+)", "needs a named group per value"),
    (r"loss=(?P<loss>[0-9.", "not a valid regular expression"),
    ("", "expected a regular expression with named groups"),
    ("".join("(?P<m%d>x)" % i for i in range(9)), "at most 8 named groups"),
])
def test_submit_refuses_a_bad_pattern_with_its_path(pattern, words):
    with pytest.raises(jobspec.JobError) as exc:
        jobspec.validate(_job(metrics_pattern=pattern))
    assert "stage[0].metrics_pattern: " in exc.value.message and words in exc.value.message


def test_a_wait_stage_needs_its_log_for_metrics():
    ok = {"name": "j", "workdir": "/tmp", "stage": [{"name": "w", "wait": {"log": "train.log", "pattern": "done"},
                                                      "metrics_pattern": LOSS}]}
    assert jobspec.validate(ok)["stage"][0]["metrics_pattern"] == LOSS
    bad = {"name": "j", "workdir": "/tmp", "stage": [{"name": "w", "wait": {"file": "x"}, "metrics_pattern": LOSS}]}
    with pytest.raises(jobspec.JobError, match=r"stage\[0\]\.metrics_pattern: a wait stage without wait.log"):
        jobspec.validate(bad)


def test_the_client_validates_it_the_same_way():
    from rgt_client.errors import ClientError
    from rgt_client.jobs.jobfile import validate
    with pytest.raises(ClientError, match="metrics_pattern: needs a named group"):
        validate(_job(metrics_pattern="loss=([0-9.]+)"))


TRAIN = r'''import sys, time
for step in range(1, 301):    # ~8 KB: more than one 4 KB read, so the watch is behind at times
    print("step %d/300 loss=%.4f lr 3e-4" % (step, 3.0 / step), flush=True)
    if step % 100 == 0:
        print("eval acc 0.%d" % (step // 10), flush=True)
for i in range(1, 11):    # tqdm: one line redrawn with \r, postfix loss=..., no newline yet
    sys.stdout.write("\r%d/10 [00:%02d<00:00, 5.0it/s, loss=%.3f]" % (i, i, 0.5 / i))
    sys.stdout.flush()
time.sleep(5)
'''


def test_the_stage_watch_reads_metrics_from_a_real_process_log(tmp_path):
    log = tmp_path / "train.0.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", TRAIN], stdout=out, stderr=subprocess.STDOUT)
    try:
        watch = StageWatch(str(log), None, None, None, None, time.time(), chunk=4096,
                           metrics_pattern=LOSS + "|acc (?P<acc>[0-9.]+)")
        deadline = time.time() + 20
        while time.time() < deadline:
            watch.poll(time.time())
            m = (watch.status_block().get("metrics") or {})
            if m == {"loss": 0.05, "acc": 0.3}:
                break
            time.sleep(0.05)
        block = watch.status_block()
        assert block["metrics"] == {"loss": 0.05, "acc": 0.3}      # tqdm's postfix is the newest loss
        assert list(block["metrics"]) == ["loss", "acc"]            # the pattern's order: loss first
        assert block["progress"] is not None
        assert watch.metrics.lines >= 300
    finally:
        proc.kill()
        proc.wait()
        watch.close()


def test_without_a_pattern_status_has_no_metrics_key(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("loss=1\n")
    watch = StageWatch(str(log), None, None, None, None, 0.0)
    watch.poll(1.0)
    assert "metrics" not in watch.status_block()


def test_a_pattern_broken_on_disk_costs_only_the_metrics(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("epoch 1/2\n")
    watch = StageWatch(str(log), None, None, None, None, 0.0, metrics_pattern="loss=([0-9]+)")
    watch.poll(1.0)
    assert watch.metrics is None and "named group" in watch.metrics_error
    assert watch.progress["done"] == 1


def test_only_lines_with_the_patterns_literal_are_matched():
    t = MetricsTracker(compile_metrics_pattern(LOSS))
    assert t.anchors == (b"loss",)
    t.feed_block(b"nothing here 1.5\nloss=0.25 step 3\nval 9\n", 1, 5.0)
    assert t.block() == {"loss": 0.25} and t.updated_at == 5.0


def test_a_loss_gone_to_nan_is_its_last_value_as_text():
    """The captured NaN run printed `Epoch 2/3 loss nan`: showing the last finite loss (9.599)
    would tell a reader at 3 a.m. the run is fine."""
    t = MetricsTracker(compile_metrics_pattern(r"loss=(?P<loss>\S+)"))
    t.feed_text("loss=0.5", 1.0)
    assert t.block() == {"loss": 0.5}
    t.feed_text("loss=nan", 2.0)
    assert t.block() == {"loss": "nan"} and t.updated_at == 2.0
    t.feed_text("loss=-inf", 3.0)
    assert t.block() == {"loss": "-inf"}
    t.feed_text("loss=abc", 4.0)                      # not a number at all: ignored
    assert t.block() == {"loss": "-inf"} and t.updated_at == 3.0
    t.feed_text("loss=0.25", 5.0)                     # it can come back
    assert t.block() == {"loss": 0.25}
    assert json.loads(json.dumps(t.block(), allow_nan=False)) == {"loss": 0.25}


def test_reading():
    assert [reading(x) for x in ("nan", "NaN", "inf", "-inf", "+Infinity", "1e999", "x", None)] == \
        ["nan", "nan", "inf", "-inf", "inf", "inf", None, None]
    assert reading("2") == 2 and reading("0.5") == 0.5


def test_number():
    assert number("3") == 3 and isinstance(number("3"), int)
    assert number("3.0") == 3.0 and isinstance(number("3.0"), float)
    assert number("1e-3") == 0.001
    assert number(None) is None and number("x") is None


def test_pattern_problem_none_for_a_good_pattern():
    assert pattern_problem(LOSS) is None
