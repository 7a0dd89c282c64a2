"""Redis topologies of the test's own: a Redis Cluster (3 masters, 3 replicas) and a
Sentinel setup (a master, two replicas, 3 sentinels), each on reserved loopback ports
(tests/support/ports.py) in a temporary directory, with the faults the store must
ride out: a manual cluster failover, a slot moved to another master, a killed master
that the sentinels replace.

Every process is killed and every directory removed on exit, failure included; every
wait is bounded (:data:`WAIT`).  ``redis-server`` and ``redis-cli`` 7 are needed
(``cluster-port`` names each node's bus port, so it is reserved too).
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from tests.support.ports import Reservation, check_listener, reserve_port

#: The longest a topology's start or fault may take (seconds) before the test fails.
WAIT = 60.0


def _require(reason: str) -> None:
    from tests.conftest import require

    require(reason)


def _until(check: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception:  # not up yet  # noqa: BLE001
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:g}s")
        time.sleep(0.05)


def _client(port: int) -> Any:
    import redis

    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=5, socket_connect_timeout=5)


def _info(port: int, section: str) -> Dict[str, str]:
    text = _client(port).execute_command("INFO", section)
    if isinstance(text, dict):
        return {k: str(v) for k, v in text.items()}
    return dict(line.split(":", 1) for line in text.decode().splitlines() if ":" in line)


class RedisNode:
    """One redis-server (any role) on a reserved port, in its own directory."""

    def __init__(self, root: Path, args: List[str], *, bus: bool = False,
                 config: Optional[str] = None) -> None:
        self.binary = shutil.which("redis-server") or ""
        self._reservations: List[Reservation] = [reserve_port()]
        self.port = self._reservations[0].port
        if bus:
            self._reservations.append(reserve_port())
        self.bus_port = self._reservations[-1].port if bus else 0
        self.directory = root / str(self.port)
        self.directory.mkdir()
        self.args = args
        self.config = config
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        command = [self.binary]
        if self.config is not None:  # a sentinel: its config file is rewritten by it
            path = self.directory / "sentinel.conf"
            path.write_text(self.config.format(port=self.port))
            command += [str(path), "--sentinel"]
        command += ["--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                    str(self.directory), "--logfile", str(self.directory / "log"),
                    "--save", "", "--appendonly", "no", *self.args]
        if self.bus_port:
            command += ["--cluster-port", str(self.bus_port)]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        _until(lambda: self.proc is not None and self.proc.poll() is None
               and check_listener(self.port, [self.proc.pid], "redis-server")
               and bool(_client(self.port).ping()), f"redis-server on {self.port}")

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        for reservation in self._reservations:
            reservation.release()

    def log(self) -> str:
        try:
            return (self.directory / "log").read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"


class _Topology:
    def __init__(self, kind: str) -> None:
        if not shutil.which("redis-server") or not shutil.which("redis-cli"):
            _require("redis-server and redis-cli are not installed: the Redis Cluster and "
                     "Sentinel cases need their own")
        self.root = Path(tempfile.mkdtemp(prefix=f"a2a-{kind}-"))
        self.nodes: List[RedisNode] = []

    def close(self) -> None:
        for node in self.nodes:
            node.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RedisClusterTopology(_Topology):
    """Six cluster nodes made one cluster by ``redis-cli --cluster create``: three
    masters (the slots in thirds), each with a replica."""

    def __init__(self) -> None:
        super().__init__("cluster")
        try:
            for _ in range(6):
                node = RedisNode(self.root, ["--cluster-enabled", "yes", "--cluster-config-file",
                                             "nodes.conf", "--cluster-node-timeout", "2000"],
                                 bus=True)
                self.nodes.append(node)
                node.start()
            subprocess.run(["redis-cli", "--cluster", "create",
                            *(f"127.0.0.1:{n.port}" for n in self.nodes),
                            "--cluster-replicas", "1", "--cluster-yes"],
                           check=True, capture_output=True, timeout=WAIT)
            _until(self._whole, "the cluster agreeing on every slot")
        except BaseException:
            self.close()
            raise

    def _whole(self) -> bool:
        for node in self.nodes:
            info = self._cluster_info(node.port)
            if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != "16384":
                return False
        return len(self.masters()) == 3

    @staticmethod
    def _cluster_info(port: int) -> Dict[str, str]:
        text = _client(port).execute_command("CLUSTER", "INFO")
        text = text.decode() if isinstance(text, bytes) else str(text)
        return dict(line.strip().split(":", 1) for line in text.splitlines() if ":" in line)

    @property
    def url(self) -> str:
        """The store URL: two nodes to start from (any reachable one is enough)."""
        return (f"redis+cluster://127.0.0.1:{self.nodes[0].port},"
                f"127.0.0.1:{self.nodes[1].port}/0")

    def _node_table(self, port: int) -> List[List[str]]:
        text = _client(port).execute_command("CLUSTER", "NODES")
        text = text.decode() if isinstance(text, bytes) else str(text)
        return [line.split() for line in text.splitlines() if line.strip()]

    def masters(self) -> Dict[int, str]:
        """port -> node id of every master (as the first live node sees it)."""
        for node in self.nodes:
            try:
                table = self._node_table(node.port)
            except Exception:  # noqa: BLE001  (a killed node)
                continue
            return {int(row[1].split("@")[0].rsplit(":", 1)[1]): row[0] for row in table
                    if "master" in row[2] and "fail" not in row[2]}
        raise RuntimeError("no cluster node answers")

    def slot_of(self, key: str) -> int:
        return int(_client(self.nodes[0].port).execute_command("CLUSTER", "KEYSLOT", key))

    def master_of(self, slot: int) -> int:
        """The port of the master serving ``slot``."""
        return self._master_of_at(self.nodes[0].port, slot)

    def _master_of_at(self, at: int, slot: int) -> int:
        for row in self._node_table(at):
            if "master" not in row[2]:
                continue
            for spec in row[8:]:
                if spec.startswith("["):
                    continue
                low, _, high = spec.partition("-")
                if int(low) <= slot <= int(high or low):
                    return int(row[1].split("@")[0].rsplit(":", 1)[1])
        raise RuntimeError(f"no master serves slot {slot}")

    def replica_of(self, master_port: int) -> int:
        master_id = self.masters()[master_port]
        for row in self._node_table(self.nodes[0].port):
            if row[3] == master_id and "slave" in row[2]:
                return int(row[1].split("@")[0].rsplit(":", 1)[1])
        raise RuntimeError(f"the master on {master_port} has no replica")

    def _roles_at(self, at: int) -> Dict[int, str]:
        """port -> "master" or "slave", as the node on ``at`` sees them."""
        return {int(row[1].split("@")[0].rsplit(":", 1)[1]):
                "master" if "master" in row[2] else "slave" for row in self._node_table(at)}

    def failover(self, master_port: int) -> int:
        """``CLUSTER FAILOVER`` on the master's replica (a manual failover, as an
        operator's maintenance does); the replica's port once it is the master."""
        replica = self.replica_of(master_port)
        # A manual failover waits for the replica to catch up: it must be linked (a
        # master demoted a moment ago is still syncing).
        _until(lambda: _info(replica, "replication").get("master_link_status") == "up",
               f"the replica on {replica} in sync")
        _client(replica).execute_command("CLUSTER", "FAILOVER")
        _until(lambda: all(self._roles_at(n.port).get(replica) == "master"
                           and self._roles_at(n.port).get(master_port) == "slave"
                           for n in self.nodes) and self._whole(),
               f"{replica} taking over from {master_port}")
        return replica

    def move_slot(self, slot: int, target_port: int, pause: float = 0.3) -> None:
        """Migrate one slot to the master on ``target_port`` as ``redis-cli --cluster
        reshard`` does it (IMPORTING, MIGRATING, MIGRATE the keys, SETSLOT NODE), with
        ``pause`` seconds in the middle: the window where clients are sent ASK."""
        source_port = self.master_of(slot)
        if source_port == target_port:
            return
        ids = self.masters()
        source, target = _client(source_port), _client(target_port)
        target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source_port])
        source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target_port])
        time.sleep(pause)
        while True:
            keys = source.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
            if not keys:
                break
            source.execute_command("MIGRATE", "127.0.0.1", target_port, "", 0, 5000,
                                   "KEYS", *keys)
        # The target first (it stops answering ASK), then the source; the others learn
        # it by gossip (told too, where they already know the new master).
        for port in [target_port, source_port, *(p for p in ids if p not in (source_port,
                                                                            target_port))]:
            try:
                _client(port).execute_command("CLUSTER", "SETSLOT", slot, "NODE",
                                              ids[target_port])
            except Exception:  # noqa: BLE001  (not the source or target: gossip will do)
                if port in (source_port, target_port):
                    raise
        _until(lambda: all(self._master_of_at(n.port, slot) == target_port
                           for n in self.nodes), f"every node placing slot {slot}")


SENTINEL_CONFIG = """port {port}
sentinel monitor mymaster 127.0.0.1 %d 2
sentinel down-after-milliseconds mymaster 1000
sentinel failover-timeout mymaster 10000
sentinel parallel-syncs mymaster 1
"""


class RedisSentinelTopology(_Topology):
    """A master, two replicas and three sentinels watching them as ``mymaster`` (a
    quorum of two, a master down after 1 s).  Two replicas: after a failover the new
    master still has one, so a store with ``wait_replicas=1`` goes on writing."""

    service = "mymaster"

    def __init__(self) -> None:
        super().__init__("sentinel")
        try:
            self.master = RedisNode(self.root, [])
            self.nodes.append(self.master)
            self.master.start()
            self.replicas = []
            for _ in range(2):
                replica = RedisNode(self.root, ["--replicaof", "127.0.0.1",
                                                str(self.master.port)])
                self.nodes.append(replica)
                self.replicas.append(replica)
                replica.start()
            self.replica = self.replicas[0]
            _until(lambda: all(_info(r.port, "replication").get("master_link_status") == "up"
                               for r in self.replicas), "the replicas in sync")
            self.sentinels = []
            for _ in range(3):
                sentinel = RedisNode(self.root, [], config=SENTINEL_CONFIG % self.master.port)
                self.nodes.append(sentinel)
                self.sentinels.append(sentinel)
                sentinel.start()
            _until(lambda: all(self._sees_replica(s.port) for s in self.sentinels),
                   "every sentinel knowing the master and its replica")
        except BaseException:
            self.close()
            raise

    def _sees_replica(self, port: int) -> bool:
        replicas = _client(port).execute_command("SENTINEL", "REPLICAS", self.service)
        others = _client(port).execute_command("SENTINEL", "SENTINELS", self.service)
        return len(replicas) == 2 and len(others) == 2

    @property
    def url(self) -> str:
        return ("redis+sentinel://" + ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
                + f"/{self.service}/0")

    def master_port(self) -> int:
        host, port = _client(self.sentinels[0].port).execute_command(
            "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
        return int(port)

    def kill_master(self) -> Tuple[int, int]:
        """SIGKILL the master; (old port, new port) once every sentinel names the
        promoted replica."""
        old = self.master_port()
        victim = next(n for n in self.nodes if n.port == old)
        victim.kill()
        _until(lambda: all(int(_client(s.port).execute_command(
            "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)[1]) != old
            for s in self.sentinels), "the sentinels promoting the replica")
        return old, self.master_port()
