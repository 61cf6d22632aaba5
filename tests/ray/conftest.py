"""Ray fixtures: one real two-node cluster on loopback per test session (tests/ray/cluster.py).

Every Ray test module is marked `xdist_group("ray")` so one pytest-xdist worker runs them all
against this one cluster, and `slow`. Without the `ray` package (the dev extra) they skip, saying so.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    try:
        import ray  # noqa: F401 - only to know the package is there: the agent never imports it
    except ImportError:
        pytest.skip("the `ray` package is not installed (pip install -e '.[dev]' brings it)")
    from tests.ray.cluster import RayCluster, RayUnavailable
    cluster = RayCluster(tmp_path_factory.mktemp("ray"))
    try:
        cluster.start()
    except RayUnavailable as exc:
        cluster.stop()
        pytest.skip("the Ray test cluster cannot start: %s" % exc)
    try:
        yield cluster
    finally:
        cluster.stop()
