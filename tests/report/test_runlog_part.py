"""RunLog driven through its Part interface with statuses and events shaped like the daemon's."""
from __future__ import annotations

from boxagent.runlog import store
from boxagent.runlog.part import step_from
from tests.report.conftest import GIB, Driver, gpu, run_block, status

T0 = 1_714_550_400.0     # a minute boundary


def _read(driver: Driver, run: str):
    hist = store.read(str(driver.history_path(run)))
    assert hist is not None
    return hist


def test_one_point_a_minute_from_start_to_end_with_every_event(driver):
    driver.make_run("r1")
    driver.event(T0, "run_started", "r1")
    driver.event(T0, "stage_started", "r1", stage="train", attempt=1)
    for i in range(0, 5 * 60, 10):          # 5 minutes of samples every 10 s
        mem = (10 + i / 10) * GIB            # creeping up: the minute keeps its maximum
        driver.sample(T0 + i, status([run_block("r1", metrics={"loss": 2.0 - i / 300})], mem=mem))
    driver.event(T0 + 300, "stage_succeeded", "r1", stage="train", attempt=1)
    driver.event(T0 + 301, "run_succeeded", "r1")
    hist = _read(driver, "r1")
    pts = hist["points"]
    assert [p["t"] for p in pts] == [T0 + 60 * k for k in range(5)]
    assert all(p["s"] == 60 for p in pts)
    assert pts[0]["m"][0] == int((10 + 5) * GIB) and pts[0]["m"][1] == 64 * GIB
    assert pts[-1]["x"] == {"loss": 2.0 - 290 / 300} and pts[-1]["st"] == "train"
    assert set(pts[0]["g"]) == {"0", "1"}
    assert [e["type"] for e in hist["events"]] == ["run_started", "stage_started", "stage_succeeded", "run_succeeded"]
    assert hist["info"][0]["gpus"]["0"]["name"] == "NVIDIA H100 80GB HBM3"
    assert driver.part.live == {}


def test_a_minute_averages_utilisation_and_keeps_the_worst_levels(driver):
    driver.make_run("r1")
    driver.event(T0, "run_started", "r1")
    for i, (util, temp, reasons) in enumerate([(100, 60, []), (50, 88, ["hw_thermal_slowdown"]), (0, 70, [])]):
        driver.sample(T0 + 10 + 20 * i, status([run_block("r1")], gpus=[gpu(0, util=util, temp=temp, reasons=reasons)]))
    driver.sample(T0 + 70, status([run_block("r1")]))
    row = _read(driver, "r1")["points"][0]["g"]["0"]
    util, _mem, temp, _power, _sm, mask = row
    assert 40 <= util <= 60            # a mean, weighted by the time each sample covers
    assert temp == 88                  # the spike is kept
    assert mask & 0x40                 # hw_thermal_slowdown was seen in the minute


def test_box_alerts_go_to_every_live_run_and_nothing_after_the_end(driver):
    for r in ("a", "b"):
        driver.make_run(r)
        driver.event(T0, "run_started", r)
    driver.event(T0 + 5, "disk_low", None, "warning", key="disk_low:/data", summary="disk 95% full")
    driver.event(T0 + 6, "gpu_throttle", "a", "warning", key="gpu_throttle:1", stage="train")
    driver.event(T0 + 7, "heartbeat", None)            # routine box event: in nobody's story
    driver.event(T0 + 8, "run_failed", "a", "critical")
    driver.event(T0 + 9, "memory_high", None, "warning", key="memory")
    a = [e["type"] for e in _read(driver, "a")["events"]]
    b = [e["type"] for e in _read(driver, "b")["events"]]
    assert a == ["run_started", "disk_low", "gpu_throttle", "run_failed"]
    assert b == ["run_started", "disk_low", "gpu_throttle", "memory_high"]


def test_a_run_running_under_a_restarted_daemon_is_adopted_from_status(driver):
    driver.make_run("r1")                   # no run_started reaches this part: it started before
    for i in range(0, 130, 10):
        driver.sample(T0 + i, status([run_block("r1")]))
    driver.sample(T0 + 130, status([run_block("r1", state="succeeded", stage=None)]))
    pts = _read(driver, "r1")["points"]
    assert [p["t"] for p in pts] == [T0, T0 + 60, T0 + 120]
    assert "r1" not in driver.part.live


def test_gpu_slots_limit_the_point_to_the_gpus_the_run_holds(driver):
    driver.make_run("r1")
    driver.event(T0, "run_started", "r1")
    gpus = [gpu(i, util=10 * i) for i in range(4)]
    for i in range(0, 70, 10):
        driver.sample(T0 + i, status([run_block("r1", gpus=[1, 3])], gpus=gpus))
    pt = _read(driver, "r1")["points"][0]
    assert set(pt["g"]) == {"1", "3"} and pt["g"]["3"][0] == 30


def test_the_workdir_disk_is_the_longest_watched_path_above_it(driver, tmp_path):
    work = tmp_path / "data" / "work"
    work.mkdir(parents=True)
    disks = [{"path": "/", "bytes_used_pct": 10.0, "inodes_used_pct": 1.0},
             {"path": str(tmp_path / "data"), "bytes_used_pct": 93.5, "inodes_used_pct": 40.0}]
    driver.make_run("r1")
    driver.event(T0, "run_started", "r1")
    for i in range(0, 70, 10):
        driver.sample(T0 + i, status([run_block("r1", workdir=str(work))], disks=disks))
    hist = _read(driver, "r1")
    assert hist["points"][0]["d"] == [93.5, 40.0]
    assert hist["info"][0]["workdir_disk"] == str(tmp_path / "data")


