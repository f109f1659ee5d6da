"""Resolve a chain's draft rows into its snapshot: canonical JSON holding everything a turn needs.

The snapshot is the only input of :mod:`~advisors_app.definition.lint` and
:mod:`~advisors_app.definition.compile`, and what a :class:`~advisors_app.models.ChainVersion`
stores. It holds:

- ``slug``, ``chat_model`` (a slug; its configuration is under ``references``; ``None``
  for the deployment's default chat model), ``default_chat_model`` (for ``None``: the default
  alias at publishing, whose model-config row, if any, is under ``references``),
  ``system_prompt``, ``system_template`` (a slug; its text is under ``references``),
  ``default_options``;
- ``tools``: each enabled tool's name, description and JSON Schema, as registered now;
- ``advisors``: every advisor row in execution order (effective order, then saved order) with
  its ``type``, effective ``order``, ``enabled`` flag and ``params``;
- ``references``: ``{"kind:slug": content}`` for every row the chain refers to — templates and
  word lists by content, model configurations as the provider registry reads them, collections
  by slug, MCP servers with their tool lists as discovered at resolving (only the tools the
  chain enables: publishing pins them) — and ``None`` for a reference to a missing row (the
  lint reports it).

Nothing in it depends on primary keys, so the same configuration has the same
:func:`snapshot_hash` in every database (export and import keep it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from django.apps import apps

from advisors_app.conf import app_settings
from advisors_app.definition.registry import (
    ReferenceKind,
    advisor_types,
    reference_kinds,
    references_in,
)
from advisors_app.definition.tools import tool_registry
from advisors_app.mcp.discovery import pin_mcp_tools, register_mcp_reference_kind
from advisors_app.models import AdvisorChain, AdvisorConfig

__all__ = [
    "SNAPSHOT_FORMAT",
    "canonical_json",
    "drafts_referring_to",
    "references_of",
    "register_reference_kinds",
    "resolve_draft",
    "snapshot_hash",
]

#: Bumped when the snapshot's shape changes, so old hashes never match new snapshots.
SNAPSHOT_FORMAT = 2


def _model_config(row: Any) -> dict[str, Any]:
    return dict(row.to_config())


def register_reference_kinds() -> None:
    """Register the app's own reference kinds (idempotent; ``AdvisorsAppConfig.ready()``)."""
    reference_kinds.register(
        ReferenceKind(
            "word_list",
            "sensitive-word list",
            "advisors_app.SensitiveWordList",
            lambda row: {"words": list(row.words)},
        )
    )
    reference_kinds.register(
        ReferenceKind(
            "prompt_template",
            "prompt template",
            "advisors_app.PromptTemplate",
            lambda row: {"text": row.text},
        )
    )
    reference_kinds.register(
        ReferenceKind("chat_model", "chat model", "advisors_app.ChatModelConfig", _model_config)
    )
    reference_kinds.register(
        ReferenceKind(
            "embedding_model", "embedding model", "advisors_app.EmbeddingModelConfig", _model_config
        )
    )
    # By slug only: which documents a turn may see depends on the user and is decided per turn.
    reference_kinds.register(
        ReferenceKind(
            "collection", "collection", "advisors_app.Collection", lambda row: {"slug": row.slug}
        )
    )
    register_mcp_reference_kind()


class _Resolver:
    """Loads referenced rows by ``(kind, slug)``, each once, following nested references."""

    def __init__(self) -> None:
        self.resolved: dict[str, dict[str, Any] | None] = {}

    def add(self, kind_key: str, slug: str, *, default: dict[str, Any] | None = None) -> None:
        ref = f"{kind_key}:{slug}"
        if ref in self.resolved:
            return
        kind = reference_kinds.get(kind_key)
        row = None
        if kind is not None:
            model = apps.get_model(kind.model)
            row = model._default_manager.filter(slug=slug).first()
        if row is None:
            self.resolved[ref] = default if kind is None else kind.missing(slug) or default
            return
        self.resolved[ref] = kind.snapshot(row)
        for nested_kind, nested_slug in kind.nested(row):
            self.add(nested_kind, nested_slug)


def _tool(name: str) -> dict[str, Any]:
    callback = tool_registry.get(name)
    if callback is None:
        return {"name": name, "registered": False}
    definition = callback.definition
    return {
        "name": name,
        "description": definition.description,
        "input_schema": dict(definition.input_schema or {}),
    }


