"""Turns whose process died mid-turn: their messages marked interrupted, their budget
reservations released.

A turn stores its user's message before its chain runs (pending, :mod:`advisors_app.memory.pending`)
and reserves its model calls on its budgets (a :class:`~advisors_app.models.BudgetReservation`
row per budget, :mod:`advisors_app.costs.reservations`); its finish replaces the one and settles
the other. A process killed mid-turn (``SIGKILL``, the OOM killer, a lost machine) does
neither. Both rows name the process that ran the turn (``"<host>:<pid>"``, :func:`this_process`).

**When is a turn's process gone?** Two rules, no heartbeat:

* **at start-up** — a server (``daphne``, ``uvicorn``, ``gunicorn``, ``hypercorn``,
  ``runserver``) or a ``db_worker`` as it first connects to the database (:func:`connect`,
  before its first turn goes on) — a process recovers the turns of *this host's* dead
  processes: a pid that no longer runs here, or its own pid on a turn older than itself (a dead
  predecessor's). That is exact for a server restarted on its machine, and never touches a live
  turn of another process on this host, nor any turn of another host (so ``manage.py
  turn_recover`` applies it too, at any time);
* **by age**, everywhere: a turn pending for longer than ``ADVISORS["PENDING_TURN_SECONDS"]``
  (default 900) — readers show its message as interrupted at once, and ``manage.py
  turn_recover`` (cron, or by hand) marks it and releases its reservations. A turn still
  running past that age is not stopped: its finish replaces its message as usual, and it
  releases nothing twice (what a turn releases is what its reservation row still holds).

Caveat: the start-up rule trusts that a host name and pid identify a process — two containers
given the same host name and sharing the database must not share a pid namespace view; the age
rule holds regardless.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.db import connection
from django.db.backends.signals import connection_created
from django.utils import timezone

from advisors_app.core.memory import INTERRUPTED
from advisors_app.costs.reservations import release_stranded
from advisors_app.memory.pending import mark_interrupted, stale_before
from advisors_app.models import BudgetReservation, ChatMessage
from advisors_app.stores.memory import TURN_PENDING

__all__ = ["TurnRecovery", "connect", "recover_at_start", "recover_turns", "this_process"]

logger = logging.getLogger(__name__)
_AT_START = "advisors_app.turn.recovery.at_start"
#: When this process loaded the app: a turn of its pid older than that is a predecessor's.
_STARTED = timezone.now()
#: Programs that serve turns (``python -m <name>`` too).
_SERVERS = frozenset({"daphne", "uvicorn", "gunicorn", "hypercorn"})
#: ``manage.py`` commands that run turns.
_COMMANDS = frozenset({"db_worker", "runserver"})


def this_process() -> str:
    """``"<host>:<pid>"`` of this process: what a turn's pending message and reservations name."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class TurnRecovery:
    """What :func:`recover_turns` did: messages marked interrupted, reservations released."""

    messages: int
    reservations: int

    def __str__(self) -> str:
        return (
            f"{self.messages} pending message(s) marked interrupted, "
            f"{self.reservations} budget reservation(s) released"
        )


def _runs_here(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it runs
        return True
    return True


def _gone(owner: Any, when: datetime, stale: datetime) -> bool:
    """Whether the turn of ``owner`` (``"<host>:<pid>"``), started or last reserving at
    ``when``, no longer runs (the module's two rules)."""
    if when < stale:
        return True
    if not isinstance(owner, str):
        return False
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return when < _STARTED
    return not _runs_here(int(pid))


def recover_turns(*, now: datetime | None = None) -> TurnRecovery:
    """Mark the pending messages of gone turns interrupted and release their reservations
    (see the module docstring: this host's dead processes, and every turn older than
    ``ADVISORS["PENDING_TURN_SECONDS"]`` at ``now``). Safe at any time and in several
    processes at once: a live turn is left alone, each reservation released once."""
    stale = stale_before(now)
    pending = (
        ChatMessage.objects.filter(metadata__has_key=TURN_PENDING)
        .exclude(metadata__has_key=INTERRUPTED)
        .values_list("pk", "metadata", "created_at")
    )
    dead = [
        pk
        for pk, metadata, created_at in pending
        if _gone(metadata.get(TURN_PENDING), created_at, stale)
    ]
    held = BudgetReservation.objects.values_list("pk", "owner", "updated_at")
    stranded = [pk for pk, owner, updated_at in held if _gone(owner, updated_at, stale)]
    return TurnRecovery(mark_interrupted(dead), release_stranded(stranded))


def recover_at_start() -> None:
    """Recover the turns of this host's dead processes (and the stale ones) now, on a
    connection of its own, logging what was done; a failure is logged, never raised (a
    database not migrated yet, say)."""
    worker = threading.Thread(target=_recover_logged, name="turn-recover")
    worker.start()
    worker.join()


def _recover_logged() -> None:
    try:
        recovery = recover_turns()
        if recovery.messages or recovery.reservations:
            logger.warning("Turns of a dead process: %s", recovery)
    except Exception:
        logger.exception("Could not recover the turns of dead processes")
    finally:
        connection.close()


def _serves_turns(argv: list[str]) -> bool:
    """Whether the process of ``argv`` serves or runs turns (a server, a task worker)."""
    if not argv:
        return False
    if set(argv[1:2]) & _COMMANDS:
        return True
    program = Path(argv[0])
    name = program.parent.name if program.name == "__main__.py" else program.name
    return name in _SERVERS


def connect() -> None:
    """In a process that serves turns — an ASGI server, ``runserver``, a ``db_worker`` (which
    runs resumed turns) — recover as it first connects to the database (:func:`recover_at_start`,
    before that connection's first query). Called from the app's ``ready()``; other processes
    (``manage.py`` commands, tests) are left alone."""
    if _serves_turns(sys.argv):
        connection_created.connect(_at_first_connection, dispatch_uid=_AT_START)


def _at_first_connection(**_: Any) -> None:
    connection_created.disconnect(dispatch_uid=_AT_START)
    recover_at_start()
