"""Rows for chain tests: a scripted chat model, chains and advisor rows."""

from __future__ import annotations

from typing import Any

from advisors_app.definition import publish as publish_draft
from advisors_app.models import AdvisorChain, AdvisorConfig, ChatModelConfig


def scripted_model(
    slug: str = "scripted", responses: Any = ("Hello!",), repeat: bool = True
) -> ChatModelConfig:
    """A ``scripted`` chat-model configuration answering ``responses`` (repeating by default)."""
    settings = {"responses": list(responses), "repeat": repeat}
    return ChatModelConfig.objects.create(slug=slug, provider="scripted", settings=settings)


def make_chain(
    slug: str = "support",
    *,
    model: ChatModelConfig | None = None,
    advisors: tuple[tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], int | None], ...] = (),
    publish: bool = True,
    **fields: Any,
) -> AdvisorChain:
    """A chain on ``model`` (default: a new scripted one) with ``(type, params[, order])`` rows,
    published as version 1 (labelled ``production``) unless ``publish`` is false."""
    if model is None:
        model = scripted_model(f"{slug}-model")
    chain = AdvisorChain.objects.create(slug=slug, name=slug.title(), chat_model=model, **fields)
    for row in advisors:
        key, params, *rest = row
        AdvisorConfig.objects.create(
            chain=chain, advisor_type=key, params=params, order=rest[0] if rest else None
        )
    if publish:
        publish_draft(chain, message="factory")
    chain.refresh_from_db()
    return chain
