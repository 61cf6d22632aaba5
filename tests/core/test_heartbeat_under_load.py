"""The loop's heartbeat keeps its pace while a huge log is scanned: a stage log is read in
bounded slices, and between slices the loop writes status and handles requests."""
from __future__ import annotations

import json
import time

import pytest

from tests.realbox import job, wait_for

GB = 1 << 30


@pytest.mark.slow
def test_heartbeat_keeps_its_pace_while_a_1gb_log_is_scanned(box, tmp_path):
    log = tmp_path / "train.log"
    line = b"  5%|#         | 500/10000 [00:05<01:35, 99.0it/s] loss=0.412 lr=3e-4 step=500 epoch 1/90\n"
    block = line * ((1 << 20) // len(line))
    with open(log, "wb") as fh:
        for _ in range(GB // len(block)):
            fh.write(block)
    box.env.update(RGT_SAMPLE_EVERY="0.5", RGT_TICK="5")        # an idle tick as on a box
    box.submit(job("big", box.workdir, {"name": "w", "wait": {"log": str(log), "pattern": "Training completed"},
                                         "timeout": "10m"}))
    box.start()
    box.wait_stage("big", "w", "running")
    beats, t0 = [], time.monotonic()
    while time.monotonic() - t0 < 6:
        hb = (json.loads((box.home / "status.json").read_text()).get("agent") or {}).get("heartbeat_ts")
        if hb and (not beats or hb != beats[-1]):
            beats.append(hb)
        time.sleep(0.1)
    gaps = [b - a for a, b in zip(beats, beats[1:])]
    assert len(beats) >= 6 and max(gaps) < 2.5, gaps          # sample_every is 0.5 s
    with open(log, "ab") as fh:                                 # the scan reaches the end
        fh.write(b"Training completed\n")
    assert box.wait_run("big", timeout=60)["state"] == "succeeded"   # caught up, not 1 MB per tick
