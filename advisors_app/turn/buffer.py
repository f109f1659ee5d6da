"""Resumable turns: event ids, a short per-conversation buffer and its publisher (issue 23).

Every event of a streamed turn gets an id, ``"<trace_id>-<n>"`` with ``n`` counting from 1
in the order the events were sent, so a client can say "after event X" (:func:`events_after`):
``"event_id"`` in the websocket frame (``"id"`` is taken: a tool call's id), the ``id:`` line
of a Server-Sent Event.
The events are published, in small batches, to two places:

* a **buffer** keeping the last turn of each conversation of each owner for
  ``ADVISORS["TURN_BUFFER_SECONDS"]`` (default 300) after its latest event — a Redis stream
  with a TTL when the channel layer is channels_redis (the same server and key prefix), a dict
  in this process's memory otherwise (:func:`turn_buffer`); a client that lost its connection
  reads what it missed from it (websocket ``resume``, SSE ``Last-Event-ID``);
* the owner's channel-layer **group** (:func:`user_group`), as one ``turn.events`` message per
  batch, so every chat socket of that user — another tab, another server process — sees the
  same stream live (:class:`advisors_app.channels.consumers.ChatConsumer`).

A batch is written to the buffer before it is sent to the group, so a socket that joined the
group and then read the buffer misses nothing; frames it sees twice carry the same id and are
dropped (:class:`SeenIds`). Publishing runs in a task of its own (:class:`TurnPublisher`):
the socket that runs the turn sends each frame at once and never waits on Redis; the
publisher catches up in one round trip per batch, shared with the other turns of the process
publishing at the same time (one script call writes them all).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from advisors_app.conf import app_settings

__all__ = [
    "InMemoryTurnBuffer",
    "RedisTurnBuffer",
    "SeenIds",
    "TurnBuffer",
    "TurnPublisher",
    "events_after",
    "parse_event_id",
    "redis_location",
    "turn_buffer",
    "user_group",
]

logger = logging.getLogger(__name__)

_FINAL_TYPES = ("done", "error")


def user_group(user: Any) -> str:
    """The channel-layer group of ``user``'s chat sockets (all processes)."""
    return f"advisors.chat.user.{user.pk}"


def parse_event_id(event_id: Any) -> tuple[str, int] | None:
    """``(trace_id, n)`` of an id ``"<trace_id>-<n>"``; ``None`` for anything else."""
    if not isinstance(event_id, str):
        return None
    trace_id, _, n = event_id.rpartition("-")
    if not trace_id or not n.isdigit():
        return None
    return trace_id, int(n)


def events_after(frames: list[dict[str, Any]], last_event_id: str | None) -> list[dict[str, Any]]:
    """The frames of ``frames`` (one turn, in order) after ``last_event_id``: all of them when
    the id is ``None``, malformed or of another (older) turn."""
    last = parse_event_id(last_event_id)
    if last is None or not frames:
        return frames
    current = parse_event_id(frames[0].get("event_id"))
    if current is None or current[0] != last[0]:
        return frames
    return [f for f in frames if (parse_event_id(f.get("event_id")) or ("", 0))[1] > last[1]]


class SeenIds:
    """What one socket has delivered per conversation, so no frame reaches it twice."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[str, int]] = {}

    def first_time(
        self, conversation_id: str, frame: dict[str, Any], *, contiguous: bool = False
    ) -> bool:
        """Note ``frame`` as delivered; ``False`` when it (or a later one) already was — or,
        with ``contiguous``, when it does not directly follow the last one delivered (a socket
        that joined mid-turn gets the turn by ``resume``, in order, not from the middle)."""
        parsed = parse_event_id(frame.get("event_id"))
        if parsed is None:
            return True
        if not self._new(conversation_id, parsed, contiguous):
            return False
        self._last[conversation_id] = parsed
        return True

    def seen_up_to(self, conversation_id: str, event_id: str | None) -> None:
        """Note every event of ``event_id``'s turn up to it as delivered (a ``resume``: the
        client has them); no-op for a malformed id or one not after what was delivered."""
        parsed = parse_event_id(event_id)
        if parsed is not None and self._new(conversation_id, parsed, False):
            self._last[conversation_id] = parsed

    def _new(self, conversation_id: str, parsed: tuple[str, int], contiguous: bool) -> bool:
        last = self._last.get(conversation_id)
        last_n = last[1] if last is not None and last[0] == parsed[0] else 0
        return not (last_n >= parsed[1] or (contiguous and parsed[1] != last_n + 1))


def _ended(frames: list[dict[str, Any]], last_event_id: str | None) -> bool:
    """Whether ``frames`` (a whole turn) ended with the event ``last_event_id``: a client
    that resumes with its final frame's id has nothing more coming."""
    return bool(frames) and (
        frames[-1].get("type") in _FINAL_TYPES and frames[-1].get("event_id") == last_event_id
    )


