"""Publishing, labels, rollback and restore: the version workflow every transport shares.

The admin, the REST API and the management commands call these functions; permission checks
(:func:`can_publish`, :func:`can_move_label`) are theirs to make, with the same rules
everywhere. Every write runs in one transaction with the chain row locked, so two people
publishing at once get consecutive numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from advisors_app.conf import app_settings
from advisors_app.core.templates import PromptTemplate as CorePromptTemplate
from advisors_app.definition.registry import advisor_types
from advisors_app.exceptions import Refusal
from advisors_app.models import (
    PRODUCTION,
    AdvisorChain,
    AdvisorConfig,
    ChainLabel,
    ChainLabelEvent,
    ChainVersion,
    ChatModelConfig,
    Collection,
    McpServer,
    PromptTemplate,
    SensitiveWordList,
)

from .compile import ChainConfigurationError, CompiledChain, compile_snapshot
from .lint import LintMessage, lint
from .snapshot import references_of, resolve_draft, snapshot_hash

__all__ = [
    "Checked",
    "PublishError",
    "VersionLookupError",
    "apply_snapshot",
    "can_move_label",
    "can_publish",
    "check",
    "check_draft",
    "move_label",
    "publish",
    "resolve_snapshot",
    "restore_to_draft",
    "rollback",
    "rollback_target",
]


@dataclass(frozen=True)
class Checked:
    """A snapshot after lint and compile: its hash, every finding, and the built chain (``None``
    when an error stopped it)."""

    snapshot: Mapping[str, Any]
    snapshot_hash: str
    messages: tuple[LintMessage, ...]
    compiled: CompiledChain | None

    @property
    def errors(self) -> list[LintMessage]:
        return [m for m in self.messages if m.is_error]

    @property
    def warnings(self) -> list[LintMessage]:
        return [m for m in self.messages if not m.is_error]


def check(
    snapshot: Mapping[str, Any], *, default_chat_model: Mapping[str, Any] | None = None
) -> Checked:
    """Lint ``snapshot``, then compile it if the lint found no error (``E113`` if that fails).

    Reads no database: the snapshot (and ``default_chat_model``, see
    :func:`~advisors_app.definition.compile_snapshot`) is all it needs.
    """
    messages = lint(snapshot)
    compiled = None
    if not any(m.is_error for m in messages):
        try:
            compiled = compile_snapshot(snapshot, default_chat_model=default_chat_model)
        except ChainConfigurationError as exc:
            messages.append(
                LintMessage(
                    "advisors_app.E113",
                    "error",
                    f"the chain cannot be built: {exc}",
                    "Fix the advisor's params, or the advisor type's factory.",
                )
            )
    return Checked(snapshot, snapshot_hash(snapshot), tuple(messages), compiled)


def check_draft(chain: AdvisorChain, advisors: Iterable[Any] | None = None) -> Checked:
    """Resolve ``chain``'s draft (or the given unsaved ``advisors`` rows) and :func:`check` it."""
    return check(resolve_draft(chain, advisors))


class PublishError(Refusal, ValueError):
    """Raised when a draft cannot be published: its lint or compile found errors (400
    ``invalid``, one ``fields["draft"]`` message per error)."""

    def __init__(self, chain: AdvisorChain, messages: list[LintMessage]) -> None:
        self.messages = messages
        listing = [f"{m.id}: {m}" for m in messages]
        message = f"chain {chain.slug!r} cannot be published: {'; '.join(listing)}"
        super().__init__(message, fields={"draft": listing})


class VersionLookupError(Refusal, LookupError):
    """Raised when a version number, label or ``draft`` names nothing of the chain, or a label
    has nothing to roll back to (404 ``version_not_found``)."""

    code = "version_not_found"
    http_status = 404


def can_publish(user: Any) -> bool:
    return bool(user.has_perm("advisors_app.add_chainversion"))


def can_move_label(user: Any, name: str) -> bool:
    """Moving a label needs ``change_chainlabel``; ``production`` also ``promote_production``."""
    if not user.has_perm("advisors_app.change_chainlabel"):
        return False
    return name != PRODUCTION or bool(user.has_perm("advisors_app.promote_production"))


def _locked(chain: AdvisorChain) -> AdvisorChain:
    return AdvisorChain.objects.select_for_update().get(pk=chain.pk)


