"""What users write type-checks with ``mypy --strict``: ``on_lost`` callbacks annotated with
the lock's own class, the read and write sides' classes importable from ``tenure``, and
functions decorated with a lock (``@lock``, ``@lock(timeout=5)``) keeping their signature."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api")

USER_CODE = textwrap.dedent(
    """
    import tenure


    def on_lost(lock: tenure.Lock) -> None:
        print(lock.name)


    def on_lost_fair(lock: tenure.FairLock) -> None:
        print(lock.name)


    async def main() -> None:
        async with tenure.AsyncClient("redis://127.0.0.1:6379/0") as aclient:
            def on_lost_async(lock: tenure.AsyncLock) -> None:
                print(lock.name)

            alock = aclient.lock("a", on_lost=on_lost_async)
            reader: tenure.AsyncReadLock = aclient.read_write_lock("c").read_lock()
            writer: tenure.AsyncWriteLock = aclient.read_write_lock("c").write_lock()
            print(alock, reader, writer)


    with tenure.Client("redis://127.0.0.1:6379/0") as client:
        lock = client.lock("a", on_lost=on_lost)
        fair = client.fair_lock("b", on_lost=on_lost_fair)
        read: tenure.ReadLock = client.read_write_lock("c").read_lock()
        write: tenure.WriteLock = client.read_write_lock("c").write_lock()
        print(lock, fair, read, write)
    """
)

# Every acquirable kind, sync and asyncio, as ``@lock`` and ``@lock(timeout=5)``: the
# decorated function keeps its parameters and its (awaited) return type.
DECORATED = textwrap.dedent(
    """
    from collections.abc import Callable, Coroutine
    from typing import Any

    import tenure

    client = tenure.Client("redis://127.0.0.1:6379/0")
    aclient = tenure.AsyncClient("redis://127.0.0.1:6379/0")
    rw = client.read_write_lock("rw")
    arw = aclient.read_write_lock("rw")
    locks = [
        client.lock("a"), client.fair_lock("b"), client.fenced_lock("c"), client.spin_lock("d"),
        rw.read_lock(), rw.write_lock(),
        client.multi_lock(client.lock("e"), client.lock("f")),
        client.red_lock(client.lock("g"), client.lock("h")),
    ]
    alocks = [
        aclient.lock("a"), aclient.fair_lock("b"), aclient.fenced_lock("c"),
        aclient.spin_lock("d"), arw.read_lock(), arw.write_lock(),
        aclient.multi_lock(aclient.lock("e"), aclient.lock("f")),
        aclient.red_lock(aclient.lock("g"), aclient.lock("h")),
    ]


    def f(x: int) -> str:
        return str(x)


    async def af(x: int) -> str:
        return str(x)


    for lock in locks:
        bare: Callable[[int], str] = lock(f)
        waiting: Callable[[int], str] = lock(timeout=5)(f)
        full: Callable[[int], str] = lock(timeout=5, lease_time=10, max_hold=60)(f)

        @lock
        def g(x: int, *, y: str = "") -> bytes:
            return y.encode() * x

        @lock(timeout=5)
        def h(x: int, *, y: str = "") -> bytes:
            return y.encode() * x

        b: bytes = g(1, y="a") + h(2, y="b")
        s: str = bare(1) + waiting(2) + full(3)


    async def main() -> None:
        for alock in alocks:
            abare: Callable[[int], Coroutine[Any, Any, str]] = alock(af)
            awaiting: Callable[[int], Coroutine[Any, Any, str]] = alock(timeout=5)(af)

            @alock
            async def ag(x: int, *, y: str = "") -> bytes:
                return y.encode() * x

            @alock(timeout=5, cancel_on_loss=False)
            async def ah(x: int, *, y: str = "") -> bytes:
                return y.encode() * x

            b: bytes = await ag(1, y="a") + await ah(2, y="b")
            s: str = await abare(1) + await awaiting(2)
    """
)

# One wrong argument per form: each is reported at its own line, and nothing else is.
WRONG = textwrap.dedent(
    """
    import tenure

    client = tenure.Client("redis://127.0.0.1:6379/0")
    aclient = tenure.AsyncClient("redis://127.0.0.1:6379/0")
    lock = client.lock("a")
    alock = aclient.lock("a")


    @lock
    def f(x: int) -> str:
        return str(x)


    @lock(timeout=5)
    def g(x: int) -> str:
        return str(x)


    @alock
    async def af(x: int) -> str:
        return str(x)


    @alock(timeout=5)
    async def ag(x: int) -> str:
        return str(x)


    f("a")  # line 30
    g(1, 2)  # line 31
    n: int = f(1)  # line 32


    async def main() -> None:
        await af("a")  # line 36
        m: int = await ag(1)  # line 37
    """
)


def run_mypy(tmp_path: Path, code: str) -> tuple[int, list[str]]:
    """mypy --strict's exit status and its error lines for ``code`` as one module."""
    source = tmp_path / "user_code.py"
    source.write_text(code)
    out, err, status = api.run(
        ["--strict", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", str(source)]
    )
    assert not err, err
    return status, [line for line in out.splitlines() if ": error:" in line]


def test_user_code_passes_mypy_strict(tmp_path: Path) -> None:
    status, errors = run_mypy(tmp_path, USER_CODE)
    assert (status, errors) == (0, [])


def test_decorated_functions_keep_their_signature(tmp_path: Path) -> None:
    status, errors = run_mypy(tmp_path, DECORATED)
    assert (status, errors) == (0, [])


def test_decorated_functions_reject_wrong_arguments(tmp_path: Path) -> None:
    status, errors = run_mypy(tmp_path, WRONG)
    assert status == 1
    found = [(int(line.split(":")[1]), line.rsplit("[", 1)[-1].rstrip("]")) for line in errors]
    assert found == [
        (30, "arg-type"),
        (31, "call-arg"),
        (32, "assignment"),
        (36, "arg-type"),
        (37, "assignment"),
    ], "\n".join(errors)
