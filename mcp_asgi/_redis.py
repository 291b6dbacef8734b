"""How a Redis URL connects: to one server, or to a Redis Cluster.

    redis://host:6379/0, rediss://..., unix:///path   one server; channels are plain
                                                      pub/sub (PUBLISH, SUBSCRIBE)
    redis+cluster://host:6379, rediss+cluster://...   a cluster, found from that node (or
    redis+cluster://h1:6379,h2:6379                   the first of those that answers);
                                                      keys go to the master of their hash
                                                      slot, channels are sharded (SPUBLISH,
                                                      SSUBSCRIBE on that master only)

Sharded pub/sub keeps a message on the master that owns the channel's slot instead of
broadcasting it over the cluster bus to every node. A subscription holds one connection to
that master, made from the same URL (its password and TLS options) with the master's
address; when the slot moves (a failover, a resharding) Redis ends the subscription, and
`Listener.get_message` raises `SlotMoved` so its owner subscribes again (a subscription
made on a master that no longer owns the slot refreshes the slot map and retries once).

Shared by the bus and the store (siblings that import neither each other nor the rest).
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from mcp_asgi._loggers import redacted_url

SERVER_SCHEMES: Final = ("redis://", "rediss://", "unix://")
CLUSTER_SCHEMES: Final = ("redis+cluster://", "rediss+cluster://")


class SlotMoved(ConnectionError):
    """Redis ended a subscription: its channel's slot moved to another master (or the
    subscription was ended otherwise); subscribe again."""


def is_cluster(url: str) -> bool:
    """Whether `url` names a Redis Cluster."""
    return url.startswith(CLUSTER_SCHEMES)


def check_url(url: str, what: str) -> None:
    """`ValueError`, naming `what` (the setting), unless `url` is a Redis URL this package
    connects to: a cluster one names nodes (host, optional port, comma-separated) and no
    database but 0 (a cluster has no other)."""
    if not url.startswith(SERVER_SCHEMES + CLUSTER_SCHEMES):
        raise ValueError(
            f"{what} must be a redis://, rediss://, unix://, redis+cluster:// or "
            f"rediss+cluster:// URL, got {redacted_url(url)!r}"
        )
    if is_cluster(url):
        try:
            _seeds(url)
        except ValueError:
            raise ValueError(
                f"{what}: a Redis Cluster URL names one or more of its nodes, host:port "
                f"separated by commas: {redacted_url(url)!r}"
            ) from None
        if urlsplit(url).path.strip("/") not in ("", "0"):
            raise ValueError(f"{what}: a Redis Cluster has database 0 only: {redacted_url(url)!r}")


def connect(url: str, **options: Any) -> Any:
    """A redis-py asyncio client for `url`: `Redis`, or `RedisCluster` for a cluster URL
    (`options`: the client's keyword arguments)."""
    if is_cluster(url):
        from redis.asyncio.cluster import ClusterNode, RedisCluster

        first, *others = _seeds(url)
        nodes = [ClusterNode(host, port) for host, port in others]
        return RedisCluster.from_url(_at(url, *first), startup_nodes=nodes or None, **options)
    import redis.asyncio as aioredis

    return aioredis.Redis.from_url(url, **options)


async def ping(client: Any) -> bool:
    """PING the server, or every master of a cluster (redis-py asks one node by default)."""
    from redis.asyncio.cluster import RedisCluster

    if isinstance(client, RedisCluster):
        return bool(await client.ping(target_nodes=RedisCluster.PRIMARIES))
    return bool(await client.ping())


def unreachable_errors() -> tuple[type[Exception], ...]:
    """What redis-py raises when Redis, or part of a cluster, cannot be reached (a
    cluster that lost a master answers CLUSTERDOWN; a slot may have no known owner)."""
    from redis import exceptions as errors

    return (
        errors.ConnectionError,
        errors.TimeoutError,
        errors.ClusterDownError,
        errors.SlotNotCoveredError,
        OSError,
    )


class Channels:
    """Publishing to and subscribing to channels through `client` (made by `connect(url,
    **options)`): plain pub/sub on one server, sharded pub/sub on a cluster."""

    def __init__(self, client: Any, url: str, **options: Any) -> None:
        self._client = client
        self._url = url
        self._options = options
        self._cluster = is_cluster(url)
        self._masters: dict[tuple[str, int], Any] = {}  # a cluster's: one client each

    async def publish(self, channel: str, data: bytes) -> None:
        if self._cluster:
            await self._client.spublish(channel, data)
        else:
            await self._client.publish(channel, data)

    def listener(self, channel: str) -> Listener:
        """A subscription to `channel`, made by `Listener.open`."""
        return Listener(self, channel)

    async def aclose(self) -> None:
        """Close the connections to the masters (not the client's)."""
        masters, self._masters = self._masters, {}
        for client in masters.values():
            await client.aclose()

    async def _pubsub(self, channel: str, *, refresh: bool = False) -> Any:
        if not self._cluster:
            return self._client.pubsub()
        await self._client.initialize()  # the slot map, once
        if refresh:  # it is out of date: a master answered MOVED
            await self._client.nodes_manager.initialize()
        node = self._client.get_node_from_key(channel)
        address = (node.host, int(node.port))
        if address not in self._masters:
            self._masters[address] = connect(_at(self._url, *address), **self._options)
        return self._masters[address].pubsub()


class Listener:
    """One subscription: `open` it, then `get_message` its messages (their type is
    `message` whether the channel is sharded or not), `ping` it, `aclose` it."""

    def __init__(self, channels: Channels, channel: str) -> None:
        self._channels = channels
        self._channel = channel
        self._pubsub: Any = None

    async def open(self, timeout: float) -> None:
        """Subscribe, and wait for Redis to confirm it (a paused Redis does not):
        `TimeoutError` when it has not within `timeout` seconds."""
        from redis.exceptions import MovedError

        try:
            await self._subscribe(timeout, refresh=False)
        except MovedError:  # the slot map is out of date: once more with a fresh one
            await self.aclose()
            await self._subscribe(timeout, refresh=True)

    async def _subscribe(self, timeout: float, *, refresh: bool) -> None:
        self._pubsub = pubsub = await self._channels._pubsub(self._channel, refresh=refresh)
        if self._channels._cluster:
            await pubsub.ssubscribe(self._channel)
        else:
            await pubsub.subscribe(self._channel)
        while True:
            message = await pubsub.get_message(timeout=timeout)
            if message is None:
                raise TimeoutError(f"no confirmation of the subscription within {timeout:g}s")
            if message.get("type") in ("subscribe", "ssubscribe"):
                return

    async def get_message(self, timeout: float) -> dict[str, Any] | None:
        """The next message (a published one, or the answer to `ping`), None if none came
        within `timeout` seconds; `SlotMoved` if Redis ended the subscription (the
        channel's slot moved to another master)."""
        message: dict[str, Any] | None = await self._pubsub.get_message(timeout=timeout)
        if message is None:
            return None
        kind = message.get("type")
        if kind in ("unsubscribe", "sunsubscribe"):
            raise SlotMoved(f"Redis ended the subscription to {self._channel}")
        if kind == "smessage":
            return {**message, "type": "message"}
        return message

    async def ping(self) -> None:
        await self._pubsub.ping()

    async def aclose(self) -> None:
        if self._pubsub is not None:
            await self._pubsub.aclose()


def _seeds(url: str) -> list[tuple[str, int]]:
    """The addresses a cluster URL names; `ValueError` if it names none, or a bad one."""
    hosts = urlsplit(url).netloc.rpartition("@")[2]
    seeds = []
    for host in hosts.split(","):
        parts = urlsplit("//" + host)
        if not parts.hostname:
            raise ValueError(host)
        seeds.append((parts.hostname, parts.port or 6379))  # .port: ValueError if not one
    return seeds


def _plain(url: str) -> str:
    """The cluster URL as redis-py spells it (redis://, rediss://)."""
    return url.replace("+cluster://", "://", 1)


def _at(url: str, host: str, port: int) -> str:
    """`url` (a cluster's), as the plain URL of the node at host:port."""
    parts = urlsplit(_plain(url))
    credentials = parts.netloc.rpartition("@")[0]
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    netloc = f"{credentials}@{address}" if credentials else address
    return urlunsplit((parts.scheme, netloc, "/0", parts.query, ""))
