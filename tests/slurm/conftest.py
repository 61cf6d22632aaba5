"""Slurm fixtures: one real one-node cluster per test session (tests/slurm/cluster.py).

Tests that need it are marked `slurm` and take the `slurm` fixture. Where the cluster cannot run
(binaries missing, not root, a daemon refuses to start) they skip with the exact reason; set
RGT_REQUIRE_SLURM=1 (CI, where the packages are installed) to make that a failure instead.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.slurm.cluster import ClusterUnavailable, start_cluster  # noqa: E402


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    base = tmp_path_factory.mktemp("slurm")
    try:
        cluster = start_cluster(base)
    except ClusterUnavailable as exc:
        if os.environ.get("RGT_REQUIRE_SLURM") == "1":
            pytest.fail("RGT_REQUIRE_SLURM=1 but the test cluster cannot start: %s" % exc, pytrace=False)
        pytest.skip("no Slurm test cluster: %s" % exc)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def shared(tmp_path) -> Path:
    """A per-test dir standing for the filesystem the submit host and the nodes share."""
    d = tmp_path / "shared"
    d.mkdir()
    return d



@pytest.fixture
def jobs(slurm, shared):
    """Submit/wait helpers bound to the cluster; every job a test submitted is cancelled after it
    (a job left running would hold the node's CPUs for the next test)."""
    from tests.slurm.jobs import Jobs
    helper = Jobs(slurm, shared)
    yield helper
    helper.cancel_all()


@pytest.fixture
def login(slurm, tmp_path):
    """A real daemon's home on the "login node" (this host), with RGT_HOME and the workdir on the
    filesystem the node shares (the same host here), following Slurm fast. Every job its runs
    submitted is cancelled after the test."""
    from tests.realbox import Box
    box = Box(tmp_path)
    box.env.update(SLURM_CONF=str(slurm.conf), RGT_SLURM_POLL="0.5", RGT_SLURM_EXIT_GRACE="3")
    box.slurm = slurm
    yield box
    box.cleanup()
    ids = [json.loads(p.read_text()).get("job_id") for p in (box.home / "runs").glob("*/stages/*.job")]
    if ids:
        slurm.run("scancel", *[i for i in ids if i], timeout=30)
