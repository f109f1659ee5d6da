"""``manage.py turn_recover``: mark the messages of turns whose process died interrupted, and
release their budget reservations.

A server killed mid-turn (``SIGKILL``, the OOM killer, a lost machine) leaves the user's message
stored pending and the turn's budget reservations held (:mod:`advisors_app.turn.recovery`). This
finds them — the turns of this host's processes that no longer run, and every turn pending for
longer than ``ADVISORS["PENDING_TURN_SECONDS"]`` — marks their messages interrupted and releases
their reservations. Live turns are left alone, so it is safe at any time, from cron or by hand;
every server and ``db_worker`` also does it as it starts. Prints what it did.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from advisors_app.turn.recovery import recover_turns


class Command(BaseCommand):
    help = (
        "Mark the messages of turns whose process died interrupted and release their budget "
        "reservations."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(str(recover_turns()))
