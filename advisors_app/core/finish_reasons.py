"""Provider-neutral finish reason categories (Spring AI 2.1's ``FinishReasonCategory``).

Providers name the end of an answer their own way (OpenAI ``stop``/``length``/``tool_calls``,
Anthropic ``end_turn``/``max_tokens``/``tool_use``, Gemini ``STOP``/``MAX_TOKENS``/``SAFETY``),
and the advisors add their own (``APPROVAL_REQUIRED``, ``BUDGET_EXCEEDED``, a guard's
``CONTENT_FILTER``). :func:`finish_category` folds the raw reason into one of eight categories, so
a client tells "the model was cut short" from "a guard refused" without knowing every provider.

A ``CONTENT_FILTER`` is the provider's filter (``content_filter``) unless a guard of the chain
made it: the :class:`~advisors_app.core.advisors.guard.GuardAdvisor`'s refusal or held answer
(``guard_refusal`` / ``guard_held`` in the response metadata) and the
:class:`~advisors_app.core.advisors.safe_guard.SafeGuardAdvisor`'s refusal (``safeguard_stage``)
are ``guardrail``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from .advisors.budget_guard import BUDGET_EXCEEDED
from .advisors.guard import GUARD_HELD, GUARD_REFUSAL
from .advisors.safe_guard import SAFEGUARD_STAGE
from .exceptions import ToolCallLimitExceededError
from .memory.ids import CANCELLED, ERROR
from .tools.approval import ToolApprovalRequiredError

__all__ = ["FinishReasonCategory", "finish_category"]


class FinishReasonCategory(StrEnum):
    """Why an answer ended, whatever the provider called it."""

    #: The model ended its answer (also an unknown provider reason: the model chose to stop).
    STOP = "stop"
    #: A limit cut the answer short: max tokens, the tool loop's call limit.
    LENGTH = "length"
    #: The model asked for tool calls (the tool loop was off, or did not run them).
    TOOL_CALLS = "tool_calls"
    #: The provider's content filter withheld the answer.
    CONTENT_FILTER = "content_filter"
    #: A guard advisor of the chain refused or held the answer, or a budget guard refused.
    GUARDRAIL = "guardrail"
    #: Tool calls wait for a person's decision; the turn paused.
    APPROVAL_REQUIRED = "approval_required"
    #: The caller stopped the turn.
    CANCELLED = "cancelled"
    #: The turn failed.
    ERROR = "error"


_C = FinishReasonCategory
# Raw reasons, casefolded, of the providers and advisors this app knows.
_RAW: Mapping[str, FinishReasonCategory] = {
    "stop": _C.STOP,
    "end_turn": _C.STOP,
    "stop_sequence": _C.STOP,
    "eos": _C.STOP,
    "length": _C.LENGTH,
    "max_tokens": _C.LENGTH,
    "model_length": _C.LENGTH,
    ToolCallLimitExceededError.FINISH_REASON.casefold(): _C.LENGTH,
    "tool_calls": _C.TOOL_CALLS,
    "tool_call": _C.TOOL_CALLS,
    "tool_use": _C.TOOL_CALLS,
    "function_call": _C.TOOL_CALLS,
    "content_filter": _C.CONTENT_FILTER,
    "safety": _C.CONTENT_FILTER,
    "recitation": _C.CONTENT_FILTER,
    "prohibited_content": _C.CONTENT_FILTER,
    "blocklist": _C.CONTENT_FILTER,
    "spii": _C.CONTENT_FILTER,
    "refusal": _C.CONTENT_FILTER,
    BUDGET_EXCEEDED.casefold(): _C.GUARDRAIL,
    ToolApprovalRequiredError.FINISH_REASON.casefold(): _C.APPROVAL_REQUIRED,
    CANCELLED: _C.CANCELLED,
    ERROR: _C.ERROR,
}
_GUARD_MARKS = (GUARD_REFUSAL, GUARD_HELD, SAFEGUARD_STAGE)


def finish_category(
    finish_reason: str | None, metadata: Mapping[str, Any] | None = None
) -> FinishReasonCategory | None:
    """The category of a raw ``finish_reason`` (``None`` for ``None``: no reason was given).

    ``metadata`` is the response metadata: a guard's marks in it make a ``CONTENT_FILTER``
    ``guardrail`` (see the module docstring). An unknown reason is ``stop``.
    """
    if not finish_reason:
        return None
    category = _RAW.get(finish_reason.casefold(), _C.STOP)
    if category is _C.CONTENT_FILTER and metadata and any(k in metadata for k in _GUARD_MARKS):
        return _C.GUARDRAIL
    return category
