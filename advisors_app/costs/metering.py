"""The turn's model-call meter: prices every model call and holds it to the budgets.

:class:`TurnMeter` is the :class:`~advisors_app.core.metering.ModelCallMeter` the turn service
puts in each turn's request context. For every model call (tool rounds and validation retries
included) it:

1. prices the call (:mod:`advisors_app.costs.pricing`, from the prices read when the turn opened: no
   query);
2. when budgets apply to the turn, reserves the worst case — the most prompt tokens the
   provider may count × input price + the most the answer may take × output price — on all of
   them in one thread hop (:func:`advisors_app.costs.reservations.reserve`), which may refuse
   the call (``BudgetExceededError``) or switch it to a downgrade budget's cheaper model;
3. records what the call used when it ends (:meth:`_MeteredCall.finished`): the provider's
   usage, or — when it reports none, or a stream was cut — an estimate from the prompt and the
   text received (the round says ``"estimated": true``).

The worst case is a bound the provider's count must stay within, since the provider's count is
what is booked: a block budget must never end above its limit. The prompt's bound is the
model's own count where it can give one (``count_prompt_tokens``, as the embedded model's
llama.cpp tokenizer does), else the ``cl100k_base`` estimate × :data:`PROMPT_TOKEN_FACTOR`; the
answer's is ``max_tokens`` (what the provider is asked not to pass), else the context window's
rest, else :data:`UNBOUNDED_ANSWER_TOKENS`. A round the provider nonetheless counts above its
reservation (a provider adding text we never see) is logged; its excess is booked before the
turn's next round may reserve, and that round is refused when the books then leave no room.

When the turn ends, :meth:`TurnMeter.settle` (in the turn's final transaction) books the
outstanding costs and releases every unused reservation, and :meth:`TurnMeter.summary` gives the
call log its cost fields.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import transaction

from advisors_app.core.context_window import (
    answer_reserve,
    context_window_of,
    estimate_prompt_tokens,
)
from advisors_app.core.model import ChatModel
from advisors_app.core.prompt import ChatOptions, Prompt, merge_options
from advisors_app.core.providers.registry import create_chat_model
from advisors_app.core.response import Usage
from advisors_app.core.tokens import TiktokenTokenCountEstimator
from advisors_app.costs.budgets import ApplicableBudget, BudgetWarning, clamp, money, period_bounds
from advisors_app.costs.pricing import (
    MODEL_REF_ATTRIBUTE,
    Cost,
    ModelRef,
    Price,
    PriceBook,
    cost_of,
)
from advisors_app.costs.reservations import Reservation, reserve, settle
from advisors_app.db.threads import db_sync_to_async
from advisors_app.models.costs import PriceSource

__all__ = ["PROMPT_TOKEN_FACTOR", "UNBOUNDED_ANSWER_TOKENS", "TurnMeter", "cost_summary"]

logger = logging.getLogger(__name__)
_ZERO = Decimal(0)
#: The answer's worst case when neither ``max_tokens`` nor the model's context window bound it.
UNBOUNDED_ANSWER_TOKENS = 4096
#: The most prompt tokens a provider may count per ``cl100k_base`` token we estimate, for a
#: model that cannot count its prompt itself. ``cl100k_base`` packs up to three digits into a
#: token where the embedded model's and Llama's tokenizers read digits one by one (3×); prose
#: runs 5-30 % over it.
PROMPT_TOKEN_FACTOR = 3
_estimator = TiktokenTokenCountEstimator()
#: Cheaper models of downgrade budgets, built once per configuration.
_downgrade_models: dict[tuple[str, str], ChatModel] = {}


@dataclass
class _Round:
    ref: ModelRef
    price: Price | None
    prompt: Prompt
    #: The ``cl100k_base`` estimate of the prompt's tokens (counted only when budgets apply).
    prompt_tokens: int | None = None
    #: The worst case reserved for the round, in its price's currency (``None``: nothing).
    reserved: Decimal | None = None
    cost: Cost | None = None
    usage: Usage | None = None
    estimated: bool = False
    #: When the model call went out and when it ended (``time.perf_counter()``; ``None``:
    #: not yet): the spans of an OpenTelemetry export (:mod:`advisors_app.telemetry`).
    started: float | None = None
    ended: float | None = None

    def to_dict(self) -> dict[str, Any]:
        usage = self.usage or Usage()
        cost = self.cost
        return {
            "model_config": self.ref.config,
            "provider": self.ref.provider,
            "model": self.ref.model,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cached_prompt_tokens": usage.cached_prompt_tokens or 0,
            "estimated": self.estimated,
            "input_cost": _text(cost.input if cost else None),
            "output_cost": _text(cost.output if cost else None),
            "currency": cost.currency if cost else "",
            "price_source": cost.source if cost else PriceSource.UNKNOWN,
        }


def _text(value: Decimal | None) -> str | None:
    """A money amount as a plain decimal string (never ``5E-8``), or ``None``."""
    return None if value is None else money(value)


def _estimate(model: ChatModel, prompt: Prompt) -> int:
    """The ``cl100k_base`` estimate of ``prompt``'s tokens as ``model`` sends it (with the
    tools and schema of its default options too)."""
    options = merge_options(getattr(model, "default_options", None), prompt.options)
    return estimate_prompt_tokens(prompt, options=options)


def _factored(tokens: int) -> int:
    return math.ceil(tokens * PROMPT_TOKEN_FACTOR)


async def _prompt_bound(model: ChatModel, prompt: Prompt, estimate: int) -> int:
    """The most prompt tokens the provider may count: ``model``'s own count when it has one
    (``count_prompt_tokens``), else ``estimate`` × :data:`PROMPT_TOKEN_FACTOR`."""
    counter = getattr(model, "count_prompt_tokens", None)
    if counter is not None:
        try:
            return int(await counter(prompt))
        except Exception:
            logger.warning("%r could not count its prompt; bounding the estimate", model)
    return _factored(estimate)


async def _bounded_worst_cases(
    price: Price | None, model: ChatModel, prompt: Prompt, estimate: int
) -> dict[str, Decimal]:
    """:func:`_worst_cases` of a model call, the prompt bounded by :func:`_prompt_bound`
    (asked only when the prompt has a price)."""
    if price is None or not price.currency:
        return {}
    bound = await _prompt_bound(model, prompt, estimate) if price.input else estimate
    return _worst_cases(price, model, prompt, estimate, bound)


def _worst_cases(
    price: Price | None, model: ChatModel, prompt: Prompt, estimate: int, bound: int
) -> dict[str, Decimal]:
    """The call's worst case per currency — ``bound`` prompt tokens and the most the answer
    may take — (``{}``: an unknown or free price)."""
    if price is None or not price.currency:
        return {}
    cost = cost_of(price, bound, _answer_tokens(model, prompt, estimate))
    return {price.currency: cost.total or _ZERO}


def _answer_tokens(model: ChatModel, prompt: Prompt, prompt_tokens: int) -> int:
    """The most the answer may take: ``max_tokens`` (the provider is asked not to pass it),
    else the rest of the context window, else :data:`UNBOUNDED_ANSWER_TOKENS`."""
    options = merge_options(getattr(model, "default_options", None), prompt.options)
    if options is not None and options.max_tokens is not None:
        return answer_reserve(model, options)
    window = context_window_of(model)
    if window is not None:
        return max(window - prompt_tokens, 0)
    return UNBOUNDED_ANSWER_TOKENS


class _MeteredCall:
    __slots__ = ("_meter", "_round", "model")

    def __init__(self, meter: TurnMeter, model: ChatModel, round_: _Round) -> None:
        self._meter = meter
        self._round = round_
        self.model = model

    def finished(self, usage: Usage | None, texts: Sequence[str], completed: bool) -> None:
        round_ = self._round
        round_.ended = time.perf_counter()
        if usage is None or usage.is_empty:
            # No usage reported (a provider without it, a cut stream): estimate what went out
            # and what came back, and say so.
            usage = Usage(
                round_.prompt_tokens
                if round_.prompt_tokens is not None
                else estimate_prompt_tokens(round_.prompt),
                _estimator.estimate("".join(texts)) if texts else 0,
            )
            round_.estimated = True
        round_.usage = usage
        round_.cost = cost_of(
            round_.price,
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cached_prompt_tokens or 0,
        )
        self._meter._book(round_)


@dataclass
class TurnMeter:
    """Meters one turn (see the module docstring); not shared between turns."""

    #: ``id(model)`` → the configuration it was built from (the compiled chain's models).
    models: Mapping[int, ModelRef]
    #: The prices, as read when the turn opened.
    prices: PriceBook
    budgets: Sequence[ApplicableBudget] = ()
    user: Any = None
    rounds: list[_Round] = field(default_factory=list)
    warnings: list[BudgetWarning] = field(default_factory=list)
    #: Warnings not yet sent as ``budget_warning`` events (a stream sends them as they come).
    unsent_warnings: list[BudgetWarning] = field(default_factory=list)
    booked: Reservation = field(default_factory=Reservation)
    #: The configuration slug the turn was switched to by a downgrade budget, if any.
    downgraded_to: str | None = None
    #: The ids of the downgrade budgets reached this period (they take calls unconditionally).
    tripped: set[int] = field(default_factory=set)

    def start(self, warnings: Sequence[BudgetWarning], tripped: set[int]) -> None:
        """What the budgets said before the turn ran: warnings, and the downgrade budgets
        already reached (the turn starts on the cheaper model)."""
        self.warn(warnings)
        self.tripped = set(tripped)
        reached = next((b for b in self.budgets if b.id in self.tripped and b.downgrade_to), None)
        if reached is not None and reached.downgrade_to is not None:
            self.downgraded_to = reached.downgrade_to[0]

    def floor_estimates(
        self, model: ChatModel, message: str, options: ChatOptions | None
    ) -> dict[str, Decimal]:
        """Per currency, the least the turn's first call may cost: ``message`` alone as the
        prompt and the most the answer may take, on ``model`` or a downgrade budget's cheaper
        model, whichever is cheaper (a lower bound of the first call's reservation: advisors
        only add to the prompt; a model that counts its prompt itself is floored at the
        estimate, without asking it)."""
        if not self.budgets:
            return {}
        prompt = Prompt(message, options)
        candidates = [model]
        for budget in self.budgets:
            if budget.downgrade_to is not None:
                cheaper = self._downgrade_model(*budget.downgrade_to)
                if cheaper is not None:
                    candidates.append(cheaper)
        floors: dict[str, Decimal] = {}
        tokens = estimate_prompt_tokens(prompt)
        for candidate in candidates:
            price = self.prices.price_for(self._ref(candidate))
            counts = getattr(candidate, "count_prompt_tokens", None) is not None
            bound = tokens if counts else _factored(tokens)
            estimates = _worst_cases(price, candidate, prompt, tokens, bound)
            if not estimates:
                return {}  # an unknown price: no floor
            for currency, amount in estimates.items():
                floors[currency] = min(floors.get(currency, amount), amount)
        return floors

    def _ref(self, model: ChatModel) -> ModelRef:
        ref = self.models.get(id(model)) or getattr(model, MODEL_REF_ATTRIBUTE, None)
        if isinstance(ref, ModelRef):
            return ref
        name = getattr(getattr(model, "default_options", None), "model", None) or ""
        return ModelRef("", type(model).__name__, name)

    async def admit(self, model: ChatModel, prompt: Prompt) -> _MeteredCall:
        if self.downgraded_to is not None:
            model = self._downgrade_model(self.downgraded_to) or model
        ref = self._ref(model)
        round_ = _Round(ref, self.prices.price_for(ref), prompt)
        if self.budgets:
            round_.prompt_tokens = estimate = _estimate(model, prompt)
            estimates = await _bounded_worst_cases(round_.price, model, prompt, estimate)
            downgrade_estimates = await self._downgrade_estimates(prompt)
            reached, warnings = await db_sync_to_async(reserve)(
                self.budgets,
                estimates,
                self.booked,
                user=self.user,
                downgrade_estimates=downgrade_estimates,
                tripped=self.tripped,
            )
            if reached is not None and reached.downgrade_to is not None:
                estimates = downgrade_estimates  # what the call reserved
                slug, config = reached.downgrade_to
                if slug != ref.config:
                    model = self._downgrade_model(slug, config) or model
                    round_.ref = self._ref(model)
                    round_.price = self.prices.price_for(round_.ref)
                if self.downgraded_to is None:
                    warnings = [*warnings, self._downgraded(reached)]
                self.downgraded_to = slug
            if round_.price is not None:
                round_.reserved = estimates.get(round_.price.currency)
            self.warn(warnings)
        round_.started = time.perf_counter()  # after the reservation: the call itself
        self.rounds.append(round_)
        return _MeteredCall(self, model, round_)

    def _downgraded(self, budget: ApplicableBudget) -> BudgetWarning:
        """The warning that ``budget`` switched the turn to its cheaper model."""
        _, end = period_bounds(budget.period)
        shared = self.user is None or budget.subject != f"user:{self.user.pk}"
        slug = budget.downgrade_to[0] if budget.downgrade_to else None
        return BudgetWarning(
            budget.name, budget.limit, budget.limit, budget.currency, end, True, shared, slug
        )

    async def _downgrade_estimates(self, prompt: Prompt) -> dict[str, Decimal]:
        """Per currency, the dearest worst case of ``prompt`` on the downgrade budgets'
        cheaper models."""
        estimates: dict[str, Decimal] = {}
        for budget in self.budgets:
            if budget.downgrade_to is None:
                continue
            model = self._downgrade_model(*budget.downgrade_to)
            if model is None:
                continue
            price = self.prices.price_for(self._ref(model))
            worst = await _bounded_worst_cases(price, model, prompt, _estimate(model, prompt))
            for currency, amount in worst.items():
                estimates[currency] = max(estimates.get(currency, _ZERO), amount)
        return estimates

    def _downgrade_model(
        self, slug: str, config: Mapping[str, Any] | None = None
    ) -> ChatModel | None:
        if config is None:
            config = next(
                (
                    b.downgrade_to[1]
                    for b in self.budgets
                    if b.downgrade_to and b.downgrade_to[0] == slug
                ),
                None,
            )
            if config is None:
                return None
        key = (slug, repr(sorted(config.items())))
        model = _downgrade_models.get(key)
        if model is None:
            try:
                model = create_chat_model(config, name=slug)
            except ValueError:
                logger.exception("Budget downgrade model %r cannot be built", slug)
                return None
            _downgrade_models[key] = model
        # Known to the meter from now on, so its calls are priced by its configuration.
        self.models = {**self.models, id(model): ModelRef.of(slug, config)}
        return model

    def warn(self, warnings: Sequence[BudgetWarning]) -> None:
        """Add ``warnings`` the turn has not had yet (each budget once per turn)."""
        known = {w.budget for w in self.warnings}
        for warning in warnings:
            if warning.budget in known:
                continue
            self.warnings.append(warning)
            self.unsent_warnings.append(warning)

    def take_unsent_warnings(self) -> list[BudgetWarning]:
        taken, self.unsent_warnings = self.unsent_warnings, []
        return taken

    def _book(self, round_: _Round) -> None:
        """A round ended: its cost becomes what the turn owes each budget in its currency."""
        cost = round_.cost
        if not self.budgets or cost is None or cost.total is None:
            return
        if round_.reserved is not None and cost.total > round_.reserved:
            usage = round_.usage or Usage()
            logger.warning(
                "A call of %r cost %s %s, more than the %s reserved for it: the provider "
                "counted %d prompt tokens (estimated %s) and %d completion tokens. Budgets "
                "book the excess before the turn's next call; should this recur, raise "
                "advisors_app.costs.metering.PROMPT_TOKEN_FACTOR or set max_tokens.",
                round_.ref.config or round_.ref.model,
                money(cost.total),
                cost.currency,
                money(round_.reserved),
                usage.prompt_tokens,
                round_.prompt_tokens,
                usage.completion_tokens,
            )
        unsettled = self.booked.unsettled
        for budget in self.budgets:
            if budget.id in self.booked.vanished:
                continue
            if cost.currency == budget.currency:
                unsettled[budget.id] = unsettled.get(budget.id, _ZERO) + cost.total
            elif cost.total:
                logger.warning(
                    "A %s cost is not counted against budget %r (%s)",
                    cost.currency,
                    budget.name,
                    budget.currency,
                )

    def settle(self) -> None:
        """Blocking, in the turn's final transaction: book what is outstanding and release
        unused reservations (forgotten once the transaction commits; booked again by a later
        call should it roll back)."""
        if self.budgets and (self.booked.reserved or self.booked.unsettled):
            settle(self.budgets, self.booked)
            transaction.on_commit(self._settled)

    def _settled(self) -> None:
        self.booked.reserved.clear()
        self.booked.unsettled.clear()

    def cost(self) -> dict[str, Any]:
        """The turn's cost for its outcome: ``input``, ``output``, ``total`` (decimal strings,
        ``None`` when a price is unknown), ``currency``, ``price_source``; ``{}`` without a
        model call."""
        summary = self.summary()
        if not summary["cost_rounds"]:
            return {}
        return {
            "input": _text(summary.get("input_cost")),
            "output": _text(summary.get("output_cost")),
            "total": _text(summary.get("total_cost")),
            "currency": summary["currency"],
            "price_source": summary["price_source"],
        }

    def summary(self) -> dict[str, Any]:
        """The call log's cost fields (:func:`cost_summary` of the priced rounds)."""
        return cost_summary([(r.to_dict(), r.cost) for r in self.rounds if r.cost is not None])


