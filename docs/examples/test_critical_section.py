"""A critical section under a server pause (tenure.testing plugin)."""

from threading import Thread

import tenure
from tenure.testing import EmbeddedServer, IntervalRecorder


def test_counter_survives_a_server_pause(
    tenure_server: EmbeddedServer,
    tenure_client: tenure.Client,
    tenure_intervals: IntervalRecorder,
) -> None:
    balance = {"value": 0}  # stands for a resource outside Redis

    def worker(number: int) -> None:
        for _ in range(25):
            with tenure_client.lock("account:7"):  # under test
                with tenure_intervals.section(f"worker {number}"):
                    value = balance["value"]
                    balance["value"] = value + 1

    threads = [Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    tenure_server.pause(1.0)  # SIGSTOP the server for 1 s
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive()
    assert balance["value"] == 100
    tenure_intervals.check()  # OverlapError on any overlap
