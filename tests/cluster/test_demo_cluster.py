"""``tenure demo --cluster``: the embedded cluster starts, every shard reports, and it is gone
afterwards."""

from __future__ import annotations

import re

import pytest
import redis
from cli.runner import tenure_cmd

pytestmark = pytest.mark.cluster


def test_demo_cluster_reports_every_shard_and_cleans_up() -> None:
    result = tenure_cmd(
        "demo",
        "--cluster",
        "-p",
        "2",
        "-t",
        "3",
        "-k",
        "20",
        timeout=300,
        extra_env={"COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no overlap on any shard" in result.stdout
    ports = set(re.findall(r"127\.0\.0\.1:(\d+) ", result.stdout))
    assert len(ports) == 3  # one row per master
    for port in ports:
        with pytest.raises(redis.ConnectionError), redis.Redis(port=int(port)) as r:
            r.ping()
