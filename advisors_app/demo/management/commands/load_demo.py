"""``manage.py load_demo [--force]``: load the demo models, collection, word list and chains.

Idempotent and fast when the demo is already loaded (see :mod:`advisors_app.demo.loader`);
``scripts/demo.sh`` runs it on every start through ``advisors_setup``. A progress bar shows
the chunks being embedded on the first run.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from advisors_app.demo.loader import COLLECTION, load_demo


class Command(BaseCommand):
    help = "Load the demo: Python Language Reference collection, chains, tools (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--force",
            action="store_true",
            help="Restore the demo rows to their shipped content and re-embed the collection.",
        )

    def handle(self, *args: Any, force: bool, **options: Any) -> None:
        quiet = options["verbosity"] == 0
        started = time.perf_counter()
        bars: list[tqdm[Any]] = []

        def progress(done: int, total: int) -> None:
            # Made on first use: a run with nothing to embed shows no bar.
            if not bars:
                bars.append(tqdm(desc=f"Embedding {COLLECTION}", unit="chunk", disable=quiet))
            bars[0].total = total
            bars[0].update(done - bars[0].n)

        try:
            report = load_demo(force=force, progress=progress)
        finally:
            for bar in bars:
                bar.close()
        if quiet:
            return
        elapsed = time.perf_counter() - started
        for what in report.created:
            self.stdout.write(f"Created {what}")
        for what in report.reset:
            self.stdout.write(f"Reset {what}")
        if report.collection_up_to_date:
            state = "up to date"
        else:
            state = f"{report.embedded} embedded, {report.removed} removed"
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo loaded in {elapsed:.1f} s: collection {COLLECTION} has "
                f"{report.chunks} chunks from {report.topics} topics ({state}); chains "
                "python-docs, python-docs-json and notes."
            )
        )