def publish(
    chain: AdvisorChain, *, message: str = "", user: Any = None
) -> tuple[ChainVersion, bool]:
    """Store the draft as a new version; ``(version, created)``.

    Publishing a draft identical to the newest version returns that version
    (``created=False``). The first version of a chain gets the ``production`` label. Raises
    :class:`PublishError` listing the lint and compile errors (nothing is stored then).
    """
    checked = check_draft(chain)
    if checked.errors:
        raise PublishError(chain, checked.errors)
    actor = user if getattr(user, "is_authenticated", False) else None
    with transaction.atomic():
        locked = _locked(chain)
        latest = locked.versions.order_by("-number").first()
        if latest is not None and latest.snapshot_hash == checked.snapshot_hash:
            return latest, False
        version = ChainVersion.objects.create(
            chain=locked,
            number=(latest.number if latest else 0) + 1,
            snapshot=checked.snapshot,
            snapshot_hash=checked.snapshot_hash,
            references=references_of(checked.snapshot),
            message=message,
            created_by=actor,
            parent_id=locked.restored_from_id,
        )
        if locked.restored_from_id is not None:
            AdvisorChain.objects.filter(pk=locked.pk).update(restored_from=None)
            chain.restored_from = None
        if not locked.labels.filter(name=PRODUCTION).exists():
            _move(locked, PRODUCTION, version, actor, "first version")
    return version, True


def _move(
    chain: AdvisorChain,
    name: str,
    version: ChainVersion,
    actor: Any,
    reason: str,
    *,
    undo: bool = False,
) -> ChainLabel:
    label = ChainLabel.objects.select_for_update().filter(chain=chain, name=name).first()
    before = label.version if label is not None else None
    if label is None:
        label = ChainLabel(chain=chain, name=name, version=version)
        label.full_clean(exclude=["chain", "version"])
    elif label.version_id == version.pk:
        return label
    label.version = version
    label.save()
    ChainLabelEvent.objects.create(
        label=label,
        from_version=before,
        to_version=version,
        actor=actor,
        reason=reason,
        rollback=undo,
    )
    return label


def move_label(
    chain: AdvisorChain, name: str, version: ChainVersion, *, user: Any = None, reason: str = ""
) -> ChainLabel:
    """Point label ``name`` (created if new) at ``version``, recording who, when and why.

    Moving a label to where it already points records nothing. Raises ``ValueError`` for a
    version of another chain and ``ValidationError`` for a malformed new label name.
    """
    if version.chain_id != chain.pk:
        raise ValueError(f"v{version.number} is not a version of chain {chain.slug!r}")
    actor = user if getattr(user, "is_authenticated", False) else None
    with transaction.atomic():
        return _move(_locked(chain), name, version, actor, reason)


def rollback_target(label: ChainLabel) -> ChainVersion | None:
    """Where rolling ``label`` back would point it: the version it pointed at before the latest
    move that no roll back has undone yet (``None``: nothing left to undo).

    The history is a stack: each move pushes the version it left, each roll back pops one, so
    rolling back twice after v1 → v2 → v3 returns to v1, not to v3.
    """
    stack: list[ChainVersion | None] = []
    for event in label.events.select_related("from_version").order_by("at", "id"):
        if event.rollback:
            if stack:
                stack.pop()
        else:
            stack.append(event.from_version)
    return stack[-1] if stack else None


def rollback(chain: AdvisorChain, name: str, *, user: Any = None, reason: str = "") -> ChainLabel:
    """Move label ``name`` back one step (see :func:`rollback_target`), recorded as a roll back.

    Raises :class:`VersionLookupError` when the label does not exist or has nothing to undo.
    """
    label = chain.labels.filter(name=name).first()
    if label is None:
        raise VersionLookupError(f"chain {chain.slug!r} has no label {name!r}")
    actor = user if getattr(user, "is_authenticated", False) else None
    with transaction.atomic():
        locked = _locked(chain)
        target = rollback_target(label)
        if target is None:
            raise VersionLookupError(
                f"label {name!r} of chain {chain.slug!r} has nothing to roll back to: it never "
                "moved, or every move was rolled back already (move it to a version instead)"
            )
        current = label.version.number
        return _move(locked, name, target, actor, reason or f"roll back from v{current}", undo=True)