class TurnBuffer(ABC):
    """The frames of the last turn of each (owner, conversation), for a short while."""

    @abstractmethod
    async def append(self, owner: int, conversation_id: str, frames: list[dict[str, Any]]) -> None:
        """Add ``frames`` (in order); a frame numbered 1 starts a new turn (the old one goes)."""

    @abstractmethod
    async def read(self, owner: int, conversation_id: str) -> list[dict[str, Any]] | None:
        """Every frame of the conversation's last turn; ``None`` when none is kept."""

    async def follow(
        self, owner: int, conversation_id: str, last_event_id: str | None, *, poll: float = 0.05
    ) -> AsyncIterator[dict[str, Any]]:
        """The frames after ``last_event_id``, then the rest as they come, up to the turn's
        ``done`` or ``error`` (or until the buffer forgets the turn). Polls every ``poll``
        seconds; used by transports without a channel-layer consumer (SSE)."""
        frames = await self.read(owner, conversation_id)
        sent: str | None = last_event_id
        while frames is not None:
            for frame in events_after(frames, sent):
                sent = frame.get("event_id")
                yield frame
                if frame.get("type") in _FINAL_TYPES:
                    return
            if _ended(frames, sent):
                return  # the client had everything, the final frame included
            await asyncio.sleep(poll)
            frames = await self.read(owner, conversation_id)


@dataclass
class _Kept:
    frames: list[dict[str, Any]] = field(default_factory=list)
    expires: float = 0.0


