"""Metering model calls: admit each call before it is made, and report what it used.

An application that prices calls or caps spending puts a :class:`ModelCallMeter` in the request
context under :data:`MODEL_CALL_METER`. The model advisors (``ChatModelCallAdvisor`` /
``ChatModelStreamAdvisor``) then, for **every** model call of the turn — tool-loop rounds and
validation retries included — first ``await meter.admit(model, prompt)``: the meter may refuse
the call (raise :class:`~advisors_app.core.exceptions.BudgetExceededError`) or hand back a
cheaper model to call instead; afterwards they tell the admitted call what it used
(:meth:`MeteredCall.finished`: the reported usage, the text received, whether it completed —
a cancelled or failed stream reports what arrived so far). ``finished`` is synchronous and
does no I/O, so it is safe in ``finally`` blocks of cancelled streams; the meter settles its
accounts later, when the turn ends.

Model calls made outside the model advisors go through :class:`MeteredChatModel` (issue 36).

No Spring AI counterpart (issue 21). Without a meter in the context nothing changes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, runtime_checkable

from .model import ChatModel
from .prompt import Prompt
from .response import ChatResponse, Usage

__all__ = ["MODEL_CALL_METER", "MeteredCall", "MeteredChatModel", "ModelCallMeter"]

#: Context key of the request's :class:`ModelCallMeter`.
MODEL_CALL_METER = "advisors.model_call_meter"


@runtime_checkable
class MeteredCall(Protocol):
    """One admitted model call."""

    #: The model to call: the one asked for, or the cheaper one the meter chose.
    model: ChatModel

    def finished(self, usage: Usage | None, texts: Sequence[str], completed: bool) -> None:
        """Record what the call used: the provider's ``usage`` (``None`` when it reported
        none), the ``texts`` received (for estimating what an interrupted stream used), and
        whether the call ``completed``. Called exactly once, without I/O."""
        ...


@runtime_checkable
class ModelCallMeter(Protocol):
    """Admits model calls (see the module docstring)."""

    async def admit(self, model: ChatModel, prompt: Prompt) -> MeteredCall:
        """Admit a call of ``model`` with ``prompt``, or raise ``BudgetExceededError``."""
        ...


class MeteredChatModel:
    """``model`` whose every call ``meter`` admits and records, as the model advisors do: for
    model calls made outside a chain's model advisors (a compaction's summary, a judge's
    verdict), so they are priced and held to budgets like a turn's. Everything else (default
    options, context window, …) is ``model``'s."""

    def __init__(self, model: ChatModel, meter: ModelCallMeter) -> None:
        self.wrapped = model
        self.meter = meter

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    async def call(self, prompt: Prompt) -> ChatResponse:
        metered = await self.meter.admit(self.wrapped, prompt)
        try:
            response = await metered.model.call(prompt)
        except BaseException:
            metered.finished(None, (), completed=False)
            raise
        metered.finished(response.metadata.usage, (response.text,), completed=True)
        return response

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        metered = await self.meter.admit(self.wrapped, prompt)
        usage: Usage | None = None
        texts: list[str] = []
        completed = False
        try:
            async for chunk in metered.model.stream(prompt):
                usage = chunk.metadata.usage or usage
                texts.append(chunk.text)
                yield chunk
            completed = True
        finally:
            metered.finished(usage, texts, completed)
