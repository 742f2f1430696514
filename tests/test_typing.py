"""What users write type-checks with ``mypy --strict``: ``on_lost`` callbacks annotated with
the lock's own class, and the read and write sides' classes importable from ``tenure``."""

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


def test_user_code_passes_mypy_strict(tmp_path: Path) -> None:
    source = tmp_path / "user_code.py"
    source.write_text(USER_CODE)
    out, err, status = api.run(
        ["--strict", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", str(source)]
    )
    assert status == 0, out + err
