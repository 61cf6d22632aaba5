"""The history ring: 60 one-minute buckets, gaps as null, and status.json stays under 64 KB."""
from __future__ import annotations

import copy

from boxagent.base.fsutil import dumps
from boxagent.health.history import History


def _health(i, n_gpus=8, n_disks=6):
    return {"memory": {"used_pct": 40 + (i % 50)},
            "gpus": [{"index": g, "util_pct": (i * 7 + g) % 101, "temperature_c": 60 + g} for g in range(n_gpus)],
            "disks": [{"path": "/data/disk%d" % d, "bytes_used_pct": 50.5, "inodes_used_pct": 3.2} for d in range(n_disks)]}


def test_an_hour_at_10s_is_60_points_per_series():
    h = History(60, 60)
    t0 = 1_000_000 * 60
    for i in range(6 * 90):                     # 90 minutes of 10 s samples
        h.add(t0 + 10 * i, _health(i))
    d = h.to_dict()
    assert d["step_s"] == 60 and d["t0"] == t0 + 30 * 60
    assert len(d["mem_used_pct"]) == 60
    assert set(d["gpu_util_pct"]) == {str(g) for g in range(8)}
    assert all(len(v) == 60 for v in d["gpu_util_pct"].values())
    assert all(v is not None for v in d["gpu_temp_c"]["7"]) and d["gpu_temp_c"]["7"][0] == 67


def test_levels_keep_the_bucket_max_util_the_mean():
    h = History(60, 60)
    for i, (mem, util) in enumerate([(10, 0), (95, 100), (20, 50)]):
        h.add(600 + 10 * i, {"memory": {"used_pct": mem}, "gpus": [{"index": 0, "util_pct": util}]})
    d = h.to_dict()
    assert d["mem_used_pct"] == [95] and d["gpu_util_pct"]["0"] == [50]


def test_gaps_are_null_and_old_points_fall_off():
    h = History(60, 60)
    h.add(0, _health(1, 1, 0))
    h.add(600, _health(2, 1, 0))                # daemon was down for 9 minutes
    d = h.to_dict()
    assert len(d["mem_used_pct"]) == 11 and d["mem_used_pct"][1:10] == [None] * 9
    h.add(600 + 3600, _health(3, 1, 0))
    d = h.to_dict()
    assert d["mem_used_pct"] == [43] and d["t0"] == 4200   # an hour later nothing old is left


def test_status_with_8_gpus_and_an_hour_of_history_is_under_64kb():
    h = History(60, 60)
    for i in range(360):
        h.add(6000 + 10 * i, _health(i))
    gpu = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-" + "a" * 36, "pci_bus_id": "00000000:3B:00.0",
           "util_pct": 100, "memory_used_bytes": 85899345920, "memory_total_bytes": 85899345920,
           "temperature_c": 80, "power_w": 700.0, "sm_clock_mhz": 1980, "sm_clock_max_mhz": 1980,
           "throttle_reasons": ["sw_power_cap"], "ecc_uncorrected": 0, "remapped_rows_pending": 0,
           "remapped_rows_failed": 0, "processes": [{"pid": 123456, "used_memory_bytes": 80000000000, "visible": True}],
           "lost": False, "xid_last": None}
    status = {"health": {"gpus": [dict(copy.deepcopy(gpu), index=i) for i in range(8)]}, "history": h.to_dict()}
    size = len(dumps(status).encode())
    assert size < 64 * 1024, size
