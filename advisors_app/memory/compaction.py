"""Compaction of session memory outside the turn: the queued task and ``compact_now``.

A turn through a chain with session memory (advisor type ``session_memory``) asks for a
compaction when its trigger fires; :class:`~advisors_app.stores.sessions.
DjangoSessionRepository` queues :data:`compact_conversation` from the turn's transaction
(``transaction.on_commit``), and a task worker (``manage.py db_worker``, any machine) runs it: it
reads the view, evaluates the trigger again (a compaction that already ran leaves it quiet) and
appends a boundary; the messages are never touched.

The task carries the chain's **policy** as JSON (:func:`policy_json`, built when the chain is
compiled): the trigger, the strategy, how many turns stay verbatim, and for summarization the
summary model's provider configuration (it holds no secret: keys are named by variable) and the
prompt text (key facts need no model: only the bound of the list), so a worker needs neither the
chain nor its version. The summary model's calls are metered for the conversation's owner
(:mod:`advisors_app.costs.side_calls`): priced, held to their budgets, and added to the call log
of the conversation's latest turn.

:func:`compact_now` compacts a conversation at once (forced by default) with the policy of the
chain version it started on, or one given: what an admin action or a script calls.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from asgiref.sync import async_to_sync

from advisors_app.conf import app_settings
from advisors_app.core.memory import (
    CompactionPolicy,
    CompactionResult,
    KeyFactsCompactionStrategy,
    MessageCountTrigger,
    RecursiveSummarizationCompactionStrategy,
    TokenCountTrigger,
    TurnCountTrigger,
    WindowCompactionStrategy,
)
from advisors_app.core.memory.compaction import (
    DEFAULT_SUMMARY_PROMPT,
    CompactionStrategy,
    CompactionTrigger,
)
from advisors_app.core.providers.registry import create_chat_model
from advisors_app.costs.side_calls import SideCalls

try:
    from django.tasks import task  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task

__all__ = [
    "SESSION_MEMORY_TYPE",
    "build_policy",
    "compact_conversation",
    "compact_now",
    "enqueue_compaction",
    "policy_from_snapshot",
    "policy_json",
]

logger = logging.getLogger("advisors_app.sessions")

#: The advisor type that installs session memory.
SESSION_MEMORY_TYPE = "session_memory"


#: Turns that trigger compaction when a token-share trigger meets a model of unknown window.
UNKNOWN_WINDOW_TURNS = 20


def policy_json(
    params: Mapping[str, Any],
    *,
    summary_model: Mapping[str, Any] | None,
    summary_prompt: str | None,
    context_window: int | None,
    summary_model_slug: str | None = None,
) -> dict[str, Any]:
    """The JSON policy of a ``session_memory`` row: its params (schema defaults filled in), the
    summary model's configuration (``None`` for a window) and its slug (``None``: the
    deployment's default alias; what its calls are priced by), the prompt text and the chain
    model's context window (tokens, ``None``: unknown)."""
    return {
        "trigger": dict(params["trigger"]),
        "strategy": params["strategy"],
        "keep_last_turns": params["keep_last_turns"],
        "summary_max_tokens": params["summary_max_tokens"],
        "summary_model": dict(summary_model) if summary_model is not None else None,
        "summary_model_slug": summary_model_slug,
        "summary_prompt": summary_prompt,
        "context_window": context_window,
    }


def _trigger(policy: Mapping[str, Any]) -> CompactionTrigger:
    trigger = policy["trigger"]
    kind = trigger.get("kind", "turns")
    if kind == "turns":
        return TurnCountTrigger(int(trigger.get("threshold", 20)))
    if kind == "messages":
        return MessageCountTrigger(int(trigger.get("threshold", 40)))
    if "threshold" in trigger:
        return TokenCountTrigger(int(trigger["threshold"]))
    window = policy.get("context_window")
    if window is None:
        # A model whose window nobody stated (a hosted model without context_window): a
        # share of it cannot be computed, and refusing the chain would break it on a model
        # switch. Compact by turns instead, as Spring AI's default trigger does.
        return TurnCountTrigger(UNKNOWN_WINDOW_TURNS)
    return TokenCountTrigger.share_of(int(window), float(trigger.get("share", 0.6)))


def _strategy(policy: Mapping[str, Any], calls: SideCalls | None = None) -> CompactionStrategy:
    keep = int(policy["keep_last_turns"])
    if policy["strategy"] == "window":
        return WindowCompactionStrategy(keep)
    if policy["strategy"] == "key_facts":
        return KeyFactsCompactionStrategy(keep, int(policy.get("summary_max_tokens", 256)))
    config = policy.get("summary_model")
    if config is None:
        raise ValueError("strategy summarize: no summary model")
    model = create_chat_model(config)
    if calls is not None:  # metered for the conversation's owner (advisors_app.costs.side_calls)
        slug = policy.get("summary_model_slug") or app_settings.DEFAULT_CHAT_MODEL
        model = calls.model(model, slug, config)
    window = getattr(model, "context_window", None)
    return RecursiveSummarizationCompactionStrategy(
        model,
        keep,
        policy.get("summary_prompt") or DEFAULT_SUMMARY_PROMPT,
        int(policy.get("summary_max_tokens", 256)),
        window if isinstance(window, int) else policy.get("context_window"),
        _model_name(model, config),
    )


