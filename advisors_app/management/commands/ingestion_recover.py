"""``manage.py ingestion_recover``: queue again, or fail, the ingestion jobs of dead workers.

A worker killed outright leaves the job it ran ``running``; this finds every such job from what
the database holds (no session holds the job's lock: :mod:`advisors_app.ingestion.recovery`) and
puts it back in the queue, or fails it once its task was claimed ``--max-attempts`` times
(default ``ADVISORS["INGESTION_MAX_ATTEMPTS"]``). Jobs whose worker is alive are left alone, so it
is safe at any time, from cron or by hand; every ``db_worker`` also does it as it starts. Prints
one line per job recovered.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from advisors_app.ingestion.recovery import recover_jobs


class Command(BaseCommand):
    help = "Queue again, or fail, the ingestion jobs whose worker died."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--max-attempts",
            type=int,
            default=None,
            help="Fail a job whose task was claimed this many times "
            "(default: ADVISORS['INGESTION_MAX_ATTEMPTS']).",
        )

    def handle(self, *args: Any, max_attempts: int | None, **options: Any) -> None:
        if max_attempts is not None and max_attempts < 1:
            raise CommandError(f"--max-attempts {max_attempts} must be 1 or more.")
        recoveries = recover_jobs(max_attempts)
        for recovery in recoveries:
            self.stdout.write(str(recovery))
        if not recoveries:
            self.stdout.write("No ingestion job is stranded.")
