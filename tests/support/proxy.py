"""A TCP proxy on 127.0.0.1 in front of a real server, for partitions and late replies.

``freeze()`` holds every byte in both directions (a partition: the client's commands and the
server's replies are delayed, not lost); ``hold_replies()`` only the server's replies (a
command runs, its answer comes late); ``thaw()`` lets everything through in order. Threads,
so one proxy serves sync and asyncio clients alike.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from support.servers import free_port


class Proxy:
    """Forwards connections from :attr:`url` to ``127.0.0.1:upstream_port``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self._up = threading.Event()  # set: client -> server bytes flow; clear: held
        self._down = threading.Event()  # the same, server -> client
        self._up.set()
        self._down.set()
        self._closed = False
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def freeze(self) -> None:
        """Hold every byte from now on, both ways, until :meth:`thaw`."""
        self._up.clear()
        self._down.clear()

    def hold_replies(self) -> None:
        """Hold the server's replies from now on (commands still reach it) until :meth:`thaw`."""
        self._down.clear()

    def thaw(self) -> None:
        self._up.set()
        self._down.set()

    def close(self) -> None:
        self._closed = True
        self.thaw()
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                down, _ = self._listener.accept()
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._sockets += [down, up]
            for src, dst, gate in ((down, up, self._up), (up, down, self._down)):
                threading.Thread(target=self._pump, args=(src, dst, gate), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, gate: threading.Event) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                gate.wait()  # held: keep the bytes until thawed
                if self._closed:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
