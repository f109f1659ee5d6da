"""The turn: one message (or one resume of paused tool calls) through a stored chain.

Every transport — the REST ``call`` and SSE ``stream`` views, the websocket consumer, the MCP
server, the admin playground, ``manage.py chat``, evaluation runs, resumed approvals — runs a turn
through :func:`call_turn` or :func:`stream_turn` (or, from a thread that may do database work,
:func:`prepare_turn`), with the same input (:class:`TurnInput`). The modules read in the order a
turn runs:

===============  =================================================================================
``input``        :class:`TurnInput`: the turn as the caller sent it, the same names on every
                 transport; the checks that need no database
``choose``       stage 1: the version to run (a label, a number, the draft; ``choose`` hooks)
``open``         stage 2, one thread hop: version, conversation and window in one read trip; the
                 checks that need them; the conversation created, the user's message stored
                 pending; the turn's request context, with its ``TurnMemory`` (``open`` hooks:
                 the chat rate)
``run``          stage 3: :func:`call_turn` / :func:`stream_turn` (:class:`TurnStream`), the
                 chain run and recorded (``run`` hooks)
``events``       what a stream sends (``start`` … ``done`` / ``error``)
``sources``      the documents the turn cites, decided in one place
``outcome``      :class:`TurnOutcome`: how the turn ended, what every transport answers with
``finish``       stage 4, one thread hop, one transaction: messages, call log, ``finish`` hooks
                 (costs, approvals); then stage 5, ``after_commit`` hooks (compaction)
``stages``       the hooks of each stage, and their signatures; ``state`` the values they get
``delivery``     what the SSE view and the websocket share: coalesced deltas, the end of a
                 cancelled or detached turn, resume checks; ``buffer`` resumable events
``throttling``   the per-user chat rate; ``shutdown`` the running turns, stopped with the server;
                 ``recovery`` the turns of a process that died mid-turn
===============  =================================================================================

A later turn of a chain with a memory advisor costs two thread hops and seven SQL statements in
two commits. The names below are importable from here; they load on first use, so that the
modules below the turn that import ``advisors_app.turn.events`` or ``.input`` do not load the
whole turn (which imports them back).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from advisors_app.turn.input import TurnInput
    from advisors_app.turn.outcome import TurnOutcome
    from advisors_app.turn.run import (
        PreparedTurn,
        TurnStream,
        call_turn,
        prepare_turn,
        stream_turn,
    )
    from advisors_app.turn.shutdown import stop_running_turns
    from advisors_app.turn.stages import Stage, add_hook, remove_hook

__all__ = [
    "PreparedTurn",
    "Stage",
    "TurnInput",
    "TurnOutcome",
    "TurnStream",
    "add_hook",
    "call_turn",
    "prepare_turn",
    "remove_hook",
    "stop_running_turns",
    "stream_turn",
]

_HOMES = {
    "PreparedTurn": "run",
    "Stage": "stages",
    "TurnInput": "input",
    "TurnOutcome": "outcome",
    "TurnStream": "run",
    "add_hook": "stages",
    "call_turn": "run",
    "prepare_turn": "run",
    "remove_hook": "stages",
    "stop_running_turns": "shutdown",
    "stream_turn": "run",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
