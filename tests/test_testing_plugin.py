"""The tenure.testing pytest plugin, run as users run it (pytester, a real embedded server)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tenure.testing import Interval, OverlapError, check_no_overlap

pytest_plugins = ["pytester"]

EXAMPLES = Path(__file__).parent.parent / "docs" / "examples"
EXAMPLE = EXAMPLES / "test_critical_section.py"
ASYNC_EXAMPLE = EXAMPLES / "test_async_critical_section.py"


# ------------------------------------------------------------------ overlap checker
def test_touching_and_separate_sections_pass() -> None:
    check_no_overlap([(0.0, 1.0), (1.0, 2.0), (3.0, 3.5, "c")])
    check_no_overlap([])


def test_overlap_report_names_each_pair() -> None:
    with pytest.raises(OverlapError) as failure:
        check_no_overlap(
            [Interval(10.0, 12.0, "a"), Interval(11.5, 13.0, "b"), Interval(11.9, 12.5, "c")]
        )
    report = str(failure.value)
    assert report.startswith("3 pair(s) of critical sections overlapped (of 3 sections")
    assert "a [0.000, 2.000] and b [1.500, 3.000]: 500.0 ms together" in report
    assert "a [0.000, 2.000] and c [1.900, 2.500]: 100.0 ms together" in report
    assert "b [1.500, 3.000] and c [1.900, 2.500]: 600.0 ms together" in report


def test_overlap_report_is_capped() -> None:
    with pytest.raises(OverlapError, match=r"\.\.\. and 3 more"):
        check_no_overlap([(0.0, 10.0)] + [(i + 1.0, i + 1.5) for i in range(5)], limit=2)


def test_bad_interval_raises_value_error() -> None:
    with pytest.raises(ValueError, match="exits before it enters"):
        check_no_overlap([(2.0, 1.0)])
    with pytest.raises(ValueError, match="limit"):
        check_no_overlap([], limit=0)


# ------------------------------------------------------------------ the plugin in use
def test_doc_example_passes_under_a_server_pause(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_example=EXAMPLE.read_text())
    start = time.monotonic()
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    took = time.monotonic() - start
    print("\n".join(result.outlines))
    result.assert_outcomes(passed=1)
    assert took < 60, f"the example took {took:.1f} s"


def test_async_doc_example_runs_as_written_warning_free(pytester: pytest.Pytester) -> None:
    """No marker, no pytest-asyncio setting in the project, every warning an error."""
    pytester.makepyfile(test_example=ASYNC_EXAMPLE.read_text())
    result = pytester.runpytest_subprocess("-W", "error", "-p", "no:cacheprovider")
    print("\n".join(result.outlines + result.errlines))
    result.assert_outcomes(passed=1)
    assert not [line for line in result.outlines if "warnings summary" in line]
    assert "warning" not in result.outlines[-1]  # "1 passed in 0.8s", no "1 warning"


def test_async_tests_without_tenure_fixtures_are_left_to_their_owner(
    pytester: pytest.Pytester,
) -> None:
    """Only tests asking for a tenure_* fixture are marked: another coroutine test stays as
    pytest-asyncio's strict mode leaves it (pytest fails it: not natively supported), and an
    explicit marker still works."""
    pytester.makepyfile(
        """
        import pytest

        async def test_not_ours():
            pass

        @pytest.mark.asyncio
        async def test_marked(tenure_async_client):
            assert await tenure_async_client.lock("m").acquire(blocking=False)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*_ test_not_ours _*", "async def functions are not native*"])


SLEEPER = """
import os, time

def test_sleeps(tenure_server):
    with open("server.pid", "w") as out:
        out.write(str(tenure_server.pid))
    time.sleep(60)
"""


def test_sigterm_to_pytest_stops_the_embedded_server(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sleeper=SLEEPER)
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    pid_file = pytester.path / "server.pid"
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline, "the test never started its server"
            time.sleep(0.05)
        server = int(pid_file.read_text())
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()
    deadline = time.monotonic() + 10
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _alive(server)
    if left:  # do not leak it: the assertion below reports it
        os.kill(server, signal.SIGKILL)
    assert not left, f"server {server} still ran 10 s after pytest's SIGTERM:\n{out}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def test_overlap_from_an_expired_lease_fails_with_a_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import threading, time

        def test_lease_too_short(tenure_client, tenure_intervals):
            first = threading.Event()

            def slow():
                with tenure_client.lock("job")(lease_time=0.3):  # lease ends mid-section
                    with tenure_intervals.section("slow"):
                        first.set()
                        time.sleep(1.0)

            thread = threading.Thread(target=slow)
            thread.start()
            assert first.wait(10)
            other = tenure_client.lock("job")

            def fast():
                with other(timeout=10):
                    with tenure_intervals.section("fast"):
                        pass
            t2 = threading.Thread(target=fast)
            t2.start(); t2.join(15); thread.join(15)
            tenure_intervals.check()
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*OverlapError: 1 pair(s) of critical sections overlapped*", "*slow [[]*and fast [[]*"]
    )


def test_fixtures_async_client_restart_and_client_pause(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import time
        import pytest
        import tenure

        @pytest.mark.asyncio
        async def test_async_client(tenure_async_client):
            async with tenure_async_client.lock("a"):
                assert await tenure_async_client.lock("a").owned()

        def test_restart_forgets_every_lock(tenure_server, tenure_client):
            pid = tenure_server.pid
            assert tenure_client.lock("r").acquire(lease_time=60)
            tenure_server.restart()
            assert tenure_server.pid != pid
            other = tenure.Client(tenure_server.url)
            try:
                assert other.lock("r").acquire(blocking=False)
            finally:
                other.close()

        def test_client_pause_holds_commands(tenure_server, tenure_client):
            tenure_server.client_pause(0.5)
            start = time.monotonic()
            assert tenure_client.lock("p").acquire()
            assert time.monotonic() - start >= 0.3
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


HOLDER = """
import sys, time, tenure
client = tenure.Client(sys.argv[1], watchdog_timeout=1.0)
client.lock("frozen").acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_paused_holder_loses_its_lease(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        holder=HOLDER,
        test_pause=f"""
        import subprocess, sys, time
        from tenure.testing import paused_process

        def test_frozen_holder(tenure_server, tenure_client):
            proc = subprocess.Popen([{sys.executable!r}, "holder.py", tenure_server.url],
                                    stdout=subprocess.PIPE, text=True)
            try:
                assert proc.stdout.readline().strip() == "held"
                lock = tenure_client.lock("frozen")
                assert not lock.acquire(timeout=1.5)       # the watchdog keeps it held
                with paused_process(proc.pid):
                    assert lock.acquire(timeout=5)       # frozen: its lease runs out
            finally:
                proc.kill()
                proc.wait()
        """,
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_plugin_is_registered_by_the_entry_point(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider")
    for fixture in ("tenure_server", "tenure_intervals", "tenure_async_client", "tenure_cluster"):
        result.stdout.fnmatch_lines([f"{fixture} -- *"])


@pytest.mark.cluster
def test_cluster_fixture_gives_a_cluster_client(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import redis.cluster
        import tenure

        def test_cluster(tenure_cluster):
            with tenure.Client(tenure_cluster) as client:
                with client.lock("spread"):
                    assert client.inspect("spread").held
            with redis.cluster.RedisCluster.from_url(tenure_cluster) as raw:
                assert len(raw.get_primaries()) == 3
        """
    )
    result = pytester.runpytest_subprocess("-W", "error", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
