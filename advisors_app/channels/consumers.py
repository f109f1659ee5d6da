"""The chat websocket: one connection streams turns of one chain, token by token.

Route: ``/ws/chat/<slug>/`` (:mod:`advisors_app.routing`), behind the site's
``CsrfOriginValidator`` (:mod:`advisors_app.security.origins`: a page from another origin — scheme,
host and port — cannot open it) and
``AuthMiddlewareStack`` (the user comes from the Django session cookie).

Protocol (JSON text frames; the payloads of :mod:`advisors_app.turn.events`):

* Client ``{"type": "message", "message": str, "conversation_id"?: str | null, "params"?: {},
  "label"?: str, "version"?: int | "draft"}`` (``text`` is an alias of ``message``; a label or
  version other than ``production``: staff only)
  runs one turn through :func:`advisors_app.turn.stream_turn` — what every transport
  calls — and the server answers ``start``, ``sources`` (when retrieval ran), ``tool_call`` /
  ``tool_result`` for each tool call, any number of ``delta`` (coalesced:
  :mod:`advisors_app.turn.delivery`), then exactly one ``done`` or ``error``. Refused input (blank
  text, a bad conversation id, unknown params, unknown chain) is one ``error`` frame with
  ``code`` and field ``errors`` (named as the frame named them) and nothing is stored.
  Without ``conversation_id`` a conversation is started; its id is in the ``start`` frame.
  Ids are namespaced per owner by the turn: another user's id reaches nothing of theirs
  (it starts a conversation of the caller's own under that id). ``done`` carries
  ``message_id`` (the stored reply's id) and ``stored``; a turn that started a
  conversation and stored nothing (a guard refused the message, it failed before any text)
  ends with ``conversation_id: null`` in its ``done`` or ``error`` frame: that conversation
  is gone.
* Client ``{"type": "feedback", "message_id": int, "key"?: str, "value", "reason"?: str,
  "comment"?: str}`` rates one of the user's replies (the ``message_id`` of its ``done`` frame)
  through :mod:`advisors_app.evaluation.feedback` — the function ``PUT
  /api/messages/<id>/feedback/``
  calls —, ``"value": null`` undoing the vote. It is answered at once, even while a turn runs,
  with ``{"type": "feedback", "message_id", "key", "score"}`` (the stored vote, ``null`` once
  undone) or an ``error`` frame with ``"in_reply_to": "feedback"`` and the ``message_id`` sent
  (code ``invalid`` with field ``errors``, or ``not_found`` for a message that is not one of
  the user's); the running turn is never disturbed.
* ``feedback`` frames count against ``ADVISORS["FEEDBACK_THROTTLE_RATE"]`` per user, shared
  with ``PUT``/``DELETE /api/messages/<id>/feedback/`` (:mod:`advisors_app.security.rates`):
  past it, the ``error`` frame has code ``"throttled"`` and ``retry_after`` (seconds).
* Client ``{"type": "cancel"}`` stops the turn being generated: the model stream is closed at
  once, the partial answer stored flagged ``interrupted`` (bug cases B06/B31), any text not yet
  sent is sent, then one ``done`` frame with ``"reason": "cancelled"`` (``"complete"`` if the
  turn had already ended): the end the SSE view publishes too
  (:func:`~advisors_app.turn.delivery.cancelled_frames`). With no turn
  running, ``cancel`` does nothing (it may cross a ``done`` frame on the wire).
* **One turn at a time per connection**: a ``message`` while a turn is being generated is
  refused with an ``error`` frame, code ``"busy"``; the running turn is not disturbed. Send
  ``cancel`` first, or wait for its ``done``.
* Turns count against the same per-user budget as the REST chat endpoints
  (``ADVISORS["CHAT_THROTTLE_RATE"]``, :mod:`advisors_app.turn.throttling`): over it, a valid
  ``message`` gets an ``error`` frame with code ``"throttled"`` and ``retry_after`` (seconds).
* Malformed frames — not JSON, binary, not an object, an unknown ``type``, a missing, blank or
  non-string ``text``, unknown fields, wrong types — get an ``error`` frame with code
  ``"invalid"`` and field ``errors``; the connection stays open and usable. (``cancel``
  ignores fields it does not know: it should always work.) A frame over
  :data:`MAX_FRAME_BYTES` gets that ``error`` frame (``errors.frame`` names its size), then
  the socket is closed with 4009.
* Server frames of a turn resumed elsewhere — tool calls decided outside a turn (an approver,
  ``POST /api/approvals/<id>/decision/``) and resumed by a task worker
  (:mod:`advisors_app.approvals.jobs`) — reach every open chat socket of the conversation's
  owner through the channel layer: the turn's ``start`` … ``done`` (or ``error``) frames, each
  with ``conversation_id`` and ``"resumed_elsewhere": true``.
* Every frame of a turn carries ``event_id`` (``"<trace_id>-<n>"``) and is published to the
  user's group and to a short per-conversation buffer (:mod:`advisors_app.turn.buffer`):
  the user's other sockets (tabs, devices, processes) get it with ``conversation_id`` and
  ``"resumed_elsewhere": true``, from the turn's first frame on, each frame once.
* Client ``{"type": "resume", "conversation_id", "last_event_id"?}`` answers the frames of the
  conversation's last turn after ``last_event_id``, then the rest live, unflagged; an
  ``error`` frame with ``code`` ``not_found`` and ``"in_reply_to": "resume"`` when nothing of
  it is kept (or it is another user's). ``conversation_id`` is checked as a message frame's
  (``invalid`` past 128 characters), ``last_event_id`` is at most 64 characters. Each
  well-formed ``resume`` counts against ``ADVISORS["RESUME_THROTTLE_RATE"]`` per user, shared
  with the SSE resume: past it, an ``error`` frame with code ``"throttled"``, ``retry_after``,
  ``"in_reply_to": "resume"`` and the ``conversation_id``.
* **Frames waiting are bounded per connection.** ``resume`` and ``feedback`` frames are handled
  off the receive path, one at a time and in order, so a resume that waits for its turn's
  buffer never holds up the frames behind it. A connection with more than
  ``ADVISORS["WEBSOCKET_MAX_PENDING_FRAMES"]`` (32) of them read but not yet handled gets an
  ``error`` frame with code ``"too_many_frames"`` and is closed with **4429**
  (:data:`CLOSE_TOO_MANY_FRAMES`): daphne queues whatever a client sends for the
  application, so a client flooding a connection is cut off instead of held in memory.
  **Every** frame also counts against a per-connection budget
  (:mod:`advisors_app.channels.frame_rate`): ``ADVISORS["WEBSOCKET_FRAME_BURST"]`` (64) at
  once, then ``ADVISORS["WEBSOCKET_FRAME_RATE"]`` (10) per second; the frame past it gets the
  same ``too_many_frames`` error and close 4429 (a flood of invalid or refused frames too).
* ``ADVISORS["DISCONNECT_POLICY"]``: ``"cancel"`` (default) stops the running turn when the
  socket goes away (below); ``"continue"`` leaves it running to its end, stored whole, its
  frames still published (a server shutting down always cancels).
* Server ``{"type": "conversation", "conversation_id", "title"}`` is sent to **every** open
  chat socket of the same user — on any server process, through the channel layer (Redis with
  ``REDIS_URL``) — when one of their conversations got a turn, so other tabs and devices can
  refresh their conversation list.

**Sockets per user are bounded**: a user holding ``ADVISORS["MAX_SOCKETS_PER_USER"]`` (20) chat
sockets open — on any server process (:mod:`advisors_app.channels.sockets`) — gets, on one
more, one ``error`` frame with code ``"too_many_sockets"``, then it is closed with **4429**.
Closing one frees its place at once.

Anonymous users: the connection is accepted, sent one ``error`` frame with code
``"not_authenticated"``, and closed with code **4401**, so a browser can tell "log in again"
apart from a dropped connection (a refused handshake would only show code 1006).

The turn runs in a task of its own, never inside ``receive`` (bug case B31): ``cancel`` and
disconnects are handled while tokens stream. On disconnect (or a send that failed because the
socket just closed) under ``"cancel"`` the turn is cancelled and awaited inside
``disconnect``, well within the server's shutdown timeout, and the partial turn stored as on
``cancel``; under ``"continue"`` the consumer returns at once and the turn outlives it — even
when daphne cancels a connection slow to close (its 10 s application close timeout). Only a
server shutdown (:func:`advisors_app.turn.shutdown.stopping`) stops it then.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections import deque
from typing import Any

from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from advisors_app.channels.frame_rate import FrameBudget
from advisors_app.channels.frames import (
    CLOSE_NOT_AUTHENTICATED,
    CLOSE_SERVER_SHUTDOWN,
    CLOSE_TOO_BIG,
    CLOSE_TOO_MANY_FRAMES,
    MAX_FRAME_BYTES,
    invalid_frame,
    not_json,
    read_frame,
    utf8_size,
)
from advisors_app.channels.sockets import RENEW_SECONDS, socket_slots
from advisors_app.conf import app_settings
from advisors_app.db.threads import TurnThread, db_sync_to_async, own_thread
from advisors_app.evaluation.feedback import feedback_frame, parse_vote, record_vote
from advisors_app.exceptions import Refusal
from advisors_app.memory.conversations import afind_conversation
from advisors_app.security.rates import FeedbackRateThrottle, ResumeRateThrottle, count_request
from advisors_app.turn import TurnInput, TurnStream, stream_turn
from advisors_app.turn import shutdown as server_shutdown
from advisors_app.turn.buffer import (
    SeenIds,
    TurnPublisher,
    events_after,
    parse_event_id,
    turn_buffer,
    user_group,
)
from advisors_app.turn.delivery import (
    DeltaCoalescer,
    cancelled_frames,
    detach,
    keeps_running,
    nothing_to_resume,
    shutdown_frames,
)
from advisors_app.turn.events import DoneEvent, ErrorEvent, error_event

__all__ = [
    "CLOSE_NOT_AUTHENTICATED",
    "CLOSE_TOO_MANY_FRAMES",
    "MAX_FRAME_BYTES",
    "ChatConsumer",
    "user_group",
]

logger = logging.getLogger(__name__)

#: A ``resume`` naming an event of a turn the buffer holds nothing of yet waits this many
#: tenths of a second for the turn's first batch before answering ``not_found``.
RESUME_WAIT_STEPS = 10


def _turn_of(frames: list[dict[str, Any]] | None) -> str | None:
    """The trace id of the turn ``frames`` (a buffer's) belong to."""
    parsed = parse_event_id(frames[0].get("event_id")) if frames else None
    return parsed[0] if parsed is not None else None


class ChatConsumer(AsyncJsonWebsocketConsumer):
    """Streams chat turns of the chain in the URL (see the module docstring for the protocol)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except asyncio.CancelledError:
            # Daphne cancels every connection when the server shuts down — and also one that
            # took longer than its application close timeout (10 s) to end after its client
            # left. The latter is no reason to stop a "continue" turn: only a real shutdown
            # (server_shutdown's hook, which stops every running turn first) is.
            self._shutting_down = not keeps_running() or server_shutdown.stopping()
            await self.disconnect(1001)
            await self._leave_groups()  # no dead channel left in the user's group
            raise

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels runs close_old_connections before every message — socket frames and group
        # messages alike — on the process's one shared thread: under load every delivered
        # frame queued behind every other socket's (500 chats: first delta p99 2 s, group
        # messages piling up in the process's inbox until over capacity). This consumer's
        # database work runs on each turn's own thread, which closes its connections itself
        # (advisors_app.db.threads), so there is nothing here to close.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        self.chain_slug: str = self.scope["url_route"]["kwargs"]["slug"]
        self.user = self.scope.get("user")
        self._generation: asyncio.Task[None] | None = None
        #: True from a message's acceptance until its final frame is sent (the busy rule).
        self._turn_active = False
        self._closing = False
        self._shutting_down = False
        self._publisher: TurnPublisher | None = None
        #: Conversations this socket resumed: their live frames are its own, not "elsewhere".
        self._resumed: set[str] = set()
        self._seen = SeenIds()
        #: ``resume`` and ``feedback`` frames read and not yet handled, the first being handled
        #: by ``_deferred_task`` (module docstring: "Frames waiting are bounded").
        self._deferred: deque[dict[str, Any]] = deque()
        self._deferred_task: asyncio.Task[None] | None = None
        #: Group batches of a conversation being resumed, delivered once its resume has sent
        #: the buffer's frames: in order, none twice.
        self._held: dict[str, list[dict[str, Any]]] = {}
        #: Where this socket's turns and votes do their database work, one after the other.
        self._thread = TurnThread()
        self._authenticated = bool(getattr(self.user, "is_authenticated", False))
        #: This socket's place among its user's open sockets (``None``: it holds none).
        self._slot: str | None = None
        self._renewal: asyncio.Task[None] | None = None
        self._frames = FrameBudget(
            app_settings.WEBSOCKET_FRAME_RATE, app_settings.WEBSOCKET_FRAME_BURST
        )
        await self.accept()
        if not self._authenticated:
            await self.send_json(
                ErrorEvent("not_authenticated", "Log in to chat.").to_dict(),
                close=CLOSE_NOT_AUTHENTICATED,
            )
            return
        if not await self._take_slot():
            limit = app_settings.MAX_SOCKETS_PER_USER
            refusal = ErrorEvent(
                "too_many_sockets",
                f"You have {limit} chat connections open already "
                "(ADVISORS['MAX_SOCKETS_PER_USER']): close one before opening another.",
            )
            self._authenticated = False  # nothing it sends is read: it is being closed
            await self.send_json(refusal.to_dict(), close=CLOSE_TOO_MANY_FRAMES)
            return
        if self.channel_layer is not None:
            group = user_group(self.user)
            await self.channel_layer.group_add(group, self.channel_name)
            self.groups.append(group)  # discarded by websocket_disconnect

    async def _take_slot(self) -> bool:
        """Take a place among the user's open sockets (:mod:`advisors_app.channels.sockets`);
        ``False`` when they hold ``MAX_SOCKETS_PER_USER`` already. A store that fails lets
        the socket in (logged): the bound guards memory, and chat must not depend on it."""
        limit = app_settings.MAX_SOCKETS_PER_USER
        if not limit:
            return True
        slot = uuid.uuid4().hex
        slots = socket_slots()
        try:
            if not await slots.acquire(self.user.pk, slot, limit):
                return False
        except Exception:
            logger.warning("Could not count the sockets of user %s", self.user.pk, exc_info=True)
            return True
        self._slot = slot
        if slots.leased:
            self._renewal = asyncio.create_task(self._renew_slot(slot))
        return True

    async def _renew_slot(self, slot: str) -> None:
        """Renew the socket's place while it is open (a lease: a dead process's lapses)."""
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            try:
                await socket_slots().renew(self.user.pk, slot)
            except Exception:
                logger.warning("Could not renew socket %s", slot, exc_info=True)

    async def _give_slot_back(self) -> None:
        slot, self._slot = getattr(self, "_slot", None), None
        renewal = getattr(self, "_renewal", None)
        if renewal is not None:
            renewal.cancel()
        if slot is None:
            return
        try:
            await socket_slots().release(self.user.pk, slot)
        except Exception:  # its lease lapses on its own
            logger.warning("Could not give back socket %s", slot, exc_info=True)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self._closing:
            return
        if not self._frames.take():
            await self._refuse_flood(
                "This connection sent more frames than ADVISORS['WEBSOCKET_FRAME_RATE'] allows: "
                "it is closed."
            )
            return
        size = len(bytes_data or b"") if text_data is None else utf8_size(text_data)
        if size > MAX_FRAME_BYTES:
            too_big = f"The frame is {size} bytes; at most {MAX_FRAME_BYTES} are read."
            await self.send_json(error_event(invalid_frame({"frame": [too_big]})).to_dict())
            await self.close(code=CLOSE_TOO_BIG)
            return
        if text_data is None:
            binary = invalid_frame({"frame": ["Send JSON text frames, not binary."]})
            await self.send_json(error_event(binary).to_dict())
            return
        try:
            frame = json.loads(text_data, parse_constant=not_json)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than it can parse
            await self.send_json(
                error_event(invalid_frame({"frame": ["Not valid JSON."]})).to_dict()
            )
            return
        await self.receive_json(frame)

    async def send_json(self, content: Any, close: bool | int = False) -> None:
        """Send one frame; a socket that closed under it (the client left, its disconnect not
        processed yet: autobahn raises ``Disconnected``) is noted as going away instead of
        failing the caller — under ``"continue"`` a running turn goes on publishing."""
        if self._closing:
            return
        text = await self.encode_json(content)  # a frame that is not JSON is a bug: raised
        try:
            await self.send(text_data=text, close=close)
        except Exception:
            logger.debug("Send on chat socket %s failed: it closed", self.channel_name)
            self._socket_lost()

    def _socket_lost(self) -> None:
        """The socket went away before its disconnect was processed: send nothing more, and
        under ``"cancel"`` stop the running turn as the disconnect will."""
        self._closing = True
        task = self._generation
        if not keeps_running() and self._turn_active and task is not None:
            task.cancel()  # the turn's own task too: cancelled at its next await

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not self._authenticated or self._closing:
            return  # being closed: see connect() and _defer()
        try:
            kind, turn = read_frame(content)
        except Refusal as refused:
            await self.send_json(error_event(refused).to_dict())
            return
        if kind == "cancel":
            await self._cancel_generation()
        elif kind in ("feedback", "resume"):
            await self._defer(content)
        elif self._turn_active:
            await self.send_json(
                ErrorEvent(
                    "busy",
                    "A reply is still being generated on this connection: wait for its "
                    'done frame or send {"type": "cancel"} first.',
                ).to_dict()
            )
        else:
            # A previous turn's task may still be announcing its conversation: let it.
            self._turn_active = True
            assert turn is not None
            self._generation = asyncio.create_task(self._generate(turn))

    async def _defer(self, content: dict[str, Any]) -> None:
        """Queue a ``resume`` or ``feedback`` frame for :meth:`_handle_deferred` — or, past
        ``WEBSOCKET_MAX_PENDING_FRAMES`` waiting, refuse it and close the connection."""
        bound = app_settings.WEBSOCKET_MAX_PENDING_FRAMES
        if len(self._deferred) >= bound:
            await self._refuse_flood(
                f"More than {bound} frames are waiting to be handled on this connection: "
                "it is closed. Wait for the answers before sending more."
            )
            return
        self._deferred.append(content)
        if self._deferred_task is None or self._deferred_task.done():
            self._deferred_task = asyncio.create_task(self._handle_deferred())

    async def _refuse_flood(self, message: str) -> None:
        """``too_many_frames``, close 4429, and read or send nothing more on this socket."""
        refusal = ErrorEvent("too_many_frames", message)
        await self.send_json(refusal.to_dict(), close=CLOSE_TOO_MANY_FRAMES)
        self._socket_lost()  # the disconnect follows

    async def _handle_deferred(self) -> None:
        """Handle the queued frames one at a time, in order; each stays counted as waiting
        until it is handled."""
        while self._deferred and not self._closing:
            content = self._deferred[0]
            try:
                if content["type"] == "feedback":
                    await self._feedback(content)
                else:
                    await self._resume(content["conversation_id"], content.get("last_event_id"))
            finally:
                self._deferred.popleft()

    async def _feedback(self, content: dict[str, Any]) -> None:
        """Count the vote (``FEEDBACK_THROTTLE_RATE``), then store or undo it
        (:mod:`advisors_app.evaluation.feedback`) and acknowledge it."""
        try:
            async with own_thread(self._thread):
                await db_sync_to_async(count_request)(FeedbackRateThrottle, self.user)
                vote = parse_vote(content, envelope=("type",), allow_withdraw=True)
                score, _ = await db_sync_to_async(record_vote)(self.user, vote)
        except Refusal as refused:
            event = error_event(refused)
        except Exception as exc:  # the database failed: the socket stays usable
            logger.exception("Feedback on message %r failed", content.get("message_id"))
            event = error_event(exc)
        else:
            await self.send_json(feedback_frame(vote, score))
            return
        sent = content.get("message_id")
        frame = event.to_dict() | {"in_reply_to": "feedback"}
        # The page finds the thumbs to reset by the id it sent (a well-formed one only).
        frame["message_id"] = sent if type(sent) is int else None
        await self.send_json(frame)

    async def _cancel_generation(self) -> None:
        """Cancel the running turn and wait until it has sent its final frame."""
        task = self._generation
        if not self._turn_active or task is None or task.done():
            return
        task.cancel()
        await asyncio.wait((task,))

    async def _generate(self, turn: TurnInput) -> None:
        """Run one turn, then tell the user's sockets its conversation changed.

        This is the task ``cancel`` and ``disconnect`` cancel. The turn counts as running
        (``busy``) only until its final frame is sent, not while it is being announced.
        """
        started: list[TurnStream] = []  # this turn's, even once the next one has begun
        try:
            # Else every socket's database work would queue on one thread.
            async with own_thread(self._thread):
                try:
                    await self._run_turn(turn, started)
                finally:
                    self._turn_active = False
                    if started:
                        await self._announce(started[0])
        finally:
            if self._closing:  # the socket left before its turn ended (policy "continue")
                self._thread.shutdown(wait=False)

    async def _run_turn(self, turn: TurnInput, started: list[TurnStream]) -> None:
        """Send the turn's frames: ``start``, ``sources``, tool events, deltas, then ``done``
        or ``error``."""
        stream: TurnStream | None = None
        events: DeltaCoalescer | None = None
        final_sent = False
        publisher = self._publisher = None
        try:
            stream = await stream_turn(self.chain_slug, self.user, turn)
            started.append(stream)
            publisher = self._publisher = TurnPublisher(
                self.user, stream.conversation_id, stream.trace_id, self.channel_name or ""
            )
            events = DeltaCoalescer(stream)
            async for event in events:
                await self._emit(event.to_dict())
                final_sent = isinstance(event, (DoneEvent, ErrorEvent))
        except Refusal as refused:
            await self._emit(error_event(refused).to_dict(), publish=False)
            return
        except Exception as exc:  # the turn failed outside the chain (database down, ...)
            logger.exception("Chat turn on chain %r failed", self.chain_slug)
            await self._emit(error_event(exc).to_dict())
            return
        except asyncio.CancelledError:
            if events is not None:
                # Closes the model stream; the turn stores the partial turn.
                await events.aclose()
            if server_shutdown.stopping() and not final_sent:
                # Sent even as the socket is being closed; then the socket is closed with code
                # 4503 ("unavailable, try again": servers may not send 1001) before the server
                # stops, so the client is not left with a dropped connection.
                for frame in shutdown_frames(stream, events):
                    await self._emit(frame, closing=True)
                with contextlib.suppress(Exception):  # the client may be gone already
                    await self.close(code=CLOSE_SERVER_SHUTDOWN)
            elif not self._shutting_down and not final_sent:
                for frame in cancelled_frames(stream, events, self.chain_slug):
                    await self._emit(frame)
            raise
        finally:
            if publisher is not None:
                await publisher.drain()

    async def _emit(
        self, frame: dict[str, Any], *, publish: bool = True, closing: bool = False
    ) -> None:
        """Send one frame of this socket's turn (while it is open; ``closing``: while the
        server closes it too) and publish it with its id (:mod:`advisors_app.turn.buffer`):
        other sockets and a later ``resume`` see it."""
        if publish and self._publisher is not None:
            frame = self._publisher.stamp(frame)
            # Sent by this socket: a resume on it never sends the frame again.
            self._seen.first_time(self._publisher.conversation_id, frame)
        if not self._closing:
            await self.send_json(frame)
        elif closing:
            with contextlib.suppress(Exception):  # the client may be gone already
                await self.send(text_data=await self.encode_json(frame))
        if frame["type"] in ("done", "error"):
            # The busy rule: the socket takes a new message once the final frame is sent,
            # while this turn's task still publishes, announces and closes its thread.
            self._turn_active = False

    async def _announce(self, stream: TurnStream) -> None:
        """Tell the user's sockets (any process) that the turn's conversation changed, or that
        it was removed (a turn that stored nothing: :mod:`advisors_app.turn.finish`). Without a
        channel layer only this socket is told."""
        conversation_id = stream.conversation_id
        try:
            final = stream.final_event
            if final is not None:  # what the turn left is known: no query
                title, removed = stream.conversation_title, final.conversation_id is None
            else:
                conversation = await afind_conversation(self.user, conversation_id)
                removed = conversation is None
                title = conversation.title if conversation is not None else ""
            event = {
                "type": "conversation.updated",
                "conversation_id": conversation_id,
                "title": "" if removed else title,
                "removed": removed,
            }
            if self.channel_layer is None:
                await self.conversation_updated(event)
            else:
                await self.channel_layer.group_send(user_group(self.user), event)
        except Exception:  # a notification must never fail the turn
            logger.exception("Could not announce conversation %s", conversation_id)

    async def conversation_updated(self, event: dict[str, Any]) -> None:
        """Channel-layer handler: forward a ``conversation`` frame to this socket."""
        if not self._closing:
            await self.send_json(
                {
                    "type": "conversation",
                    "conversation_id": event["conversation_id"],
                    "title": event["title"],
                    "removed": event.get("removed", False),
                }
            )

    async def turn_event(self, event: dict[str, Any]) -> None:
        """Channel-layer handler: forward one event of a turn resumed elsewhere (decisions
        recorded outside a turn, resumed by a task: :mod:`advisors_app.approvals.jobs`), with
        its ``conversation_id`` and ``"resumed_elsewhere": true``."""
        if not self._closing:
            frame = dict(event["event"])
            frame.setdefault("conversation_id", event["conversation_id"])
            frame["resumed_elsewhere"] = True
            await self.send_json(frame)

    async def _resume(self, conversation_id: str, last_event_id: str | None) -> None:
        """Send the frames of the conversation's last turn after ``last_event_id``; its later
        frames follow live from the group (:meth:`turn_events`). Handled off the receive path
        (:meth:`_handle_deferred`): the group's batches of the conversation that arrive
        meanwhile are held, then delivered after the buffer's frames — none missed, sent
        twice or out of order. Counted first (``RESUME_THROTTLE_RATE``)."""
        try:
            async with own_thread(self._thread):
                await db_sync_to_async(count_request)(ResumeRateThrottle, self.user)
        except Refusal as refused:
            frame = error_event(refused).to_dict()
            await self.send_json(
                frame | {"in_reply_to": "resume", "conversation_id": conversation_id}
            )
            return
        self._held.setdefault(conversation_id, [])
        try:
            await self._send_resumed(conversation_id, last_event_id)
        finally:
            for event in self._held.pop(conversation_id, []):
                await self.turn_events(event)

    async def _send_resumed(self, conversation_id: str, last_event_id: str | None) -> None:
        try:
            frames = await turn_buffer().read(self.user.pk, conversation_id)
            seen = parse_event_id(last_event_id)
            if seen is not None and _turn_of(frames) != seen[0]:
                frames = await self._wait_for_buffer(conversation_id, seen[0]) or frames
        except Exception as exc:  # the buffer's store failed: the socket stays usable
            logger.exception("Resuming conversation %s failed", conversation_id)
            frames, failure = None, error_event(exc).to_dict()
        else:
            failure = error_event(nothing_to_resume(conversation_id)).to_dict()
        if frames is None:
            await self.send_json(failure | {"in_reply_to": "resume"})
            return
        self._resumed.add(conversation_id)
        # The client has everything up to last_event_id — possibly more than the buffer holds
        # yet (it is written after the frames are sent): none of that is sent again, neither
        # from the buffer nor from the group's batches that follow.
        self._seen.seen_up_to(conversation_id, last_event_id)
        for frame in events_after(frames, last_event_id):
            if self._seen.first_time(conversation_id, frame):
                await self.send_json(frame)

    async def _wait_for_buffer(
        self, conversation_id: str, trace_id: str
    ) -> list[dict[str, Any]] | None:
        """The buffer is written after the frames are sent: a client that saw a turn's first
        frames may resume before the buffer holds that turn (it holds nothing yet, or the
        conversation's previous turn, which would be replayed in its place). Wait a moment
        for it; then whatever the buffer holds — the client's id may be of an older turn
        (it missed the whole of the latest), which this cannot tell from a lagging one."""
        frames = None
        for _ in range(RESUME_WAIT_STEPS):
            await asyncio.sleep(0.1)
            frames = await turn_buffer().read(self.user.pk, conversation_id)
            if _turn_of(frames) == trace_id:
                break
        return frames

    async def turn_events(self, event: dict[str, Any]) -> None:
        """Channel-layer handler: frames of a turn run by another socket (another tab, another
        process) or left running by a socket that went away. A conversation this socket
        resumed gets them as its own; otherwise they carry ``conversation_id`` and
        ``"resumed_elsewhere": true`` (drawn when that conversation is open), and only from
        the turn's first event on: a socket that joined mid-turn sends ``resume``."""
        if self._closing or event.get("origin") == self.channel_name:
            return  # this socket sent them itself
        conversation_id = event["conversation_id"]
        held = self._held.get(conversation_id)
        if held is not None:  # being resumed: after the buffer's frames (_resume)
            held.append(event)
            return
        own = conversation_id in self._resumed
        for frame in event["frames"]:
            if not self._seen.first_time(conversation_id, frame, contiguous=not own):
                continue
            if not own:
                frame = {"conversation_id": conversation_id, **frame, "resumed_elsewhere": True}
            await self.send_json(frame)

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        """The client left: end or detach the running turn first (:meth:`disconnect`), then
        leave the group. A failing ``group_discard`` (Redis unreachable or out of connections)
        is logged, not raised: the turn's fate never depends on it, and channels_redis drops
        a dead channel from the group after ``group_expiry`` anyway."""
        await self.disconnect(message.get("code", 1000))
        await self._leave_groups()
        raise StopConsumer()

    async def _leave_groups(self) -> None:
        groups, self.groups = list(getattr(self, "groups", None) or ()), []
        for group in groups:
            try:
                await asyncio.wait_for(
                    self.channel_layer.group_discard(group, self.channel_name), 5
                )
            except Exception:
                logger.warning("Could not leave group %s", group, exc_info=True)

    async def disconnect(self, code: int) -> None:
        """Cancel and await every task of the connection (the partial turn gets stored) — or,
        with ``ADVISORS["DISCONNECT_POLICY"] = "continue"``, leave the running turn to end and
        be stored whole while its frames go on to the buffer and the user's other sockets."""
        self._closing = True
        await self._give_slot_back()  # first: a "continue" turn may outlive the socket
        deferred = getattr(self, "_deferred_task", None)
        if deferred is not None and not deferred.done():
            deferred.cancel()  # a resume waiting, a vote being stored: nobody is listening
            await asyncio.wait((deferred,))
        task = getattr(self, "_generation", None)
        if task is not None and not task.done():
            if keeps_running() and not self._shutting_down:
                detach(task)
                return
            task.cancel()
            await asyncio.wait((task,))
        if hasattr(self, "_thread"):
            self._thread.shutdown(wait=False)
