"""A user's message stored before its turn ran: pending while the turn runs, interrupted once
its process is gone.

A turn stores its user's message before the chain runs, flagged ``turn_pending``
(:data:`~advisors_app.stores.memory.TURN_PENDING`, holding the ``"<host>:<pid>"`` of the process
running it), and its one write replaces that row (:mod:`advisors_app.turn.finish`). A row still
flagged is of a turn that is running, or that never finished: its process was killed
(``SIGKILL``, the OOM killer, a lost machine). :func:`message_state` tells which, for every
reader that shows messages to people (the REST history, the chat page, the admin transcript):

* ``"interrupted"`` — marked so (:func:`mark_interrupted`: by the recovery of turns whose
  process died, :mod:`advisors_app.turn.recovery`, or by a turn whose write failed), or pending
  for longer than ``ADVISORS["PENDING_TURN_SECONDS"]`` (a process on another machine that
  died: nothing here can ask it);
* ``"pending"`` — its turn may still be running;
* ``None`` — any other message.

The model never sees such a message as history (:func:`~advisors_app.stores.memory.unanswered`):
a turn is stored whole, or its message alone, marked.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from advisors_app.conf import app_settings
from advisors_app.core.memory import FINISH_REASON, INTERRUPTED
from advisors_app.models import ChatMessage
from advisors_app.stores.memory import TURN_PENDING, unanswered

__all__ = [
    "INTERRUPTED_STATE",
    "PENDING_STATE",
    "SERVER_STOPPED",
    "mark_interrupted",
    "message_state",
    "public_metadata",
    "stale_before",
]

PENDING_STATE = "pending"
INTERRUPTED_STATE = "interrupted"
#: ``metadata["finish_reason"]`` of a message whose turn's process stopped before the turn
#: could end.
SERVER_STOPPED = "server_stopped"


def stale_before(now: datetime | None = None) -> datetime:
    """Pending messages stored before this are taken as interrupted."""
    now = now or timezone.now()
    return now - timedelta(seconds=app_settings.PENDING_TURN_SECONDS)


def message_state(
    metadata: Any, created_at: datetime | None, now: datetime | None = None
) -> str | None:
    """``"pending"``, ``"interrupted"`` or ``None`` for a stored message (see the module
    docstring); an interrupted reply (``metadata["interrupted"]``) is ``"interrupted"`` too."""
    if not isinstance(metadata, dict):
        return None
    if metadata.get(INTERRUPTED):
        return INTERRUPTED_STATE
    if not unanswered(metadata):
        return None
    if created_at is not None and created_at < stale_before(now):
        return INTERRUPTED_STATE
    return PENDING_STATE


def public_metadata(metadata: Any) -> Any:
    """``metadata`` as users may read it: without the process that ran the turn."""
    if isinstance(metadata, dict) and TURN_PENDING in metadata:
        return {key: value for key, value in metadata.items() if key != TURN_PENDING}
    return metadata


def mark_interrupted(pks: Sequence[int], reason: str = SERVER_STOPPED) -> int:
    """Blocking, one statement: mark the pending messages ``pks`` interrupted (``reason`` as
    their finish reason); how many were still pending (a turn that finished meanwhile has
    replaced its row: nothing to mark)."""
    if not pks:
        return 0
    flags = json.dumps({INTERRUPTED: True, FINISH_REASON: reason})
    table = connection.ops.quote_name(ChatMessage._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET metadata = metadata || %s::jsonb "
            f"WHERE id = ANY(%s) AND metadata ? %s",
            [flags, list(pks), TURN_PENDING],
        )
        return cursor.rowcount