def _model_name(model: Any, config: Mapping[str, Any]) -> str:
    """What a summary's boundary records as its model: the name requests send (the default
    options' model, else the model's own, e.g. the embedded ``smollm2-135m-instruct`` a config
    without ``model`` gets), else the config's provider (a scripted model has no name)."""
    options = getattr(model, "default_options", None)
    name = getattr(options, "model", None) or getattr(model, "model", None)
    return str(name or config.get("model") or config.get("provider") or "")


def build_policy(policy: Mapping[str, Any], calls: SideCalls | None = None) -> CompactionPolicy:
    """The core :class:`CompactionPolicy` a JSON policy describes; ``ValueError`` if invalid.
    With ``calls``, the summary model's calls are metered by it."""
    return CompactionPolicy(_trigger(policy), _strategy(policy, calls))


def policy_from_snapshot(snapshot: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON policy of a chain snapshot's enabled ``session_memory`` row (``None``: none)."""
    from advisors_app.core.advisors.session_turn import SessionTurnAdvisor
    from advisors_app.definition.compile import compile_snapshot

    if not any(
        row.get("enabled") and row.get("type") == SESSION_MEMORY_TYPE
        for row in snapshot.get("advisors", ())
    ):
        return None
    compiled = compile_snapshot(snapshot)
    for advisor in compiled.advisors:
        if isinstance(advisor, SessionTurnAdvisor):
            policy = getattr(advisor.repository, "policy", None)
            return dict(policy) if policy is not None else None
    return None


def _compact(conversation_key: str, policy: Mapping[str, Any], force: bool) -> CompactionResult:
    from advisors_app.stores.sessions import DjangoSessionRepository

    repository = DjangoSessionRepository(policy)
    calls = _side_calls(conversation_key)
    compaction = build_policy(policy, calls)
    try:
        return async_to_sync(compaction.compact)(repository, conversation_key, force=force)
    finally:
        calls.close()


def _side_calls(conversation_key: str) -> SideCalls:
    """The meter of a compaction's model calls: charged to the conversation's owner on the
    chain it started on, and logged with the conversation's latest turn (the one that asked
    for the compaction, or a later one)."""
    from advisors_app.models import CallLog, Conversation

    row = (
        Conversation.objects.filter(conversation_id=conversation_key)
        .select_related("owner", "chain_version")
        .first()
    )
    trace_id = (
        CallLog.objects.filter(conversation_id=conversation_key)
        .order_by("-created", "-pk")
        .values_list("trace_id", flat=True)
        .first()
    )
    owner = row.owner if row is not None else None
    chain_id = row.chain_version.chain_id if row is not None and row.chain_version else None
    return SideCalls(owner, chain_id, purpose="compaction", trace_id=trace_id)


def _summary(result: CompactionResult) -> dict[str, Any]:
    boundary = result.boundary
    return {
        "compacted": boundary is not None,
        "covers_up_to": boundary.covers_up_to if boundary is not None else None,
        "covered_messages": len(result.covered),
        "tokens_estimated_saved": result.tokens_estimated_saved,
    }


@task()
def compact_conversation(conversation_key: str, policy: dict[str, Any]) -> dict[str, Any]:
    """The task: compact ``conversation_key`` (a stored conversation id) if ``policy``'s
    trigger still fires on its view; what it did."""
    return _summary(_compact(conversation_key, policy, force=False))


def enqueue_compaction(conversation_key: str, policy: dict[str, Any]) -> None:
    """Queue :data:`compact_conversation` (called once the turn committed); never raises."""
    try:
        compact_conversation.enqueue(conversation_key, policy)
    except Exception:  # the turn is committed; a lost compaction is retried after the next one
        logger.exception("could not queue the compaction of conversation %r", conversation_key)


def compact_now(
    conversation_key: str, *, force: bool = True, policy: Mapping[str, Any] | None = None
) -> CompactionResult:
    """Blocking: compact ``conversation_key`` (the stored id, ``Conversation.conversation_id``)
    now, in this process. ``policy`` defaults to that of the chain version the conversation
    started on; ``force=False`` compacts only if its trigger fires. Raises ``ValueError`` when
    the conversation is unknown or its chain has no session memory."""
    if policy is None:
        from advisors_app.models import Conversation

        row = (
            Conversation.objects.filter(conversation_id=conversation_key)
            .select_related("chain_version")
            .first()
        )
        if row is None:
            raise ValueError(f"no conversation {conversation_key!r}")
        version = row.chain_version
        policy = policy_from_snapshot(version.snapshot) if version is not None else None
        if policy is None:
            raise ValueError(
                f"conversation {conversation_key!r}: its chain version has no session_memory "
                "advisor; pass a policy"
            )
    return _compact(conversation_key, policy, force)