def test_stop_writes_the_minute_in_progress(driver):
    driver.make_run("r1")
    driver.event(T0, "run_started", "r1")
    driver.sample(T0 + 5, status([run_block("r1")]))
    driver.part.stop(1.0)
    assert len(_read(driver, "r1")["points"]) == 1


def test_events_of_a_run_without_a_directory_are_not_written(driver):
    driver.event(T0, "submit_refused", "ghost", "warning")
    assert not driver.history_path("ghost").exists()


def test_the_same_status_twice_counts_once(driver):
    driver.make_run("r1")
    driver.event(T0, "run_started", "r1")
    driver.current = status([run_block("r1")])
    driver.part.sample(T0 + 10)
    driver.part.sample(T0 + 20)            # no new status.json was written in between
    assert driver.part.live["r1"].last_at == T0 + 10


def test_step_from_config_and_env():
    assert step_from({}, {}) is None                         # the sampling interval decides
    assert step_from({"history_every": 5}, {}) == 5.0
    assert step_from({"history_every": 5}, {"RGT_HISTORY_EVERY": "0.5"}) == 0.5
    assert step_from({"history_every": "soon"}, {}) is None
    assert step_from({"history_every": float("nan")}, {}) is None
    assert step_from({"history_every": 0}, {}) == 0.2        # never a busy loop of points


def test_status_carries_the_last_hour_of_the_first_metric(driver):
    driver.make_run("r1")
    driver.event(T0, "run_started", "r1")
    for k in range(70):
        driver.sample(T0 + 60 * k, status([run_block("r1", metrics={"loss": 1.0 / (k + 1), "acc": 0.5})]))
    sp = driver.part.status_block()["metrics_history"]["r1"]
    assert sp["stage"] == "train" and sp["metric"] == "loss" and sp["step_s"] == 60
    assert len(sp["values"]) == 60 and sp["values"][-1] == 1.0 / 69
    again = Driver(driver.home)                         # the daemon restarted under the live run
    again.sample(T0 + 60 * 70, status([run_block("r1", metrics={"loss": 0.001})]))
    assert again.part.status_block()["metrics_history"]["r1"]["values"] == sp["values"]


def test_history_points_follow_the_sampling_interval_while_a_run_is_young(tmp_path):
    """A 39 s training on an H100 gave a report whose charts were each one dot: one point a
    minute. The step is now the sampling interval (10 s by default)."""
    from boxagent.base.home import Home
    d = Driver(Home(str(tmp_path / "home")), config={})
    d.make_run("short")
    d.event(T0, "run_started", "short")
    for k in range(5):
        d.sample(T0 + 10 * k + 1, status([run_block("short")], gpus=[gpu(0, util=20 * k)]))
    d.event(T0 + 45, "run_succeeded", "short")
    pts = _read(d, "short")["points"]
    assert len(pts) == 5 and {p["s"] for p in pts} == {10.0}
    assert [p["g"]["0"][0] for p in pts] == [0, 20, 40, 60, 80]


def test_every_logged_metric_value_is_kept_and_the_last_is_the_charts_last(tmp_path):
    """The demo's loss chart drew 2 of 5 logged values and ended at 0.77 while its own table
    said the last value was 0.1832: the points kept the last value of each sample only."""
    import json
    from boxagent.base.home import Home
    from boxagent.base.roots import Roots
    from boxagent.runlog import report_data
    from rgt_client.report import data
    from rgt_client.report.charts import Measures
    from rgt_client.report.page import render
    home = Home(str(tmp_path / "home"))
    d = Driver(home, config={})
    d.make_run("m1")
    (tmp_path / "home" / "runs" / "m1" / "spec.json").write_text(json.dumps(
        {"name": "m1", "stage": [{"name": "train", "run": "x", "metrics_pattern": r"loss=(?P<loss>[0-9.]+)"}]}))
    log = tmp_path / "train.log"
    d.event(T0, "run_started", "m1")
    losses = [2.31, 1.42, 0.77, 0.4, 0.1832]

    def block(state):
        run = run_block("m1", state=state, metrics={"loss": 0.77})
        run["stages"][0]["log"] = str(log)
        return run
    log.write_text("epoch 1 loss=2.31\nepoch 2 loss=1.42\n")
    d.sample(T0 + 10, status([block("running")]))
    log.write_text(log.read_text() + "epoch 3 loss=0.77\n")
    d.sample(T0 + 20, status([block("running")]))
    log.write_text(log.read_text() + "epoch 4 loss=0.4\nepoch 5 loss=0.1832\ndone\n")
    d.sample(T0 + 25, status([block("succeeded")]))        # the run ended between two samples
    hist = _read(d, "m1")
    assert [r["x"]["loss"] for r in hist["metrics"]] == losses
    assert [r["l"] for r in hist["metrics"]] == [1, 2, 3, 4, 5]
    doc = data.normalise(report_data.build(home, Roots(), "m1", now=T0 + 30))
    chart = Measures(doc["history"], []).metric_charts()[0]
    assert [v for _t, v in chart.series[0].points] == losses and chart.note == "every logged value (5)"
    html = render(doc)
    assert "every logged value (5)" in html and "a point every 10 s" in html
