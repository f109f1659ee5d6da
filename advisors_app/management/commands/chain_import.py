"""``manage.py chain_import FILE``: load a snapshot written by ``chain_export`` as a chain's draft.

``FILE`` (``-`` for stdin) must hold one snapshot of the current format
(:data:`~advisors_app.definition.SNAPSHOT_FORMAT`); anything else — not JSON, not an object, an
older format, a missing or unknown key, a value of the wrong type — is refused before the
database is touched, with the field named. The chain named by the snapshot's ``slug`` is
created when missing (its name is the slug); its draft rows are then made to say what the
snapshot says (:func:`~advisors_app.definition.apply_snapshot`): referenced templates and word
lists that do not exist here are created from the snapshot's content, existing ones are left
as they are (other chains share them) and the notes say so.

``--publish`` then publishes the draft (the lint's errors are printed and the exit status is 1
when it is refused, and when the draft differs from the file: a deployment never publishes
rows the file does not hold; the imported draft stays); ``--label NAME`` publishes too and
moves label ``NAME`` to the version (reason ``chain_import``). The command prints what it did:
chain created or updated, the draft's SHA-256 (and a warning when it differs from the file's,
e.g. because a template here has other text), the version number and whether it is new.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import slug_re
from django.db import transaction

from advisors_app.definition import (
    SNAPSHOT_FORMAT,
    PublishError,
    apply_snapshot,
    move_label,
    publish,
    resolve_draft,
    snapshot_hash,
)
from advisors_app.models import AdvisorChain, PromptTemplate
from advisors_app.models.versions import LABEL_NAME_VALIDATOR
from advisors_app.validation import schema_errors

#: The keys of a snapshot of format ``SNAPSHOT_FORMAT``, as ``resolve_draft`` writes them (a
#: test keeps the two in step). Unknown keys are refused rather than dropped: the draft could
#: not hold them, so the published hash would silently differ from the file's.
SNAPSHOT_KEYS = (
    "advisors",
    "chat_model",
    "default_chat_model",
    "default_options",
    "format",
    "references",
    "slug",
    "system_prompt",
    "system_template",
    "tools",
)

#: A slug as the models store it (``SlugField(max_length=100)``).
_SLUG = {"type": "string", "pattern": slug_re.pattern, "maxLength": 100}
#: ``AdvisorConfig.order``: a 32-bit integer column.
_ORDER = {"type": ["integer", "null"], "minimum": -(2**31), "maximum": 2**31 - 1}
#: ``SensitiveWordList.words``: up to 200 characters a word.
_WORDS = {"type": "array", "items": {"type": "string", "maxLength": 200}}

#: The shape ``apply_snapshot`` relies on. What the values mean (advisor types, their params,
#: orders, references) is the lint's to judge when the draft is published.
SNAPSHOT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": list(SNAPSHOT_KEYS),
    "additionalProperties": False,
    "properties": {
        "format": {"const": SNAPSHOT_FORMAT},
        "slug": _SLUG,
        # null: the deployment's default chat model (a chain without a model of its own).
        "chat_model": {"type": ["string", "null"], "minLength": 1},
        "default_chat_model": {"type": ["string", "null"]},
        "system_prompt": {"type": "string"},
        "system_template": {"anyOf": [_SLUG, {"type": "null"}]},
        "default_options": {"type": "object"},
        "tools": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 100}},
            },
        },
        "advisors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "order", "enabled", "params"],
                "additionalProperties": False,
                "properties": {
                    "type": {"type": "string", "minLength": 1},
                    "order": _ORDER,
                    "enabled": {"type": "boolean"},
                    "params": {},
                },
            },
        },
        "references": {
            "type": "object",
            # "kind:slug"; the rows created from a reference get its slug, so those must be slugs.
            "propertyNames": {
                "anyOf": [
                    {"pattern": "^(prompt_template|word_list):[-a-zA-Z0-9_]{1,100}$"},
                    {"pattern": "^(?!prompt_template:|word_list:)[a-z_]+:.+$"},
                ]
            },
            "additionalProperties": {"type": ["object", "null"]},
            # The two kinds apply_snapshot creates rows from (null: missing where exported).
            "patternProperties": {
                "^prompt_template:": {
                    "type": ["object", "null"],
                    "required": ["text"],
                    "properties": {"text": {"type": "string"}},
                },
                "^word_list:": {
                    "type": ["object", "null"],
                    "required": ["words"],
                    "properties": {"words": _WORDS},
                },
            },
        },
    },
}

IMPORT_REASON = "chain_import"

#: ``ChainVersion.message``'s length.
MESSAGE_MAX_LENGTH = 500


def _read(path: str, stdin: Any) -> str:
    if path == "-":
        return str(stdin.read())
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path} is not UTF-8 text: {exc}") from exc
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from exc


def load_snapshot(text: str, source: str) -> dict[str, Any]:
    """The snapshot in ``text`` (read from ``source``), checked against :data:`SNAPSHOT_SCHEMA`.

    Raises ``CommandError`` naming ``source`` and what is wrong: not JSON (line and column),
    not an object, another format, or each field that is missing, unknown or of the wrong type.
    """
    try:
        snapshot = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(
            f"{source} is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "export a chain with `manage.py chain_export SLUG`"
        ) from exc
    if not isinstance(snapshot, dict):
        raise CommandError(
            f"{source} holds a JSON {type(snapshot).__name__}, not a chain snapshot (a JSON "
            "object, as `manage.py chain_export` writes it)"
        )
    found = snapshot.get("format")
    if found != SNAPSHOT_FORMAT:
        said = "has no 'format' key" if "format" not in snapshot else f"has format {found!r}"
        raise CommandError(
            f"{source} {said}; this version reads snapshot format {SNAPSHOT_FORMAT}: export "
            "the chain again with this version's `manage.py chain_export`"
        )
    errors = schema_errors(SNAPSHOT_SCHEMA, snapshot)
    if errors:
        listing = "; ".join(
            f"{field or '(snapshot)'}: {' '.join(messages)}"
            for field, messages in sorted(errors.items())
        )
        raise CommandError(f"{source} is not a valid chain snapshot: {listing}")
    template = snapshot["system_template"]
    if (
        template
        and snapshot["references"].get(f"prompt_template:{template}") is None
        and not PromptTemplate.objects.filter(slug=template).exists()
    ):
        raise CommandError(
            f"{source}: the system template {template!r} has no text in the snapshot (it was "
            "missing where the chain was exported) and does not exist here; create it first"
        )
    return snapshot


class Command(BaseCommand):
    help = (
        "Load a snapshot written by chain_export as a chain's draft (creating the chain and "
        "missing templates and word lists); --publish to publish it, --label NAME to also "
        "point a label at it."
    )
    # call_command(..., stdin=StringIO(...)) feeds "-", as for createsuperuser.
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", metavar="FILE", help="The snapshot's JSON file; - for stdin.")
        parser.add_argument(
            "--publish", action="store_true", help="Publish the imported draft as a version."
        )
        parser.add_argument(
            "--label",
            metavar="NAME",
            help="Publish, then point label NAME (e.g. production, staging) at the version.",
        )
        parser.add_argument(
            "--message",
            metavar="TEXT",
            help="The version's message (default: 'Imported from FILE').",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        source = options["file"]
        label = options["label"]
        if label is not None:
            try:
                LABEL_NAME_VALIDATOR(label)
            except ValidationError as exc:
                raise CommandError(f"--label {label!r}: {' '.join(exc.messages)}") from exc
        name = "stdin" if source == "-" else source
        message = options["message"]
        if message is None:
            message = f"Imported from {name}"[:MESSAGE_MAX_LENGTH]
        elif len(message) > MESSAGE_MAX_LENGTH:
            raise CommandError(
                f"--message is {len(message)} characters long; at most {MESSAGE_MAX_LENGTH}"
            )
        snapshot = load_snapshot(_read(source, options.get("stdin") or sys.stdin), name)

        chain, as_in_file = self._import(snapshot)
        if options["publish"] or label is not None:
            if not as_in_file:
                # Publishing would serve rows of this installation that the file does not
                # hold (another template text, say): a deployment must not do that silently.
                raise CommandError(
                    f"chain {chain.slug!r} was not published: its draft differs from the file "
                    "(see the warning above). The imported draft is kept; make the rows say "
                    "what the file says, or review the diff and publish in the admin."
                )
            self._publish(chain, label, message)

    def _import(self, snapshot: Mapping[str, Any]) -> tuple[AdvisorChain, bool]:
        slug = snapshot["slug"]
        with transaction.atomic():
            chain, created = AdvisorChain.objects.get_or_create(slug=slug, defaults={"name": slug})
            notes = apply_snapshot(chain, snapshot)
            draft_hash = snapshot_hash(resolve_draft(chain))
        style = self.style
        did = "Created chain" if created else "Updated the draft of chain"
        self.stdout.write(style.SUCCESS(f"{did} {slug!r}."))
        for note in notes:
            self.stdout.write(style.WARNING(f"Note: {note}."))
        file_hash = snapshot_hash(snapshot)
        if draft_hash == file_hash:
            self.stdout.write(f"Draft sha256 {draft_hash} (as in the file).")
        else:
            self.stdout.write(
                style.WARNING(
                    f"Draft sha256 {draft_hash} differs from the file's {file_hash}: rows here "
                    "under the same names say something else (see the notes above), or this "
                    "installation's tools have other schemas. Compare the file with "
                    f"`manage.py chain_export {slug} --draft`."
                )
            )
        return chain, draft_hash == file_hash

    def _publish(self, chain: AdvisorChain, label: str | None, message: str) -> None:
        style = self.style
        try:
            version, created = publish(chain, message=message)
        except PublishError as exc:
            for problem in exc.messages:
                self.stderr.write(f"{problem.id}: {problem}")
            raise CommandError(
                f"chain {chain.slug!r} was not published: its draft has "
                f"{len(exc.messages)} error(s), listed above. The imported draft is kept; fix "
                "it and import again."
            ) from exc
        if created:
            self.stdout.write(
                style.SUCCESS(f"Published v{version.number}, sha256 {version.snapshot_hash}.")
            )
        else:
            self.stdout.write(
                f"Nothing new to publish: v{version.number} already holds this draft "
                f"(sha256 {version.snapshot_hash})."
            )
        if label is None:
            return
        before = chain.labels.filter(name=label).values_list("version__number", flat=True).first()
        move_label(chain, label, version, reason=IMPORT_REASON)
        if before == version.number:
            self.stdout.write(f"Label {label!r} already points at v{version.number}.")
        elif before is None:
            self.stdout.write(style.SUCCESS(f"Label {label!r} now points at v{version.number}."))
        else:
            self.stdout.write(
                style.SUCCESS(f"Moved label {label!r} from v{before} to v{version.number}.")
            )