def resolve_draft(chain: AdvisorChain, advisors: Iterable[Any] | None = None) -> dict[str, Any]:
    """The snapshot of ``chain``'s draft (queries: one per referenced row).

    ``advisors`` are the advisor rows to use (saved or not: anything with the model's
    ``advisor_type``, ``order``, ``enabled`` and ``params``), in their saved order; default:
    the chain's stored rows. A reference to a missing row resolves to ``None``.
    """
    rows = list(chain.advisors.order_by("id") if advisors is None else advisors)
    resolver = _Resolver()
    # No model of its own: the deployment's default chat model. Its model-config row (the one
    # named like the default alias), if any, is kept by content like any reference, so editing
    # it waits for publishing; ``ADVISORS["DEFAULT_CHAT_MODEL"]`` naming another alias where the
    # version runs moves the chain to that model (compile.py).
    model_slug = chain.chat_model.slug if chain.chat_model_id else None
    default_alias = None if model_slug else app_settings.DEFAULT_CHAT_MODEL
    resolver.add("chat_model", model_slug or default_alias)
    if default_alias and resolver.resolved[f"chat_model:{default_alias}"] is None:
        del resolver.resolved[f"chat_model:{default_alias}"]  # the settings' alias serves
    template_slug = chain.system_template.slug if chain.system_template_id else None
    if template_slug:
        resolver.add("prompt_template", template_slug)
    positioned = sorted(enumerate(rows), key=lambda item: (_sort_order(item[1]), item[0]))
    advisors_json = []
    for _, row in positioned:
        advisor_type = advisor_types.get(row.advisor_type)
        params = row.params
        if advisor_type is not None and row.enabled and isinstance(params, Mapping):
            for _, kind, slug in references_in(advisor_type, params):
                resolver.add(kind, slug)
        order = row.order if row.order is not None else _default_order(row.advisor_type)
        advisors_json.append(
            {
                "type": row.advisor_type,
                "order": order,
                "enabled": bool(row.enabled),
                "params": params,
            }
        )
    snapshot = {
        "format": SNAPSHOT_FORMAT,
        "slug": chain.slug,
        "chat_model": model_slug,
        "default_chat_model": default_alias,
        "system_prompt": chain.system_prompt,
        "system_template": template_slug,
        "default_options": chain.default_options,
        "tools": [_tool(name) for name in chain.tools or ()],
        "advisors": advisors_json,
        "references": resolver.resolved,
    }
    pin_mcp_tools(snapshot)
    return snapshot


def _default_order(key: str) -> int | None:
    advisor_type = advisor_types.get(key)
    return advisor_type.default_order if advisor_type is not None else None


def _sort_order(row: Any) -> int:
    order = row.order if row.order is not None else _default_order(row.advisor_type)
    return order if isinstance(order, int) else 0


def drafts_referring_to(kind_key: str, slug: str) -> list[AdvisorChain]:
    """The chains whose draft refers to the ``kind_key`` row ``slug`` (by slug, sorted)."""
    found: dict[int, AdvisorChain] = {}
    if kind_key == "prompt_template":
        found.update((c.pk, c) for c in AdvisorChain.objects.filter(system_template__slug=slug))
    if kind_key == "chat_model":
        found.update((c.pk, c) for c in AdvisorChain.objects.filter(chat_model__slug=slug))
        if slug == app_settings.DEFAULT_CHAT_MODEL:
            found.update((c.pk, c) for c in AdvisorChain.objects.filter(chat_model__isnull=True))
    rows = AdvisorConfig.objects.filter(enabled=True, params__icontains=slug).select_related(
        "chain"
    )
    for row in rows:
        advisor_type = advisor_types.get(row.advisor_type)
        if advisor_type is not None and isinstance(row.params, Mapping):
            refs = {(kind, ref) for _, kind, ref in references_in(advisor_type, row.params)}
            if (kind_key, slug) in refs:
                found[row.chain_id] = row.chain
    return sorted(found.values(), key=lambda chain: chain.slug)


def canonical_json(snapshot: Mapping[str, Any], *, indent: int | None = None) -> str:
    """The snapshot as canonical JSON: sorted keys, no spaces (or ``indent`` for people)."""
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(
        snapshot, sort_keys=True, separators=separators, indent=indent, ensure_ascii=False
    )


def snapshot_hash(snapshot: Mapping[str, Any]) -> str:
    """SHA-256 (hex, 64 characters) of :func:`canonical_json` of ``snapshot``."""
    return hashlib.sha256(canonical_json(snapshot).encode()).hexdigest()


def references_of(snapshot: Mapping[str, Any]) -> list[str]:
    """``"kind:slug"`` of every row ``snapshot`` took content from (sorted)."""
    return sorted(ref for ref, value in snapshot.get("references", {}).items() if value is not None)
