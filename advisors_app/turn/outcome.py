"""``TurnOutcome``: how a turn ended, the one value every transport and the call log are built
from (the REST ``call`` body, the ``done`` event, the stored reply's metadata, the call log row).

Built by the turn's ``finish`` stage (:mod:`advisors_app.turn.finish`), which adds what it stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["TurnOutcome"]


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended: the one value the REST ``call`` body, the ``done`` event, the stored
    reply's metadata and the call log are built from.

    ``status`` is the call log's (``"ok"``, ``"error"``, ``"cancelled"``). ``message_id`` is
    the stored reply's id (``None``: nothing was stored); ``conversation_id`` is ``None`` when
    the turn started a conversation and stored nothing (it was removed). ``sources`` are the
    documents retrieval cited (:func:`advisors_app.turn.sources.cited_sources`), ``tools`` the tool
    calls the turn ran (``id``, ``name``, ``arguments``, ``ok``, ``error``, ``duration_ms``),
    ``timings`` ``latency_ms`` and ``time_to_first_token_ms`` (streams only). ``prompt`` (the
    last request sent to the model, texts uncut) and ``trace`` (``CallTrace.to_dict()``, with
    ``"stages"``: the seconds each stage of the turn took, :mod:`advisors_app.turn.stages`) are
    for operators, not end users: :meth:`to_dict` leaves them out.
    """

    status: str
    conversation_id: str | None
    content: str
    usage: dict[str, Any] | None
    metadata: dict[str, Any]
    finish_reason: str | None
    trace_id: str
    chain: str
    #: The number of the chain version that ran (``None``: the draft).
    version: int | None = None
    sources: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float | None] = field(default_factory=dict)
    message_id: int | None = None
    stored: bool = False
    #: The tool calls that wait for a decision (finish reason ``APPROVAL_REQUIRED``).
    pending_approvals: list[dict[str, Any]] = field(default_factory=list)
    #: What the turn's model calls cost (``advisors_app.costs.metering``; ``{}``: no model call).
    cost: dict[str, Any] = field(default_factory=dict)
    #: Budgets past their soft limit (``BudgetWarningEvent`` payloads without ``type``).
    budget_warnings: list[dict[str, Any]] = field(default_factory=list)
    #: ``{"id", "arm"}`` when an experiment chose the version (issue 37), else ``None``.
    experiment: dict[str, Any] | None = None
    #: The provider-neutral category of ``finish_reason``
    #: (:class:`~advisors_app.core.finish_reasons.FinishReasonCategory` value, or ``None``).
    finish_category: str | None = None
    #: The guard verdicts of the turn, in order (``Verdict.to_dict()``: ``rail``, ``check``,
    #: ``action``, ``detail``, ``failed``, ``ms``).
    guard: list[dict[str, Any]] = field(default_factory=list)
    prompt: dict[str, Any] | None = field(default=None, repr=False)
    trace: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The REST ``call`` body (and, with ``type`` and ``reason``, the ``done`` event);
        ``experiment`` only when one chose the version."""
        body = {
            "conversation_id": self.conversation_id,
            "message_id": self.message_id,
            "stored": self.stored,
            "content": self.content,
            "usage": self.usage,
            "metadata": self.metadata,
            "finish_reason": self.finish_reason,
            "finish_category": self.finish_category,
            "trace_id": self.trace_id,
            "version": self.version,
            "sources": self.sources,
            "tools": self.tools,
            "timings": self.timings,
            "pending_approvals": self.pending_approvals,
            "cost": self.cost,
            "budget_warnings": self.budget_warnings,
            "guard": self.guard,
        }
        if self.experiment is not None:
            body["experiment"] = self.experiment
        return body

    def reply_metadata(self) -> dict[str, Any]:
        """What the stored reply keeps of its turn, so a reopened conversation shows it as the
        live reply did (the conversation API's message ``metadata``, the chat page, the admin).
        ``trace_id``, ``version`` and ``timings`` always; ``sources``, ``tools``, ``usage``,
        ``finish_reason`` and ``finish_category``, ``guard`` (its verdicts: why a reply was cut
        or refused) and ``experiment`` when the turn had them."""
        kept = {"trace_id": self.trace_id, "version": self.version, "timings": self.timings}
        optional = {
            "sources": self.sources,
            "tools": self.tools,
            "usage": self.usage,
            "finish_reason": self.finish_reason,
            "finish_category": self.finish_category,
            "experiment": self.experiment,
            "guard": self.guard,
        }
        return kept | {key: value for key, value in optional.items() if value}
