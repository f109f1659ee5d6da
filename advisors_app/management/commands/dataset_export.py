"""``manage.py dataset_export SLUG [--as-of TIME] [--output FILE]``: a dataset's items as JSON.

Prints (or writes to ``--output``) the JSON list ``dataset_import`` reads, of the items as
they are now or as they were at ``--as-of`` (an ISO date or date and time), by key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from advisors_app.evaluation.datasets import export_items
from advisors_app.models import Dataset


class Command(BaseCommand):
    help = "Export a dataset's items as JSON (the shape dataset_import reads)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="The dataset's slug.")
        parser.add_argument("--as-of", help="The items as they were then (ISO date/time).")
        parser.add_argument("--output", "-o", help="Write to this file instead of stdout.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            dataset = Dataset.objects.get(slug=options["slug"])
        except Dataset.DoesNotExist:
            raise CommandError(f"No dataset {options['slug']!r}.") from None
        at = None
        if options["as_of"]:
            try:
                at = parse_datetime(options["as_of"].strip())
            except ValueError:
                at = None
            if at is None:
                raise CommandError(
                    f"--as-of {options['as_of']!r} is not a date: give an ISO date or time."
                )
            if timezone.is_naive(at):
                at = timezone.make_aware(at)
        text = json.dumps(export_items(dataset, at), indent=2, ensure_ascii=False) + "\n"
        if options["output"]:
            Path(options["output"]).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text, ending="")
