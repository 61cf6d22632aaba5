"""The report of real runs, drawn by a real headless Chromium.

A real box on this machine (`rgt-client install local`: the built agent file, its daemon), the
fake libnvidia-ml.so.1 under the REAL pynvml for two GPUs whose state the training script
itself changes (it heats GPU 1 up, an Xid arrives), real stages. The run log is fed at its
seam by tests/report/sidecar.py. Then `rgt-client report local RUN`, and Chromium draws it:
the screenshot must not be blank and every chart's line must be on it.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.health.conftest import healthy
from tests.report import browser
from tests.report.browser import clusters, needs_chromium, rows_with
from tests.report.htmlcheck import offline_problems
from tests.report.sidecar import Sidecar

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]

METRICS = r"loss=(?P<loss>[0-9.]+) acc=(?P<acc>[0-9.]+)"
BLUE, ORANGE, GREEN, VERMILLION = (0, 114, 178), (230, 159, 0), (0, 158, 115), (213, 94, 0)
WHITE = (255, 255, 255)

TRAIN = r'''import json, os, shutil, sys, time
mode = sys.argv[1]
def gpus(name):   # the workload changes what NVML says: the fake library re-reads this file
    shutil.copy(name, os.environ["FAKE_NVML_STATE"] + ".new")
    os.replace(os.environ["FAKE_NVML_STATE"] + ".new", os.environ["FAKE_NVML_STATE"])
os.makedirs("ckpt", exist_ok=True)
gpus("gpu-busy.json")
n = 50
for step in range(1, n + 1):
    time.sleep(0.12)
    loss = 2.0 * 0.93 ** step + 0.1
    print("step %d/%d loss=%.4f acc=%.3f" % (step, n, loss, 1 - loss / 2.2), flush=True)
    if mode == "fail" and step == 8 and not os.path.exists("attempt1.done"):
        open("attempt1.done", "w").close()
        print("NCCL WARN Call to recv failed : Connection reset by peer", flush=True)
        print("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error", flush=True)
        sys.exit(1)
    if mode == "fail" and step == 15:
        gpus("gpu-hot.json")
    if mode == "fail" and step == 32:
        gpus("gpu-xid.json")
    if mode == "fail" and step == 36:
        gpus("gpu-busy.json")
    if step % 10 == 0:
        json.dump({"step": step}, open("ckpt/last.json", "w"))
if mode == "fail":
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB", flush=True)
    sys.exit(1)
gpus("gpu-idle.json")
print("Training completed")
'''


def _scenarios(work: Path) -> None:
    def state(util: int, hot: bool = False, xid: bool = False) -> dict:
        s = healthy(2)
        for i, g in enumerate(s["gpus"]):
            g.update(util_gpu=max(util - 4 * i, 0), memory_used=(30 + 20 * (util > 50) + 3 * i) << 30,
                     temperature=45 + util // 3, power_mw=(100 + 5 * util) * 1000)
        if hot:
            s["gpus"][1].update(temperature=89, sm_clock=1100, clocks_event_reasons=0x40 | 0x20, power_mw=390000)
        if xid:
            s["events"] = [{"gpu": 1, "xid": 31}]
        return s
    for name, s in (("gpu-idle.json", state(3)), ("gpu-busy.json", state(96)), ("gpu-hot.json", state(96, hot=True)),
                    ("gpu-xid.json", state(96, xid=True))):
        (work / name).write_text(json.dumps(s))


class RealBox:
    """A box home on this machine with its daemon (installed like `rgt-client install local`)."""

    def __init__(self, tmp: Path, monkeypatch, nvml_so: Path):
        self.home, self.work = tmp / "box home", tmp / "work"
        self.work.mkdir(parents=True)
        (self.work / "train.py").write_text(TRAIN)
        _scenarios(self.work)
        state = tmp / "nvml-state.json"
        state.write_text((self.work / "gpu-idle.json").read_text())
        for key, value in {"RGT_NVML_LIB": str(nvml_so), "FAKE_NVML_STATE": str(state), "RGT_TICK": "0.05",
                           "RGT_RETRY_BACKOFF": "0.3", "RGT_HEARTBEAT_EVERY": "3600", "RGT_STOP_GRACE": "1",
                           "RGT_KMSG_PATH": str(tmp / "no-kmsg")}.items():
            monkeypatch.setenv(key, value)
        from rgt_client.install.bootstrap import InstallOptions, install
        from rgt_client.box.transport import Target
        self.target = Target("local", home=str(self.home))
        install(self.target, InstallOptions(profile="local", sample_every=0.25, remember=False,
                                            extra_config={"history_every": 0.5}))
        self.sidecar = Sidecar(self.home, 0.5, {"train": METRICS})
        self.sidecar.start()

    def run(self, name: str, mode: str) -> dict:
        from rgt_client.jobs.submit import submit
        py = sys.executable
        stages = [{"name": "prep", "run": "%s -c 'import time; time.sleep(1.2)'" % py},
                  {"name": "train", "run": "%s train.py %s" % (py, mode), "metrics_pattern": METRICS,
                   "retries": 2, "expect": ["ckpt/last.json"], "timeout": "2m"},
                  {"name": "eval", "run": "%s -c 'import time; time.sleep(0.8)'" % py}]
        submit(self.target, {"name": name, "workdir": str(self.work), "stage": stages})
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            state = _json(self.home / "runs" / name / "state.json")
            if state.get("state") in ("succeeded", "failed"):
                time.sleep(1.0)          # the last events and a last sample reach the sidecar
                return state
            time.sleep(0.2)
        raise AssertionError("run %s did not end: %s" % (name, (self.home / "daemon.log").read_text()[-3000:]))

    def close(self) -> None:
        from tests.client.conftest import stop_daemon
        try:
            self.sidecar.stop()
        finally:
            stop_daemon(self.home)


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


@pytest.fixture
def realbox(tmp_path, monkeypatch, fake_nvml_lib, client_config):
    box = RealBox(tmp_path, monkeypatch, fake_nvml_lib)
    yield box
    box.close()


def _report(rgt_local, box: RealBox, run: str, out: Path) -> str:
    res = rgt_local("report", "local", run, "--home", str(box.home), "-o", str(out))
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == str(out)
    html = out.read_text()
    assert offline_problems(html) == []
    return html


def _check_drawn(img, html: str, colours: dict) -> None:
    """Not blank, and each chart's first line (blue) is drawn in its own figure."""
    assert img.width == 1100 and img.height > 1000
    background = img.pixel(3, 3)
    assert browser.content_height(img, background) > 1500
    n_charts = html.count('class="ln c0')
    assert n_charts >= 6
    blue = clusters(rows_with(img, colours["blue"], 150, 1050))
    assert len(blue) >= n_charts, "only %d of %d charts show their first line" % (len(blue), n_charts)


