"""``manage.py ingest COLLECTION PATH...``: read, split, embed and store documents.

Files (``.txt``, ``.md``, ``.html``, ``.pdf``) or directories (searched recursively) become
the sources of a collection, named by their path relative to the directory given (or the file
name). Idempotent: running it again embeds only changed chunks and removes vanished ones. A
progress bar (tqdm) shows the chunks being embedded. Each file is read within the parsing limits
(``ADVISORS["INGESTION_*"]``, the CPU time per file).

``--async`` reads the files here but leaves the work to a task worker (``manage.py db_worker``):
it stores one ingestion job with every file and prints it as JSON (``{"id", "status", ...}``),
as ``POST /api/documents/`` answers; the admin's ingestion jobs page follows it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from advisors_app.core.ingestion import SUPPORTED_SUFFIXES, TokenTextSplitter
from advisors_app.core.ingestion.splitter import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE
from advisors_app.ingestion.jobs import Upload, submit_job
from advisors_app.ingestion.parsing import check_supported
from advisors_app.ingestion.pipeline import DEFAULT_BATCH_SIZE, ingest_file
from advisors_app.models import Collection


def _sources(paths: list[str]) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for file in sorted(path.rglob("*")):
                if file.is_file() and file.suffix.lower() in SUPPORTED_SUFFIXES:
                    found.append((file, file.relative_to(path).as_posix()))
        elif path.is_file():
            found.append((path, path.name))
        else:
            raise CommandError(f"{given}: no such file or directory")
    return found


class Command(BaseCommand):
    help = "Ingest text, Markdown, HTML and PDF files into a document collection (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("collection", help="Slug of the collection.")
        parser.add_argument("paths", nargs="+", help="Files or directories to ingest.")
        parser.add_argument(
            "--create", action="store_true", help="Create the collection if it does not exist."
        )
        parser.add_argument("--owner", help="Username owning the chunks (default: shared).")
        parser.add_argument("--tenant", help="Tenant label stamped on the chunks.")
        parser.add_argument(
            "--metadata",
            default="{}",
            help='JSON object added to every chunk, e.g. \'{"lang": "en"}\'.',
        )
        parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE)
        parser.add_argument("--chunk-overlap", type=int, default=DEFAULT_CHUNK_OVERLAP)
        parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
        parser.add_argument(
            "--async",
            action="store_true",
            dest="background",
            help="Queue one ingestion job for a task worker and print it (JSON), instead of "
            "ingesting here.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        slug = options["collection"]
        if options["create"]:
            collection, _ = Collection.objects.get_or_create(slug=slug, defaults={"name": slug})
        else:
            try:
                collection = Collection.objects.get(slug=slug)
            except Collection.DoesNotExist:
                raise CommandError(
                    f"no collection {slug!r}; create it in the admin or pass --create"
                ) from None
        try:
            metadata = json.loads(options["metadata"])
        except json.JSONDecodeError as error:
            raise CommandError(f"--metadata is not JSON: {error}") from error
        if not isinstance(metadata, dict):
            raise CommandError("--metadata must be a JSON object")
        owner = None
        if options["owner"]:
            try:
                owner = get_user_model().objects.get_by_natural_key(options["owner"])
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user {options['owner']!r}") from None
        try:
            splitter = TokenTextSplitter(options["chunk_size"], options["chunk_overlap"])
        except ValueError as error:
            raise CommandError(str(error)) from error
        sources = _sources(options["paths"])
        if options["background"]:
            self._submit(collection, sources, owner, metadata, options)
            return
        quiet = options["verbosity"] == 0
        for path, name in sources:
            with tqdm(desc=name, unit="chunk", disable=quiet, leave=False) as bar:

                def progress(done: int, total: int, bar: Any = bar) -> None:
                    bar.total = total
                    bar.update(done - bar.n)

                try:
                    result = ingest_file(
                        collection,
                        path,
                        name,
                        metadata=metadata,
                        owner=owner,
                        tenant=options["tenant"],
                        splitter=splitter,
                        batch_size=options["batch_size"],
                        progress=progress,
                    )
                except ValueError as error:
                    raise CommandError(f"{name}: {error}") from error
            if not quiet:
                self.stdout.write(str(result))

    def _submit(
        self,
        collection: Collection,
        sources: list[tuple[Path, str]],
        owner: Any,
        metadata: dict[str, Any],
        options: dict[str, Any],
    ) -> None:
        uploads = []
        for path, name in sources:
            try:
                check_supported(name)
            except ValueError as error:
                raise CommandError(str(error)) from error
            uploads.append(Upload(name, path.read_bytes()))
        job = submit_job(
            collection,
            uploads,
            owner=owner,
            tenant=options["tenant"],
            metadata=metadata,
            options={
                "chunk_size": options["chunk_size"],
                "chunk_overlap": options["chunk_overlap"],
                "batch_size": options["batch_size"],
            },
        )
        self.stdout.write(json.dumps(job.progress()))
