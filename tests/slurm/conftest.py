"""Slurm fixtures: one real one-node cluster per test session (tests/slurm/cluster.py).

Tests that need it are marked `slurm` and take the `slurm` fixture. Where the cluster cannot run
(binaries missing, not root, a daemon refuses to start) they skip with the exact reason; set
RGT_REQUIRE_SLURM=1 (CI, where the packages are installed) to make that a failure instead.
"""
from __future__ import annotations

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
