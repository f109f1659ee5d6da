"""A chain's resolved configuration: the snapshot the runtime builds from, and its hash.

The snapshot is plain JSON: the chain's own settings, its enabled advisor rows (type, effective
order, params) and the content of every row they refer to by slug — word lists, templates,
model configurations, collections, and what those refer to in turn. Its SHA-256
(:func:`configuration_hash`) is stored on the chain row (``config_hash``) by
:func:`refresh_chain`, which the signals in :mod:`advisors_app.signals` call whenever the chain,
one of its advisor rows or any referenced row changes. Every process looks the hash up in its
own cache of built clients, so a change made in one process reaches all of them on their next
request; the same snapshot can later be kept as an immutable chain version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from django.apps import apps

from advisors_app.conf import app_settings
from advisors_app.models import AdvisorChain
from advisors_app.providers import chat_model_configs
from advisors_app.registry import ReferenceKind, advisor_types, reference_kinds, references_in

__all__ = [
    "SNAPSHOT_VERSION",
    "chains_referring_to",
    "configuration_hash",
    "refresh_chain",
    "refresh_chains",
    "resolve_configuration",
]

#: Bumped when the snapshot's shape changes, so old hashes never match new snapshots.
SNAPSHOT_VERSION = 1


def _model_config(row: Any) -> dict[str, Any]:
    return dict(row.to_config())


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
        lambda row: {"text": row.text, "placeholders": list(row.placeholders)},
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

reference_kinds.register(
    ReferenceKind(
        "collection",
        "collection",
        "advisors_app.Collection",
        lambda row: {"id": row.pk, "owner_id": row.owner_id, "tenant": row.tenant},
    )
)


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
            self.resolved[ref] = default
            return
        self.resolved[ref] = kind.snapshot(row)
        for nested_kind, nested_slug in kind.nested(row):
            self.add(nested_kind, nested_slug)


def resolve_configuration(chain: AdvisorChain) -> dict[str, Any]:
    """The JSON snapshot of ``chain`` as it is stored now (see the module docstring).

    A reference to a missing row resolves to ``None`` (the chain lint reports it, the runtime
    refuses to build); an unknown advisor type is kept as it is, for the same reason.
    """
    resolver = _Resolver()
    model_slug = chain.chat_model.slug if chain.chat_model_id else app_settings.DEFAULT_CHAT_MODEL
    # No chain model: a row with the default alias's slug, else the settings alias itself.
    resolver.add(
        "chat_model",
        model_slug,
        default=None if chain.chat_model_id else chat_model_configs().get(model_slug),
    )
    template_slug = chain.system_template.slug if chain.system_template_id else None
    if template_slug:
        resolver.add("prompt_template", template_slug)
    rows = sorted(
        (row for row in chain.advisors.all() if row.enabled),
        key=lambda row: (_sort_order(row), row.pk),
    )
    advisors = []
    for row in rows:
        advisor_type = advisor_types.get(row.advisor_type)
        params = row.params if isinstance(row.params, dict) else {}
        if advisor_type is not None:
            for _, kind, slug in references_in(advisor_type, params):
                resolver.add(kind, slug)
        advisors.append(
            {"id": row.pk, "type": row.advisor_type, "order": row.effective_order, "params": params}
        )
    return {
        "version": SNAPSHOT_VERSION,
        "chain": {
            "slug": chain.slug,
            "chat_model": model_slug,
            "system_prompt": chain.system_prompt,
            "system_template": template_slug,
            "default_options": chain.default_options,
            "tools": list(chain.tools or ()),
        },
        "advisors": advisors,
        "references": resolver.resolved,
    }


def _sort_order(row: Any) -> int:
    order = row.effective_order
    return 0 if order is None else order


def configuration_hash(configuration: dict[str, Any]) -> str:
    """SHA-256 (hex, 64 characters) of the canonical JSON of ``configuration``."""
    canonical = json.dumps(configuration, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def refresh_chain(chain: AdvisorChain | int) -> str | None:
    """Recompute and store the chain's ``config_hash`` and ``references``; return the hash.

    Writes with ``update()`` (no signals, no ``updated_at`` change) and only when something
    changed. Returns ``None`` when the chain no longer exists.
    """
    pk = chain.pk if isinstance(chain, AdvisorChain) else chain
    row = (
        AdvisorChain.objects.select_related("chat_model", "system_template")
        .prefetch_related("advisors")
        .filter(pk=pk)
        .first()
    )
    if row is None:
        return None
    configuration = resolve_configuration(row)
    digest = configuration_hash(configuration)
    references = sorted(configuration["references"])
    if row.config_hash != digest or row.references != references:
        AdvisorChain.objects.filter(pk=pk).update(config_hash=digest, references=references)
    if isinstance(chain, AdvisorChain):
        chain.config_hash, chain.references = digest, references
    return digest


def refresh_chains(pks: Iterable[int]) -> None:
    for pk in sorted(set(pks)):
        refresh_chain(pk)


def chains_referring_to(kind: str, slugs: Iterable[str]) -> list[int]:
    """Primary keys of the chains whose configuration refers to ``kind`` rows with ``slugs``."""
    refs = [f"{kind}:{slug}" for slug in slugs if slug]
    if not refs:
        return []
    return list(AdvisorChain.objects.filter(references__overlap=refs).values_list("pk", flat=True))
