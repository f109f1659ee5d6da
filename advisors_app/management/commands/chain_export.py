"""``manage.py chain_export SLUG``: a chain's snapshot as JSON, to keep configurations in git.

Prints the snapshot (:mod:`advisors_app.definition.snapshot`) as indented canonical JSON:
sorted keys, two-space indent, UTF-8, so a file written twice from the same configuration is
byte-identical and a git diff shows what changed. Which snapshot: ``--version N``,
``--label NAME`` or ``--draft``; by default the version the ``production`` label points at, or
the draft when the chain has never been published. ``--output FILE`` writes the file instead of
stdout. A one-line summary (which snapshot, its SHA-256) goes to stderr when the JSON goes to
stdout, so the output can be piped to a file or to ``chain_import -``. ``chain_import`` reads
the result back, in this database or another.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from advisors_app.definition import canonical_json, resolve_draft, snapshot_hash
from advisors_app.models import PRODUCTION, AdvisorChain


def _chain(slug: str) -> AdvisorChain:
    chain = AdvisorChain.objects.filter(slug=slug).select_related("chat_model").first()
    if chain is None:
        raise CommandError(f"no chain {slug!r}: check the slug (the admin lists every chain)")
    return chain


def _version_snapshot(chain: AdvisorChain, number: int) -> tuple[str, Mapping[str, Any]]:
    version = chain.versions.filter(number=number).first()
    if version is None:
        numbers = sorted(chain.versions.values_list("number", flat=True))
        if not numbers:
            known = "it has no versions yet"
        elif len(numbers) == 1:
            known = f"it has only v{numbers[0]}"
        else:
            known = f"it has v{numbers[0]} to v{numbers[-1]}"
        raise CommandError(f"chain {chain.slug!r} has no version {number} ({known})")
    return f"v{version.number}", version.snapshot


def _label_snapshot(chain: AdvisorChain, name: str) -> tuple[str, Mapping[str, Any]]:
    label = chain.labels.select_related("version").filter(name=name).first()
    if label is None:
        labels = ", ".join(
            f"{lab.name} (v{lab.version.number})"
            for lab in chain.labels.select_related("version").order_by("name")
        )
        raise CommandError(
            f"chain {chain.slug!r} has no label {name!r} (labels: {labels or 'none'})"
        )
    return f"v{label.version.number} ({name})", label.version.snapshot


def _default_snapshot(chain: AdvisorChain) -> tuple[str, Mapping[str, Any]]:
    if chain.labels.filter(name=PRODUCTION).exists():
        return _label_snapshot(chain, PRODUCTION)
    return "the draft (never published)", resolve_draft(chain)


class Command(BaseCommand):
    help = (
        "Print a chain's snapshot as canonical JSON: the production version by default, or "
        "--version N, --label NAME, --draft. Read it back with chain_import."
    )

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # Every command gets Django's --version (print Django's version); --version N, as the
        # command is documented, replaces it here.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="Slug of the chain, e.g. python-docs.")
        which = parser.add_mutually_exclusive_group()
        which.add_argument(
            "--chain-version",
            "--version",  # the first spelling, kept
            dest="version",
            type=int,
            metavar="N",
            help="Export version N.",
        )
        which.add_argument(
            "--label", metavar="NAME", help="Export the version label NAME points at."
        )
        which.add_argument(
            "--draft", action="store_true", help="Export the draft (the editable rows)."
        )
        parser.add_argument(
            "--output", "-o", metavar="FILE", help="Write the JSON to FILE instead of stdout."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        chain = _chain(options["slug"])
        if options["version"] is not None:
            what, snapshot = _version_snapshot(chain, options["version"])
        elif options["label"] is not None:
            what, snapshot = _label_snapshot(chain, options["label"])
        elif options["draft"]:
            what, snapshot = "the draft", resolve_draft(chain)
        else:
            what, snapshot = _default_snapshot(chain)
        text = canonical_json(snapshot, indent=2) + "\n"
        summary = f"Exported chain {chain.slug!r}: {what}, sha256 {snapshot_hash(snapshot)}."
        output = options["output"]
        if output:
            try:
                Path(output).write_text(text, encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from exc
            if options["verbosity"] > 0:
                self.stdout.write(f"{summary} Written to {output}.")
            return
        self.stdout.write(text, ending="")
        if options["verbosity"] > 0:
            # stderr, so that stdout stays the JSON alone.
            self.stderr.write(summary, style_func=self.style.NOTICE)
