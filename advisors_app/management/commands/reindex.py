"""``manage.py reindex COLLECTION``: rebuild a collection's embeddings and lexical index.

Run it after changing the collection's text search configuration (admin: *Collections*), or
with ``--context`` after changing how context lines are made. ``--lexical`` rebuilds only the
full-text index (no embedding: seconds for thousands of chunks).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from advisors_app.ingestion.reindex import DEFAULT_CONTEXTUALIZER, reindex_collection


class Command(BaseCommand):
    help = "Rebuild the embeddings and the full-text index of a document collection."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("collection", help="Slug of the collection.")
        parser.add_argument(
            "--lexical", action="store_true", help="Only the full-text index (no embedding)."
        )
        parser.add_argument(
            "--context",
            action="store_true",
            help="Recompute each chunk's context line (title and heading path) first.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        def progress(done: int, total: int) -> None:
            if options["verbosity"] > 1:
                self.stdout.write(f"{done}/{total}")

        try:
            result = reindex_collection(
                options["collection"],
                lexical_only=options["lexical"],
                contextualizer=DEFAULT_CONTEXTUALIZER if options["context"] else None,
                progress=progress,
            )
        except ValueError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"{options['collection']}: {result}")
