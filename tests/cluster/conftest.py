"""Cluster and Sentinel fixtures: one real deployment per server kind for the session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from support.cluster import Cluster, Sentinels
from support.servers import binaries

KINDS = binaries()


def _binary(request: pytest.FixtureRequest) -> str:
    binary = dict(KINDS)[request.param]
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail(f"{request.param}-server is required in CI")
        pytest.skip(f"{request.param}-server not installed")
    return binary


@pytest.fixture(scope="session", params=[k for k, _ in KINDS])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """3 masters + 3 replicas, cluster_state:ok; restored (ok) before each user."""
    c = Cluster(_binary(request)).start()
    yield c
    c.stop()


@pytest.fixture
def fresh(cluster: Cluster) -> Cluster:
    """The session cluster, every node running and the cluster ok, every master flushed."""
    cluster.restore()
    cluster.flushall()
    return cluster


@pytest.fixture(scope="session", params=[k for k, _ in KINDS])
def sentinels(request: pytest.FixtureRequest) -> Iterator[Sentinels]:
    s = Sentinels(_binary(request)).start()
    yield s
    s.stop()


@pytest.fixture(params=[k for k, _ in KINDS])
def own_sentinels(request: pytest.FixtureRequest) -> Iterator[Sentinels]:
    """A Sentinel deployment of the test's own: a failover leaves it without a replica."""
    s = Sentinels(_binary(request)).start()
    yield s
    s.stop()