def cost_summary(rounds: Sequence[tuple[Mapping[str, Any], Cost]]) -> dict[str, Any]:
    """The call log's cost fields for a turn's model rounds — each one's ``cost_rounds`` entry
    and its cost: ``input_cost``, ``output_cost``, ``total_cost`` (left out when a round's
    price is unknown or the rounds' currencies differ), ``currency``, ``price_source``,
    ``cost_rounds``. Also what ``manage.py reprice`` recomputes a stored log with."""
    if not rounds:
        return {"cost_rounds": []}
    costs = [cost for _, cost in rounds]
    sources = {c.source for c in costs}
    currencies = {c.currency for c in costs if c.currency}
    known = all(c.known for c in costs) and len(currencies) <= 1
    summary: dict[str, Any] = {
        "cost_rounds": [dict(entry) for entry, _ in rounds],
        "currency": next(iter(currencies), ""),
        "price_source": (
            PriceSource.UNKNOWN
            if not all(c.known for c in costs)
            else next(iter(sources))
            if len(sources) == 1
            else PriceSource.MIXED
        ),
    }
    if known:
        # Capped: an absurd admin price must not overflow the call log's columns.
        summary["input_cost"] = clamp(sum((c.input or _ZERO for c in costs), _ZERO))
        summary["output_cost"] = clamp(sum((c.output or _ZERO for c in costs), _ZERO))
        summary["total_cost"] = clamp(summary["input_cost"] + summary["output_cost"])
    return summary
