"""channels_redis's channel layer on a connection pool that waits instead of failing.

redis-py's asyncio ``ConnectionPool`` (what channels_redis 4.3 builds from a host's
``address``) holds at most ``max_connections`` connections — 100 unless told — and raises
``MaxConnectionsError("Too many connections")`` when one more is wanted. Under load (hundreds
of chats per process, each publishing its turn's frames to its user's group) ``group_send``
and ``group_discard`` then fail outright: frames are lost and a consumer dies leaving its dead
channel in its groups. :class:`RedisChannelLayer` builds a ``BlockingConnectionPool`` instead:
a command waits up to the host's ``timeout`` seconds (default 20) for a free connection.

Configure it as channels_redis's layer, with two more host options::

    CHANNEL_LAYERS = {"default": {
        "BACKEND": "advisors_app.channels.redis_layer.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": REDIS_URL, "max_connections": 200, "timeout": 20}]},
    }}

The turn buffer (:mod:`advisors_app.turn.buffer`) uses the same options for its own pool.

A group message naming its sender's channel in ``"origin"`` (a turn's frames, published by
the socket that runs the turn and already sent them: :class:`~advisors_app.turn.buffer.
TurnPublisher`) is not delivered to that channel: channels_redis puts one copy per server
process in that process's inbox, which holds ``capacity`` messages, and echoing every batch
back to the process running the turn filled it ("over capacity": messages dropped).
"""

from __future__ import annotations

from typing import Any

from channels_redis.core import RedisChannelLayer as _ChannelsRedisLayer
from redis.asyncio import BlockingConnectionPool

__all__ = ["RedisChannelLayer"]


class RedisChannelLayer(_ChannelsRedisLayer):  # type: ignore[misc]
    """channels_redis's ``RedisChannelLayer`` with a blocking connection pool per host
    (``max_connections``, and ``timeout``: seconds to wait for a free connection)."""

    def create_pool(self, index: int) -> Any:
        host = dict(self.hosts[index])
        address = host.pop("address", None)
        if not isinstance(address, str):  # sentinels, or host and port: channels_redis's pools
            return super().create_pool(index)
        return BlockingConnectionPool.from_url(address, **host)

    def _map_channel_keys_to_connection(
        self, channel_names: list[str], message: dict[str, Any]
    ) -> Any:
        # channels_redis's group_send maps the group's channels to Redis keys here: the one
        # place to leave the sender out.
        origin = message.get("origin")
        if origin:
            channel_names = [name for name in channel_names if name != origin]
        return super()._map_channel_keys_to_connection(channel_names, message)
