"""MONITOR on a real server, in a thread: every command the server runs while it watches."""

from __future__ import annotations

import threading

from support.servers import Server


class Monitor:
    """MONITOR lines (client type, command) of ``server`` from construction until :meth:`stop`."""

    STOP = "tenure-test-monitor-stop"
    HANDSHAKE = ("HELLO", "CLIENT SETINFO")
    """What the connection that stops the monitor sends first (redis-py's handshake)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.lines: list[tuple[str, str]] = []
        self.ports: list[str] = []
        """The client port of each line (which connection sent it)."""
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(5)

    def _run(self) -> None:
        with self.server.client(decode_responses=True).monitor() as monitor:
            self.ready.set()
            for line in monitor.listen():
                if self.STOP in line["command"]:
                    return
                self.lines.append((line["client_type"], line["command"]))
                self.ports.append(str(line.get("client_port", "")))

    def stop(self) -> list[tuple[str, str]]:
        """Every line seen, scripts' inner commands (client type ``lua``) included."""
        self.server.client().echo(self.STOP)
        self.thread.join(10)
        return self.lines

    def commands(self) -> list[str]:
        """:meth:`stop`, keeping only commands clients sent (no scripts' inner commands, no
        handshake of the stopping connection)."""
        return [c for kind, c in self.stop() if kind != "lua" and not c.startswith(self.HANDSHAKE)]