def test_report_of_a_run_that_succeeded(realbox, rgt_local, tmp_path):
    state = realbox.run("good", "ok")
    assert state["state"] == "succeeded"
    html = _report(rgt_local, realbox, "good", tmp_path / "good.html")
    for words in ("GPU utilisation", "GPU memory used", "SM clock", "Memory of the cgroup", "Disk of the workdir",
                  "Progress of the running stage", "loss (stage train)", "acc (stage train)", "run_succeeded"):
        assert words in html, words
    assert 'class="badge st-succeeded"' in html and "NVIDIA H100 80GB HBM3 × 2" in html
    img = browser.screenshot(tmp_path / "good.html", tmp_path / "good.png")
    _check_drawn(img, html, {"blue": BLUE})
    assert len(rows_with(img, GREEN, 150, 1050)) > 20          # succeeded stages in the Gantt
    dom = browser.dump_dom(tmp_path / "good.html")               # the DOM Chromium built: every chart
    assert dom.count("<svg") == html.count("<svg") >= 10
    assert "<script" not in dom
    assert os.path.getsize(tmp_path / "good.html") < 400_000


def test_report_of_a_run_with_a_retry_alerts_and_a_failure(realbox, rgt_local, tmp_path):
    state = realbox.run("bad", "fail")
    assert state["state"] == "failed"
    train = next(s for s in state["stages"] if s["name"] == "train")
    assert train["attempt"] == 2 and train["cause"]["class"] == "cuda_oom"
    html = _report(rgt_local, realbox, "bad", tmp_path / "bad.html")
    assert "<b>cuda_oom</b>" in html and "#2 failed" in html and "retried" in html
    assert '<text class="rl" x="110" y="' in html and "gpu_throttle" in html
    # the stage's own Xid 31 (an application fault) is told in its cause, not as a GPU alert
    assert "Xid 31" in html and "gpu_xid" not in html
    assert 'class="band"' in html                                 # the throttled minutes, shaded
    assert "not started" in html                                  # eval never ran
    img = browser.screenshot(tmp_path / "bad.html", tmp_path / "bad.png")
    _check_drawn(img, html, {"blue": BLUE})
    assert len(rows_with(img, VERMILLION, 150, 1050)) > 10       # the failed attempts and the critical marks
    dark = browser.screenshot(tmp_path / "bad.html", tmp_path / "bad-dark.png", dark=True)
    bg = dark.pixel(3, 3)
    assert sum(bg) < 120, "dark mode did not apply: background %s" % (bg,)
    assert len(clusters(rows_with(dark, (86, 180, 233), 150, 1050))) >= 6      # sky blue lines on dark
