"""``tenure demo --cluster``: the embedded cluster starts, every shard reports, and it is gone
afterwards."""

from __future__ import annotations

import re

import pytest
import redis
from click.testing import CliRunner

from tenure.cli import main

pytestmark = pytest.mark.cluster


def test_demo_cluster_reports_every_shard_and_cleans_up() -> None:
    args = ["demo", "--cluster", "-p", "2", "-t", "3", "-k", "20"]
    result = CliRunner().invoke(main, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "no overlap on any shard" in result.output
    ports = set(re.findall(r"127\.0\.0\.1:(\d+) ", result.output))
    assert len(ports) == 3  # one row per master
    for port in ports:
        with pytest.raises(redis.ConnectionError), redis.Redis(port=int(port)) as r:
            r.ping()
