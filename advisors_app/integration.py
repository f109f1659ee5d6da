"""The Python API for a project that uses the app: run a chain, publish its draft, move a label.

Every function has a synchronous form for sync views, scripts, commands and task functions, and
an async twin (the same name with an ``a`` prefix) for async views and consumers:

==========================  ===========================  =====================================
sync                        async                        what
==========================  ===========================  =====================================
:func:`call_chain`          :func:`acall_chain`          one turn, the whole answer
                                                         (:class:`TurnOutcome`)
:func:`stream_chain`        :func:`astream_chain`        one turn, its events as they come
:func:`publish_chain`       :func:`apublish_chain`       the draft as a new version
:func:`promote`             :func:`apromote`             point a label at a version
==========================  ===========================  =====================================

They are the functions the REST API, the websocket, the admin and the commands use
(:mod:`advisors_app.turn`, :mod:`advisors_app.definition.versions`), so a turn run here is
stored, metered, budgeted, guarded and logged as one asked for over HTTP, and shows up in the
user's conversations. What a transport checks before it lets a person in (who may publish, who
may move ``production``) is checked here when a ``user`` is given; without one the code acts
as the project itself (the label history records no actor).

The sync forms must not be called from a running event loop: await the twin there
(:func:`call_chain` and :func:`stream_chain` raise ``RuntimeError``, :func:`publish_chain` and
:func:`promote` Django's ``SynchronousOnlyOperation``). In a sync view under ASGI they run
the turn on the server's loop, as Django's own ``async_to_sync`` does; elsewhere on one event
loop per thread, reused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied, ValidationError

from advisors_app.core._sync import run_sync
from advisors_app.definition.runtime import DRAFT, ChainNotFound
from advisors_app.definition.versions import (
    VersionLookupError,
    can_move_label,
    can_publish,
    move_label,
    publish,
)
from advisors_app.evaluation.gate import gate_refusal
from advisors_app.exceptions import Conflict
from advisors_app.models import AdvisorChain, ChainLabel, ChainVersion
from advisors_app.models.versions import LABEL_NAME_VALIDATOR
from advisors_app.turn import TurnOutcome, TurnStream, call_turn, stream_turn
from advisors_app.turn.events import TurnEvent

__all__ = [
    "ChainEvents",
    "acall_chain",
    "apromote",
    "apublish_chain",
    "astream_chain",
    "call_chain",
    "promote",
    "publish_chain",
    "stream_chain",
]


# -- running a chain ------------------------------------------------------------------------


async def acall_chain(
    chain: str,
    user: Any,
    message: str,
    *,
    conversation_id: str | None = None,
    params: Mapping[str, Any] | None = None,
    label: str | None = None,
    version: int | None = None,
) -> TurnOutcome:
    """Run one turn of ``chain`` (its slug) for ``user`` and return the whole answer.

    ``user`` is the Django user the turn is for (its conversations, budgets and documents);
    ``conversation_id`` continues one of theirs (``outcome.conversation_id`` of an earlier
    turn); ``params`` are the request params the REST API takes (``{"options":
    {"max_tokens": 64}}``); ``label`` or ``version`` pick what runs (default: the version
    ``production`` points at). ``outcome.content`` is the answer, ``outcome.to_dict()`` the
    REST ``call`` body.

    Raises :class:`~advisors_app.exceptions.TurnError` when the turn is refused before it runs
    (``code`` and ``http_status``: unknown chain 404, bad input 400 with ``fields``, a used-up
    budget or the chat rate 429); nothing is stored then. A failure of the model or a tool is
    raised as it came (``ProviderError`` …), after the turn's call log is written.
    """
    return await call_turn(
        chain, user, message, conversation_id, params, label=label, version=version
    )


def call_chain(
    chain: str,
    user: Any,
    message: str,
    *,
    conversation_id: str | None = None,
    params: Mapping[str, Any] | None = None,
    label: str | None = None,
    version: int | None = None,
) -> TurnOutcome:
    """:func:`acall_chain` for synchronous code."""
    return run_sync(
        acall_chain(
            chain,
            user,
            message,
            conversation_id=conversation_id,
            params=params,
            label=label,
            version=version,
        )
    )


async def astream_chain(
    chain: str,
    user: Any,
    message: str,
    *,
    conversation_id: str | None = None,
    params: Mapping[str, Any] | None = None,
    label: str | None = None,
    version: int | None = None,
) -> TurnStream:
    """Open one turn of ``chain`` for ``user`` and return its events: ``async for event in
    stream`` (the arguments as :func:`acall_chain`'s).

    The events are those of the SSE stream (docs/events.md): ``start``, ``sources``,
    ``delta`` (``event.text``) …, then ``done`` (``event.outcome``: the
    :class:`TurnOutcome`) or ``error``; ``event.to_dict()`` is the JSON a client gets. Refused
    input raises :class:`~advisors_app.exceptions.TurnError` here, before any event; a failure
    while the chain runs is the last event, ``error``, never an exception. Stopping early
    (``await stream.aclose()``, ``async with stream:``) stops the model and stores the partial
    answer flagged as interrupted.
    """
    return await stream_turn(
        chain, user, message, conversation_id, params, label=label, version=version
    )


class ChainEvents:
    """The events of one streamed turn for synchronous code: ``for event in events``.

    What :func:`stream_chain` returns; ``conversation_id``, ``trace_id`` and ``chain`` are
    known before the first event, ``final_event`` (``done`` or ``error``) once it ended.
    ``close()`` — or leaving ``with events:``, or a server closing a streaming response whose
    client left — stops the turn as :meth:`TurnStream.aclose` does.
    """

    def __init__(self, stream: TurnStream) -> None:
        self._stream = stream
        self.conversation_id = stream.conversation_id
        self.trace_id = stream.trace_id
        self.chain = stream.chain

    @property
    def final_event(self) -> TurnEvent | None:
        return self._stream.final_event

    def __iter__(self) -> Iterator[TurnEvent]:
        return self

    def __next__(self) -> TurnEvent:
        try:
            return run_sync(_next(self._stream))
        except StopAsyncIteration:
            raise StopIteration from None

    def close(self) -> None:
        """Stop the turn (a no-op once it ended)."""
        run_sync(self._stream.aclose())

    def __enter__(self) -> ChainEvents:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


async def _next(stream: AsyncIterator[TurnEvent]) -> TurnEvent:
    return await anext(stream)


def stream_chain(
    chain: str,
    user: Any,
    message: str,
    *,
    conversation_id: str | None = None,
    params: Mapping[str, Any] | None = None,
    label: str | None = None,
    version: int | None = None,
) -> ChainEvents:
    """:func:`astream_chain` for synchronous code: the turn is opened (and refused input
    raised) here; iterate the :class:`ChainEvents` returned, in the same thread."""
    stream = run_sync(
        astream_chain(
            chain,
            user,
            message,
            conversation_id=conversation_id,
            params=params,
            label=label,
            version=version,
        )
    )
    return ChainEvents(stream)


# -- versions and labels ----------------------------------------------------------------------


def _chain(slug: str) -> AdvisorChain:
    # A disabled chain may be published and promoted: that is how one is prepared.
    chain = AdvisorChain.objects.filter(slug=slug).first()
    if chain is None:
        raise ChainNotFound(slug)
    return chain


def publish_chain(chain: str, *, message: str = "", user: Any = None) -> tuple[ChainVersion, bool]:
    """Publish ``chain``'s draft (what the admin's chain editor saved) as a new version and
    return ``(version, created)``; ``version.number`` is what ``version=`` and :func:`promote`
    take.

    A draft identical to the newest version returns that version with ``created=False``. The
    first version of a chain gets the ``production`` label. With ``user``, it must hold
    ``advisors_app.add_chainversion`` (else ``PermissionDenied``) and is recorded as the
    author. Raises :class:`~advisors_app.definition.runtime.ChainNotFound` for an unknown
    slug and :class:`~advisors_app.definition.versions.PublishError` (``fields["draft"]``:
    one line per problem) when the draft has lint or build errors; nothing is stored then.
    """
    row = _chain(chain)
    if user is not None and not can_publish(user):
        raise PermissionDenied("Publishing needs the advisors_app.add_chainversion permission.")
    return publish(row, message=message, user=user)


async def apublish_chain(
    chain: str, *, message: str = "", user: Any = None
) -> tuple[ChainVersion, bool]:
    """:func:`publish_chain` for async code."""
    return await sync_to_async(publish_chain)(chain, message=message, user=user)


def promote(
    chain: str,
    version: int | str,
    *,
    label: str = "production",
    user: Any = None,
    reason: str = "",
) -> ChainLabel:
    """Point ``label`` (default ``production``; created if new) of ``chain`` at ``version`` —
    a version number, or the name of another label (``promote("helper", "staging")`` serves
    what staging serves) — recording who, when and why in the label's history. Callers of the
    label get that version from their next turn on, in every server process.

    Moving a label where it points already records nothing. With ``user``, it must hold
    ``advisors_app.change_chainlabel`` (and ``promote_production`` for ``production``; else
    ``PermissionDenied``). Raises :class:`~advisors_app.definition.runtime.ChainNotFound`,
    :class:`~advisors_app.definition.versions.VersionLookupError` (no such version or label),
    ``ValidationError`` (a malformed new label name) and
    :class:`~advisors_app.exceptions.Conflict` when the chain's promotion gate on the label
    refuses the version (docs/evaluation.md); nothing moves then.
    """
    row = _chain(chain)
    if user is not None and not can_move_label(user, label):
        needs = "change_chainlabel" + (" and promote_production" if label == "production" else "")
        raise PermissionDenied(f"Moving label {label!r} needs advisors_app.{needs}.")
    LABEL_NAME_VALIDATOR(label)
    if label == DRAFT:  # a call or a diff could not tell it from the editable rows
        raise ValidationError("'draft' names the chain's editable rows, not a label.")
    target = _version(row, version)
    refused = gate_refusal(row, label, target)
    if refused:
        raise Conflict(" ".join(refused))
    return move_label(row, label, target, user=user, reason=reason)


def _version(chain: AdvisorChain, ref: int | str) -> ChainVersion:
    if isinstance(ref, int) or (ref.isascii() and ref.isdigit()):
        found = chain.versions.filter(number=int(ref)).first()
        if found is None:
            raise VersionLookupError(f"chain {chain.slug!r} has no version {ref}")
        return found
    label = chain.labels.select_related("version").filter(name=ref).first()
    if label is None:
        raise VersionLookupError(f"chain {chain.slug!r} has no version or label {ref!r}")
    return label.version


async def apromote(
    chain: str,
    version: int | str,
    *,
    label: str = "production",
    user: Any = None,
    reason: str = "",
) -> ChainLabel:
    """:func:`promote` for async code."""
    return await sync_to_async(promote)(chain, version, label=label, user=user, reason=reason)
