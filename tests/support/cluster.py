"""Real multi-node deployments for the tests: a Redis Cluster (3 masters + 3 replicas) and a
Sentinel setup (primary, replica, one sentinel), from the embedded valkey binary or Debian's
redis-server. Built with plain redis-py commands (CLUSTER ADDSLOTSRANGE / MEET / REPLICATE):
no external tool. Every process listens on a free 127.0.0.1 port.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio.sentinel
import redis.sentinel
from redis.crc import key_slot

from support.servers import Server, free_port

SLOTS = 16384
NODE_TIMEOUT_MS = 1000
"""cluster-node-timeout: a killed master is failed over after about 1-3 s."""


def wait_until(check: Callable[..., bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            if check():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


class ClusterNode(Server):
    """One cluster-enabled server; its bus on another free port (port + 10000 may be taken)."""

    def __init__(self, binary: str) -> None:
        self.bus = bus = free_port()
        super().__init__(
            binary,
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            str(NODE_TIMEOUT_MS),
            "--cluster-port",
            str(bus),
            "--cluster-require-full-coverage",
            "no",
            # A replica restarted a moment ago may still be promoted (tests kill masters
            # in a row).
            "--cluster-replica-validity-factor",
            "0",
        )

    def info(self) -> dict[str, str]:
        with self.client(socket_timeout=1) as r:
            raw = r.execute_command("CLUSTER", "INFO")
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        return dict(line.split(":", 1) for line in text.split() if ":" in line)


class Cluster:
    """3 masters (slots split evenly) and one replica each, ``cluster_state:ok`` on every node."""

    def __init__(self, binary: str, masters: int = 3) -> None:
        self.binary = binary
        self.masters = [ClusterNode(binary) for _ in range(masters)]
        self.replicas = [ClusterNode(binary) for _ in range(masters)]

    @property
    def nodes(self) -> list[ClusterNode]:
        return self.masters + self.replicas

    @property
    def url(self) -> str:
        return self.masters[0].url

    def start(self) -> Cluster:
        for node in self.nodes:
            node.start()
        ids = {node.port: _myid(node) for node in self.nodes}
        step = SLOTS // len(self.masters)
        for i, node in enumerate(self.masters):
            last = SLOTS - 1 if i == len(self.masters) - 1 else (i + 1) * step - 1
            with node.client() as r:
                r.execute_command("CLUSTER", "ADDSLOTSRANGE", i * step, last)
        with self.masters[0].client() as r:
            for node in self.nodes[1:]:
                r.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port, node.bus)
        wait_until(
            lambda: all(_known(n) == len(self.nodes) for n in self.nodes), 30, "nodes to meet"
        )
        for master, replica in zip(self.masters, self.replicas, strict=True):
            with replica.client() as r:
                r.execute_command("CLUSTER", "REPLICATE", ids[master.port])
        self.wait_ok()
        for replica in self.replicas:
            wait_until(lambda r=replica: _link_up(r), 30, "replicas to sync")
        return self

    def wait_ok(self, seconds: float = 30) -> None:
        """Every running node reports ``cluster_state:ok`` and agrees on the slot owners."""
        wait_until(
            lambda: all(n.info()["cluster_state"] == "ok" for n in self.running()),
            seconds,
            "cluster_state:ok",
        )

    def restore(self) -> None:
        """Restart every killed node (it rejoins as a replica), wait for ``cluster_state:ok``
        and for every replica's link to its master."""
        for node in self.nodes:
            if node.proc is None or node.proc.poll() is not None:
                node.start()
        self.wait_ok()
        masters = {n.port for n in self.current_masters()}
        for node in self.running():
            if node.port not in masters:
                wait_until(lambda n=node: _link_up(n), 30, "replicas to sync")

    def running(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def redis(self, **kwargs: Any) -> redis.cluster.RedisCluster:
        """A redis-py cluster client on this cluster."""
        node = self.running()[0]
        return redis.cluster.RedisCluster(host="127.0.0.1", port=node.port, **kwargs)

    def master_of(self, key: str) -> ClusterNode:
        """The running node that owns ``key``'s slot now (asked of the cluster)."""
        slot = key_slot(key.encode())
        with self.running()[0].client() as r:
            for start, end, primary, *_ in r.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    port = int(primary[1])
                    return next(n for n in self.nodes if n.port == port)
        raise LookupError(slot)

    def master_of_slot_agreed(self, slot: int, port: int) -> bool:
        """Every running master names the node on ``port`` as the owner of ``slot``."""
        for node in self.current_masters():
            with node.client() as r:
                for start, end, primary, *_ in r.execute_command("CLUSTER", "SLOTS"):
                    if start <= slot <= end and int(primary[1]) != port:
                        return False
        return True

    def current_masters(self) -> list[ClusterNode]:
        return [n for n in self.running() if _role(n) == "master"]

    def replica_of(self, master: ClusterNode) -> ClusterNode:
        """The running replica whose master is ``master``, its link up."""
        for node in self.running():
            with node.client(decode_responses=True, socket_timeout=1) as r:
                info = r.info("replication")
            if info.get("role") == "slave" and int(info.get("master_port", 0)) == master.port:
                return node
        raise LookupError(f"no replica of {master.port}")

    def take_over(self, replica: ClusterNode) -> None:
        """Promote ``replica`` at once (``CLUSTER FAILOVER TAKEOVER``: no agreement of the
        other masters needed, its master may be dead) and wait until it says it is master."""
        with replica.client(socket_timeout=5) as r:
            r.execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
        wait_until(lambda: _role(replica) == "master", 10, "the takeover")

    def flushall(self) -> None:
        for node in self.current_masters():
            with node.client() as r:
                r.flushall()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def _myid(node: Server) -> str:
    with node.client(decode_responses=True) as r:
        return str(r.execute_command("CLUSTER", "MYID"))


def _known(node: Server) -> int:
    with node.client(decode_responses=True, socket_timeout=1) as r:
        text = r.execute_command("CLUSTER", "NODES")
    if isinstance(text, dict):  # redis-py parses CLUSTER NODES for us
        return sum(1 for v in text.values() if v.get("connected"))
    return sum(1 for line in str(text).splitlines() if "connected" in line)


def _link_up(node: Server) -> bool:
    with node.client(decode_responses=True, socket_timeout=1) as r:
        info = r.info("replication")
    return bool(info.get("role") == "slave" and info.get("master_link_status") == "up")


def _role(node: Server) -> str:
    with node.client(decode_responses=True, socket_timeout=1) as r:
        return str(r.info("replication").get("role"))


class Sentinels:
    """A primary, its replica and one sentinel monitoring them as ``mymaster``."""

    NAME = "mymaster"

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.primary = Server(binary)
        self.replica: Server | None = None
        self.sentinel_port = free_port()
        self.dir = tempfile.mkdtemp(prefix="tenure-sentinel-")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Sentinels:
        self.primary.start()
        replica = self.replica = Server(
            self.binary, "--replicaof", "127.0.0.1", str(self.primary.port)
        ).start()
        wait_until(lambda: _link_up(replica), 30, "the replica to sync")
        conf = os.path.join(self.dir, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(
                f"port {self.sentinel_port}\nbind 127.0.0.1\ndir {self.dir}\n"
                f"sentinel monitor {self.NAME} 127.0.0.1 {self.primary.port} 1\n"
                f"sentinel down-after-milliseconds {self.NAME} 1000\n"
                f"sentinel failover-timeout {self.NAME} 10000\n"
            )
        self.proc = subprocess.Popen(
            [self.binary, conf, "--sentinel"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._sees_replica, 30, "the sentinel to find the replica")
        return self

    def _sees_replica(self) -> bool:
        with redis.Redis(port=self.sentinel_port, socket_timeout=1) as s:
            return len(s.sentinel_slaves(self.NAME)) >= 1

    def sentinel(self, **kwargs: Any) -> redis.sentinel.Sentinel:
        return redis.sentinel.Sentinel([("127.0.0.1", self.sentinel_port)], **kwargs)

    def async_sentinel(self, **kwargs: Any) -> redis.asyncio.sentinel.Sentinel:
        return redis.asyncio.sentinel.Sentinel([("127.0.0.1", self.sentinel_port)], **kwargs)

    def master_port(self) -> int:
        with redis.Redis(port=self.sentinel_port, socket_timeout=1) as s:
            return int(s.sentinel_get_master_addr_by_name(self.NAME)[1])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)
        for server in (self.primary, self.replica):
            if server is not None:
                server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
