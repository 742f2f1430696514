"""Redis Cluster needs a newer redis-py than the package's floor: an older one is refused
with a message saying which version to install, never a TypeError deep in a refresh."""

from __future__ import annotations

import pytest

from tenure import BackendError
from tenure._redis import require_cluster_support


@pytest.mark.parametrize("version", ["5.3.0", "6.4.0", "7.1.1"])
def test_older_redis_py_is_refused_for_cluster(version: str) -> None:
    with pytest.raises(BackendError, match=r"redis-py >= 7\.2 \(installed: " + version):
        require_cluster_support(version)


@pytest.mark.parametrize("version", ["7.2.0", "7.4.0", "8.1.0", "10.0.0b1"])
def test_recent_redis_py_is_accepted(version: str) -> None:
    require_cluster_support(version)
