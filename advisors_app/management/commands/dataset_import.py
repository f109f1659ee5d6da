"""``manage.py dataset_import FILE [--slug SLUG] [--name NAME] [--prune]``: load evaluation items.

``FILE`` is a JSON list of ``{"key"?, "input": {"message", "history"?, "params"?}, "expected":
{"output"?, "json"?, "documents"?, "tool_calls"?}, "tags"?}``, or ``{"name"?, "description"?,
"items": [...]}`` (:mod:`advisors_app.evaluation.datasets`); the dataset's slug is the file
name without its extension unless ``--slug`` is given, and the dataset is created when new.
Its name is ``--name``, else the file's ``"name"``, else the slug; its description the file's
``"description"``: a name or description given replaces the dataset's when it differs. Items
are upserted by key: a changed item gets a new version (the old one stays for runs *as of*
before), an unchanged one stays; ``--prune`` removes (closes) current items the file does not
name. Every problem of the file is reported at once and nothing is stored then.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_slug
from django.utils.text import slugify

from advisors_app.evaluation.datasets import dataset_fields, import_items, parse_items
from advisors_app.models import Dataset


class Command(BaseCommand):
    help = "Import evaluation items from a JSON file into a dataset (upsert by key)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="A JSON file: a list of items.")
        parser.add_argument("--slug", help="The dataset's slug (default: the file's name).")
        parser.add_argument(
            "--name", help="The dataset's name (default: the file's \"name\", else the slug)."
        )
        parser.add_argument(
            "--prune", action="store_true", help="Remove current items the file does not name."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        try:
            data = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_unique_keys)
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc}") from exc
        except ValueError as exc:
            raise CommandError(f"{path} is not JSON: {exc}") from exc
        slug = options["slug"] or slugify(path.stem)
        if not slug:
            raise CommandError(f"Cannot make a slug of {path.name!r}: give --slug.")
        try:
            validate_slug(slug)
        except ValidationError:
            raise CommandError(
                f"--slug {slug!r}: use letters, digits, '-' and '_' only (a slug)."
            ) from None
        try:
            items = parse_items(data)
        except ValueError as exc:
            raise CommandError(f"{path}:\n{exc}") from exc
        given = dataset_fields(data)
        if options["name"]:
            given["name"] = options["name"]
        dataset, created = Dataset.objects.get_or_create(
            slug=slug, defaults={"name": slug, **given}
        )
        changed = [field for field, value in given.items() if getattr(dataset, field) != value]
        if changed:
            Dataset.objects.filter(pk=dataset.pk).update(**given)
        report = import_items(dataset, items, prune=options["prune"])
        made = " (new dataset)" if created else ""
        if changed:
            made = f" ({' and '.join(changed)} updated)"
        self.stdout.write(f"Dataset {slug!r}{made}: {report}.")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice (Python keeps the last one silently)."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"the key {key!r} appears twice in one object")
        found[key] = value
    return found