class InMemoryTurnBuffer(TurnBuffer):
    """The buffer in this process's memory (the in-memory channel layer: one process)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._kept: dict[tuple[int, str], _Kept] = {}

    async def append(self, owner: int, conversation_id: str, frames: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        key = (owner, conversation_id)
        kept = self._kept.get(key)
        if kept is None or (frames and frames[0].get("event_id", "").endswith("-1")):
            self._forget_expired(now)
            kept = self._kept[key] = _Kept()
        kept.frames.extend(frames)
        kept.expires = now + self.ttl

    async def read(self, owner: int, conversation_id: str) -> list[dict[str, Any]] | None:
        kept = self._kept.get((owner, conversation_id))
        if kept is None or kept.expires < time.monotonic():
            return None
        return list(kept.frames)

    def _forget_expired(self, now: float) -> None:
        for key in [k for k, v in self._kept.items() if v.expires < now]:
            del self._kept[key]


#: Appends many turns' frames in one command. KEYS: per append, the turn's stream, then (if
#: listed) the group's sorted set. ARGV: the TTL in seconds, then per append: 1 to drop the
#: old turn first, the group's "joined since" score, 1 to list the group, the number of
#: frames, the frames (JSON). Returns per append the group's members (or none).
_APPEND_SCRIPT = """
local a, k, listed = 2, 1, {}
while a <= #ARGV do
  local drop, since, grouped, n = ARGV[a], ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3])
  local key = KEYS[k]
  a, k = a + 4, k + 1
  if drop == '1' then redis.call('DEL', key) end
  for i = a, a + n - 1 do redis.call('XADD', key, '*', 'f', ARGV[i]) end
  a = a + n
  redis.call('EXPIRE', key, ARGV[1])
  if grouped == '1' then
    listed[#listed + 1] = redis.call('ZRANGEBYSCORE', KEYS[k], since, '+inf')
    k = k + 1
  else
    listed[#listed + 1] = {}
  end
end
return listed
"""


@dataclass
class _Append:
    keys: list[Any]
    args: list[Any]
    answer: asyncio.Future[list[bytes]]


class _AppendBatches:
    """Appends of one event loop, written together: every turn's batch that arrives while a
    write is on its way goes in the next one (a group commit). With hundreds of turns
    streaming on one process, one script call per frame cost most of its event loop; idle,
    an append waits for nothing but its own round trip."""

    def __init__(self, buffer: RedisTurnBuffer) -> None:
        self._buffer = buffer
        self._waiting: list[_Append] = []
        self._writer: asyncio.Task[None] | None = None

    async def append(self, keys: list[Any], args: list[Any]) -> list[bytes]:
        item = _Append(keys, args, asyncio.get_running_loop().create_future())
        self._waiting.append(item)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())
        return await item.answer

    async def _write(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            keys = [key for item in batch for key in item.keys]
            args = [max(int(self._buffer.ttl), 1), *(arg for item in batch for arg in item.args)]
            try:
                listed = await self._buffer.script()(keys=keys, args=args)
            except Exception as exc:
                for item in batch:
                    if not item.answer.done():
                        item.answer.set_exception(exc)
                continue
            except asyncio.CancelledError:  # the loop is closing: no caller waits forever
                for item in (*batch, *self._waiting):
                    item.answer.cancel()
                raise
            for item, members in zip(batch, listed, strict=True):
                if not item.answer.done():  # its caller may have been cancelled
                    item.answer.set_result(list(members))


class RedisTurnBuffer(TurnBuffer):
    """The buffer as one Redis stream per (owner, conversation) with a TTL, shared by every
    process on the same Redis (one command for every turn's batches arriving together)."""

    def __init__(self, url: str, prefix: str, ttl: float, **options: Any) -> None:
        self.url, self.prefix, self.ttl = url, prefix, ttl
        self._options = options
        self._clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._scripts: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._batches: weakref.WeakKeyDictionary[Any, _AppendBatches] = weakref.WeakKeyDictionary()

    def _client(self) -> Any:
        import redis.asyncio as redis  # only with channels_redis installed and configured

        loop = asyncio.get_running_loop()  # redis.asyncio connections belong to one loop
        client = self._clients.get(loop)
        if client is None:
            # A pool that waits for a free connection instead of raising "Too many
            # connections" (advisors_app.channels.redis_layer), sized as the channel layer's.
            pool = redis.BlockingConnectionPool.from_url(self.url, **self._options)
            client = self._clients[loop] = redis.Redis(connection_pool=pool)
        return client

    def _key(self, owner: int, conversation_id: str) -> str:
        return f"{self.prefix}:turns:{owner}:{conversation_id}"

    async def append(self, owner: int, conversation_id: str, frames: list[dict[str, Any]]) -> None:
        await self._append(owner, conversation_id, frames)

    async def append_and_list(
        self,
        owner: int,
        conversation_id: str,
        frames: list[dict[str, Any]],
        group_key: bytes,
        joined_since: float,
    ) -> list[str]:
        """:meth:`append`, and in the same command the channels of a channels_redis group
        (its sorted set ``group_key`` on this server) that joined after ``joined_since``."""
        members = await self._append(owner, conversation_id, frames, group_key, joined_since)
        return [member.decode() for member in members]

    async def _append(
        self,
        owner: int,
        conversation_id: str,
        frames: list[dict[str, Any]],
        group_key: bytes | None = None,
        joined_since: float = 0.0,
    ) -> list[bytes]:
        """Add ``frames`` (a frame numbered 1 first drops the old turn), renew the TTL and, with
        ``group_key``, list the group's members: atomically, in one script call shared with
        the other turns appending meanwhile (:class:`_AppendBatches`)."""
        loop = asyncio.get_running_loop()
        batches = self._batches.get(loop)
        if batches is None:
            batches = self._batches[loop] = _AppendBatches(self)
        first = bool(frames) and str(frames[0].get("event_id", "")).endswith("-1")
        keys: list[Any] = [self._key(owner, conversation_id)]
        if group_key is not None:
            keys.append(group_key)
        dumped = [json.dumps(frame, separators=(",", ":")) for frame in frames]
        args = [int(first), joined_since, int(group_key is not None), len(dumped), *dumped]
        return await batches.append(keys, args)

    def script(self) -> Any:
        """The append script on this event loop's client (loaded on first use)."""
        client = self._client()
        script = self._scripts.get(client)
        if script is None:
            script = self._scripts[client] = client.register_script(_APPEND_SCRIPT)
        return script

    async def read(self, owner: int, conversation_id: str) -> list[dict[str, Any]] | None:
        entries = await self._client().xrange(self._key(owner, conversation_id))
        if not entries:
            return None
        return [json.loads(fields[b"f"]) for _, fields in entries]

    async def follow(
        self, owner: int, conversation_id: str, last_event_id: str | None, *, poll: float = 1.0
    ) -> AsyncIterator[dict[str, Any]]:
        """As :meth:`TurnBuffer.follow`, reading only new entries (``XREAD BLOCK`` of ``poll``
        seconds) instead of the whole turn again."""
        key = self._key(owner, conversation_id)
        client = self._client()
        entries = await client.xrange(key)
        if not entries:
            return
        cursor = entries[-1][0]
        frames = [json.loads(fields[b"f"]) for _, fields in entries]
        for frame in events_after(frames, last_event_id):
            yield frame
            if frame.get("type") in _FINAL_TYPES:
                return
        if _ended(frames, last_event_id):
            return  # the client had everything, the final frame included
        while True:
            answer = await client.xread({key: cursor}, block=max(int(poll * 1000), 1))
            if not answer:
                if not await client.exists(key):
                    return  # forgotten (TTL) before its end
                continue
            for entry_id, fields in answer[0][1]:
                cursor = entry_id
                frame = json.loads(fields[b"f"])
                yield frame
                if frame.get("type") in _FINAL_TYPES:
                    return


def redis_location(layer: Any) -> tuple[str, str, dict[str, Any]] | None:
    """``(url, key prefix, pool options)`` of a channels_redis ``layer``'s first server (what
    the buffer, and the count of open sockets, share with it); ``None`` for any other layer."""
    hosts = getattr(layer, "hosts", None)
    from_channels_redis = any(
        c.__module__.split(".")[0] == "channels_redis" for c in type(layer).__mro__
    )
    if not hosts or not from_channels_redis:
        return None
    host = dict(hosts[0])
    address = host.pop("address", None)
    if not isinstance(address, str):
        return None
    names = ("socket_timeout", "socket_connect_timeout", "max_connections", "timeout")
    options = {k: host[k] for k in names if k in host}
    return address, str(getattr(layer, "prefix", "asgi")), options


_buffers: dict[tuple[Any, ...], TurnBuffer] = {}


def turn_buffer() -> TurnBuffer:
    """The buffer for the configured channel layer (Redis stream or this process's memory)."""
    ttl = app_settings.TURN_BUFFER_SECONDS
    location = redis_location(get_channel_layer())
    key: tuple[Any, ...] = (ttl, location[0], location[1]) if location else (ttl,)
    buffer = _buffers.get(key)
    if buffer is None:
        if location is None:
            buffer = InMemoryTurnBuffer(ttl)
        else:
            buffer = RedisTurnBuffer(location[0], location[1], ttl, **location[2])
        _buffers[key] = buffer
    return buffer


class TurnPublisher:
    """Numbers the frames of one turn and publishes them (buffer, then group) in batches.

    :meth:`stamp` is synchronous and cheap (an id on a copy of the frame, the frame queued);
    a task publishes what is queued, one buffer write and one ``group_send`` per batch. On
    channels_redis with one server, the buffer write also reads who is in the group, in the
    same round trip, and the ``group_send`` (three more) is skipped when no socket but
    ``origin`` is: the usual case, one tab (a profile of 300 chats on one process: publishing
    took half its event loop's time). A socket that joins the group after that read and then
    resumes finds the batch in the buffer, written before the read. On the in-memory layer
    the group is read directly, with the same effect.
    :meth:`drain` waits until everything stamped is published (call it after the final frame).
    ``origin`` is the sending socket's channel name (it drops its own frames) or ``""``.
    """

    def __init__(self, user: Any, conversation_id: str, trace_id: str, origin: str = "") -> None:
        self.owner = int(user.pk)
        self.group = user_group(user)
        self.conversation_id = conversation_id
        self.trace_id = trace_id
        self.origin = origin
        self._n = 0
        self._queued: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None
        self._buffer = turn_buffer()
        self._layer = get_channel_layer()
        self._group_key: bytes | None = None
        hosts = getattr(self._layer, "hosts", None)
        if isinstance(self._buffer, RedisTurnBuffer) and hosts and len(hosts) == 1:
            self._group_key = self._layer._group_key(self.group)  # channels_redis's own key

    def stamp(self, frame: dict[str, Any]) -> dict[str, Any]:
        """``frame`` with its ``event_id``, queued for publishing."""
        self._n += 1
        frame = {**frame, "event_id": f"{self.trace_id}-{self._n}"}
        self._queued.append(frame)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._publish())
        return frame

    async def drain(self) -> None:
        """Wait until every stamped frame is published (shielded from cancellation)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    def _others_listen(self) -> bool:
        """Whether a socket besides ``origin`` may be in the group. Known on the in-memory
        layer (one process): the usual single tab then costs no group message, which its own
        socket would only receive and drop while the turn's first tokens wait."""
        if isinstance(self._layer, InMemoryChannelLayer):
            return any(channel != self.origin for channel in self._layer.groups.get(self.group, ()))
        return True

    async def _publish(self) -> None:
        while self._queued:
            batch, self._queued = self._queued, []
            try:
                if self._group_key is not None and isinstance(self._buffer, RedisTurnBuffer):
                    members = await self._buffer.append_and_list(
                        self.owner,
                        self.conversation_id,
                        batch,
                        self._group_key,
                        time.time() - self._layer.group_expiry,
                    )
                    listened = any(member != self.origin for member in members)
                else:
                    await self._buffer.append(self.owner, self.conversation_id, batch)
                    listened = self._others_listen()
                if self._layer is not None and listened:
                    await self._layer.group_send(
                        self.group,
                        {
                            "type": "turn.events",
                            "conversation_id": self.conversation_id,
                            "origin": self.origin,
                            "frames": batch,
                        },
                    )
            except Exception:  # publishing must never fail the turn
                logger.exception("Could not publish events of turn %s", self.trace_id)