def resolve_snapshot(chain: AdvisorChain, ref: str) -> tuple[str, Mapping[str, Any]]:
    """``(display name, snapshot)`` for ``ref``: a version number, ``draft`` or a label name.

    Raises :class:`VersionLookupError` when ``ref`` names nothing of ``chain``.
    """
    if ref == "draft":
        return "draft", resolve_draft(chain)
    if ref.isascii() and ref.isdigit():
        version = chain.versions.filter(number=int(ref)).first()
        if version is None:
            raise VersionLookupError(f"chain {chain.slug!r} has no version {ref}")
        return f"v{version.number}", version.snapshot
    label = chain.labels.select_related("version").filter(name=ref).first()
    if label is None:
        raise VersionLookupError(
            f"chain {chain.slug!r} has no version or label {ref!r} (use a number, 'draft' or a "
            "label name)"
        )
    return f"{ref} (v{label.version.number})", label.version.snapshot


def apply_snapshot(chain: AdvisorChain, snapshot: Mapping[str, Any]) -> list[str]:
    """Make ``chain``'s draft rows say what ``snapshot`` says; return notes for people.

    Referenced templates and word lists that do not exist are created from the snapshot's
    content; existing ones whose content differs are left alone (they are shared with other
    chains) and named in the notes, since the draft then differs from the snapshot.
    """
    notes: list[str] = []
    references = snapshot["references"]
    for ref, content in sorted(references.items()):
        kind, _, slug = ref.partition(":")
        if content is None:
            continue
        if kind == "prompt_template":
            placeholders = list(CorePromptTemplate(content["text"]).placeholders)
            row, created = PromptTemplate.objects.get_or_create(
                slug=slug,
                defaults={"name": slug, "text": content["text"], "placeholders": placeholders},
            )
            if not created and row.text != content["text"]:
                notes.append(f"template {slug!r} differs from the snapshot's; left as it is")
        elif kind == "word_list":
            found, made = SensitiveWordList.objects.get_or_create(
                slug=slug, defaults={"name": slug, "words": list(content["words"])}
            )
            if not made and list(found.words) != list(content["words"]):
                notes.append(f"word list {slug!r} differs from the snapshot's; left as it is")
        elif kind == "collection" and not Collection.objects.filter(slug=slug).exists():
            notes.append(f"collection {slug!r} does not exist here; create it")
        elif kind == "mcp_server" and not _mcp_server_exists(slug):
            # Never created from a snapshot: a server is the admin's (or the settings') to add.
            notes.append(f"MCP server {slug!r} does not exist here; add it")
    model = snapshot["chat_model"]
    chain.chat_model = ChatModelConfig.objects.filter(slug=model).first() if model else None
    if model and chain.chat_model is None:
        notes.append(f"chat model {model!r} does not exist here; create it")
    chain.system_prompt = snapshot["system_prompt"]
    template = snapshot["system_template"]
    chain.system_template = (
        PromptTemplate.objects.filter(slug=template).first() if template else None
    )
    if template and chain.system_template is None:
        notes.append(f"system template {template!r} does not exist here; create it")
    chain.default_options = snapshot["default_options"]
    chain.tools = [tool["name"] for tool in snapshot["tools"]]
    chain.save()
    chain.advisors.all().delete()
    AdvisorConfig.objects.bulk_create(
        AdvisorConfig(
            chain=chain,
            advisor_type=row["type"],
            order=None if row["order"] == _default_order(row["type"]) else row["order"],
            enabled=row["enabled"],
            params=row["params"],
        )
        for row in snapshot["advisors"]
    )
    return notes


def _mcp_server_exists(slug: str) -> bool:
    return slug in app_settings.MCP_SERVERS or McpServer.objects.filter(slug=slug).exists()


def _default_order(key: str) -> int | None:
    advisor_type = advisor_types.get(key)
    return advisor_type.default_order if advisor_type is not None else None


def restore_to_draft(version: ChainVersion) -> list[str]:
    """Copy ``version``'s snapshot into its chain's draft rows (see :func:`apply_snapshot`);
    the next version published from the draft names ``version`` as its parent."""
    chain = version.chain
    with transaction.atomic():
        notes = apply_snapshot(chain, version.snapshot)
        AdvisorChain.objects.filter(pk=chain.pk).update(restored_from=version)
        chain.restored_from = version
    return notes
