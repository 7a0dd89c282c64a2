"""The Redis store behind Redis Sentinel:
``redis+sentinel://[user:password@]host:port[,host:port...]/service_name[/db]``.

The hosts are the sentinels; they name the service's master, which holds the store
exactly as a single Redis does (the same layout and scripts, :mod:`.redis`).  Every
new connection asks a sentinel where the master is, so after a failover the pool's
connections (and the pub/sub listener's) find the new master by themselves: a
connection to the old one fails or is told it is a replica now (READONLY), is
dropped, and the call answers "task store unavailable" until the sentinels have
promoted a replica, which the engine's grace (A2A_STORE_GRACE) rides out.

Query options (beside the Redis store's ``prefix``, ``wait_replicas`` and
``wait_timeout_ms``): ``sentinel_password`` and ``sentinel_username`` log in to the
sentinels (the URL's own user and password log in to the master); redis-py's
``ssl_*`` options (``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``,
``ssl_cert_reqs``...) apply to both with ``rediss+sentinel://``.
"""
from __future__ import annotations

import inspect
from typing import Any, Dict, List, Tuple
from urllib.parse import unquote, urlencode, urlsplit

from .redis import RedisStore


def sentinel_options(url: str, query: Dict[str, List[str]]) -> Tuple[List[Tuple[str, int]], str,
                                                                     Dict[str, Any],
                                                                     Dict[str, Any]]:
    """A ``redis(s)+sentinel://`` URL read: the sentinels' (host, port), the service
    name, the master's connection options and the sentinels'.

    :raises ValueError: no sentinel, a sentinel without a port, no service name."""
    from redis import connection

    parse_url: Any = connection.parse_url  # (redis-py does not type it)
    parts = urlsplit(url)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    sentinels: List[Tuple[str, int]] = []
    for node in hosts.split(","):
        host, sep, port = node.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"each sentinel is host:port, not {node!r}")
        sentinels.append((unquote(host.strip("[]")), int(port)))
    path = [unquote(piece) for piece in parts.path.strip("/").split("/") if piece]
    if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ValueError("the path is /service_name or /service_name/db")
    service, database = path[0], (path[1] if len(path) == 2 else "0")
    query = dict(query)
    sentinel_auth = {name: query.pop(f"sentinel_{name}")[0] for name in ("password", "username")
                     if f"sentinel_{name}" in query}
    tls = parts.scheme.startswith("rediss")
    options = urlencode(query, doseq=True)
    master = parse_url(f"{'rediss' if tls else 'redis'}://{userinfo + '@' if userinfo else ''}"
                       f"{sentinels[0][0]}:{sentinels[0][1]}/{database}"
                       f"{'?' + options if options else ''}")
    for name in ("host", "port"):
        master.pop(name, None)
    if master.pop("connection_class", None) is connection.SSLConnection or tls:
        master["ssl"] = True
    own = {name: value for name, value in master.items() if name.startswith("ssl")}
    own.update(sentinel_auth)
    return sentinels, service, master, own


class RedisSentinelStore(RedisStore):
    """The Redis store on the master a set of sentinels names (the module docstring)."""

    def _connect(self, url: str, query: Dict[str, List[str]], size: int) -> Any:
        from redis.connection import BlockingConnectionPool
        from redis import sentinel
        from redis.sentinel import SentinelConnectionPool

        Sentinel: Any = sentinel.Sentinel  # (redis-py does not type it)

        takes_inuse = "inuse_connections" in inspect.signature(
            BlockingConnectionPool.disconnect).parameters

        class BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
            """The master's connections, a caller waiting for one while all are busy
            (as the single Redis's pool: redis-py's Sentinel pool fails at once)."""

            def disconnect(self, inuse_connections: bool = True) -> None:
                # Called with inuse_connections=False when the master moved; redis-py
                # before 5.1's blocking pool takes no argument (and drops them all).
                if takes_inuse:
                    super().disconnect(inuse_connections=inuse_connections)
                else:
                    super().disconnect()

        sentinels, service, master, own = sentinel_options(url, query)
        timeout = self.limits.timeout
        sockets = {"socket_connect_timeout": timeout, "socket_timeout": timeout}
        manager = Sentinel(sentinels, sentinel_kwargs={**sockets, **own}, **sockets)
        return manager.master_for(service, connection_pool_class=BlockingSentinelPool,
                                  max_connections=size, timeout=timeout,
                                  health_check_interval=30, **master)
