"""How many chat websockets each user holds open, counted across every server process.

``ADVISORS["MAX_SOCKETS_PER_USER"]`` (default 20; 0: no limit) bounds them: each socket takes a
*slot* when it connects (:meth:`SocketSlots.acquire`) and gives it back when it goes
(:meth:`SocketSlots.release`); a socket that finds every slot taken is refused
(:class:`advisors_app.channels.consumers.ChatConsumer` sends an ``error`` frame with code
``too_many_sockets`` and closes it with 4429). Without a bound, a few users' scripts can hold
thousands of sockets, each with its group membership, its thread and its buffers.

Where the slots live follows the channel layer, as the turn buffer does
(:mod:`advisors_app.turn.buffer`): with channels_redis, a Redis sorted set per user on the same
server under the same key prefix, so every process counts the same sockets; with any other
layer, this process's memory (one process serves the site).

A process that dies never gives its slots back, so in Redis a slot is a *lease*: its score is
the time (Redis's clock, so the processes need not agree on theirs) it lapses,
:data:`LEASE_SECONDS` after it was taken or last renewed; the consumer renews it every
:data:`RENEW_SECONDS` while the socket is open, and lapsed slots are dropped before each count.
The check and the taking are one script: two sockets racing for the last slot cannot both win.
"""

from __future__ import annotations

import asyncio
import weakref
from abc import ABC, abstractmethod
from typing import Any

from channels.layers import get_channel_layer

from advisors_app.turn.buffer import redis_location

__all__ = [
    "LEASE_SECONDS",
    "RENEW_SECONDS",
    "InMemorySocketSlots",
    "RedisSocketSlots",
    "SocketSlots",
    "socket_slots",
]

#: A slot not renewed for this long belongs to a process that died: it no longer counts.
LEASE_SECONDS = 90
#: How often an open socket renews its slot (well within the lease: a busy loop may be late).
RENEW_SECONDS = 30.0


class SocketSlots(ABC):
    """The open chat sockets of each user (by ``user.pk``), each under an id of its own."""

    #: Whether a slot lapses unless renewed (:meth:`renew`).
    leased = False

    @abstractmethod
    async def acquire(self, owner: int, socket: str, limit: int) -> bool:
        """Take a slot for ``socket``; ``False`` (and nothing taken) when ``owner`` holds
        ``limit`` already. ``limit`` 0: take it whatever the count (a renewal)."""

    async def renew(self, owner: int, socket: str) -> None:
        """Keep ``socket``'s slot from lapsing: taken again whatever the count."""
        await self.acquire(owner, socket, 0)

    @abstractmethod
    async def release(self, owner: int, socket: str) -> None:
        """Give ``socket``'s slot back (a no-op when it holds none)."""


class InMemorySocketSlots(SocketSlots):
    """The slots in this process's memory (a channel layer other than channels_redis)."""

    def __init__(self) -> None:
        self._open: dict[int, set[str]] = {}

    async def acquire(self, owner: int, socket: str, limit: int) -> bool:
        held = self._open.setdefault(owner, set())
        if limit and socket not in held and len(held) >= limit:
            return False
        held.add(socket)
        return True

    async def release(self, owner: int, socket: str) -> None:
        held = self._open.get(owner)
        if held is not None:
            held.discard(socket)
            if not held:
                del self._open[owner]


#: KEYS: the user's sorted set. ARGV: the socket's id, the limit (0: none), the lease in
#: seconds. Drops lapsed slots, then takes (or renews) the socket's; 1 if it holds one.
_ACQUIRE_SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local limit = tonumber(ARGV[2])
if limit > 0 and not redis.call('ZSCORE', KEYS[1], ARGV[1])
    and redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
"""


class RedisSocketSlots(SocketSlots):
    """The slots as one Redis sorted set per user (socket id → the time its lease lapses),
    shared by every process on the same Redis."""

    leased = True

    def __init__(self, url: str, prefix: str, lease: int = LEASE_SECONDS, **options: Any) -> None:
        self.url, self.prefix, self.lease = url, prefix, lease
        self._options = options
        self._clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def _client(self) -> tuple[Any, Any]:
        import redis.asyncio as redis  # only with channels_redis installed and configured

        loop = asyncio.get_running_loop()  # redis.asyncio connections belong to one loop
        pair = self._clients.get(loop)
        if pair is None:
            pool = redis.BlockingConnectionPool.from_url(self.url, **self._options)
            client = redis.Redis(connection_pool=pool)
            pair = self._clients[loop] = (client, client.register_script(_ACQUIRE_SCRIPT))
        return pair

    def _key(self, owner: int) -> str:
        return f"{self.prefix}:sockets:{owner}"

    async def acquire(self, owner: int, socket: str, limit: int) -> bool:
        _, script = self._client()
        return bool(await script(keys=[self._key(owner)], args=[socket, limit, self.lease]))

    async def release(self, owner: int, socket: str) -> None:
        client, _ = self._client()
        await client.zrem(self._key(owner), socket)


_slots: dict[tuple[Any, ...], SocketSlots] = {}


def socket_slots() -> SocketSlots:
    """The slots for the configured channel layer (Redis or this process's memory)."""
    location = redis_location(get_channel_layer())
    key: tuple[Any, ...] = (location[0], location[1]) if location else ()
    slots = _slots.get(key)
    if slots is None:
        if location is None:
            slots = InMemorySocketSlots()
        else:
            slots = RedisSocketSlots(location[0], location[1], **location[2])
        _slots[key] = slots
    return slots
