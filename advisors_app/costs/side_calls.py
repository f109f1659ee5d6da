"""Model calls outside a turn's chain, metered as the turn's are (issue 36).

A session-memory compaction summarises a conversation with a model after its turn has
committed, and an ``llm_judge`` evaluator asks a model for a verdict on a turn's answer: calls
a chain's model advisors never see. :class:`SideCalls` meters them for the user they are made
for, on the chain the turn ran — the turn's own meter (:class:`~advisors_app.costs.metering.
TurnMeter`) with that user's applicable budgets and the current prices:

* each call is priced, reserved on the budgets before it is made (refused with
  ``BudgetExceededError`` when a budget cannot take it) and booked when it ends
  (:class:`~advisors_app.core.metering.MeteredChatModel` over the side work's model);
* :meth:`SideCalls.close` settles the budgets and appends the calls to the call log of the
  turn the work is about (``trace_id``) — its ``cost_rounds``, each entry with its
  ``"purpose"`` (``"compaction"``, ``"judge"``), and its cost totals — in one transaction, so
  spend reports (:mod:`advisors_app.costs.reports`) and ``manage.py reprice`` count them as
  the turn's. Without a call log (a compaction forced on a conversation never logged) the
  budgets are still charged.

Query rewriting in the retrieval advisors runs inside the turn's chain and is metered by the
turn's own meter (:mod:`advisors_app.core.rag`): nothing here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.db import transaction

from advisors_app.core.metering import MeteredChatModel
from advisors_app.core.model import ChatModel
from advisors_app.costs.budgets import applicable_budgets, clamp
from advisors_app.costs.metering import TurnMeter
from advisors_app.costs.pricing import ModelRef, price_book
from advisors_app.models import CallLog
from advisors_app.models.costs import PriceSource
from advisors_app.stores.scoped import user_tenant

__all__ = ["SideCalls"]

logger = logging.getLogger(__name__)


class SideCalls:
    """Meters the model calls of one piece of side work (see the module docstring).

    Blocking to build and to :meth:`close` (budgets, prices, the call log); the calls
    themselves are async. ``user`` ``None``: priced and logged, no budget applies.
    """

    def __init__(
        self, user: Any, chain_id: int | None, *, purpose: str, trace_id: str | None = None
    ) -> None:
        budgets = (
            applicable_budgets(user, chain_id, lambda: user_tenant(user))
            if user is not None
            else []
        )
        self.purpose = purpose
        self.trace_id = trace_id
        self.meter = TurnMeter({}, price_book(), budgets, user)

    def model(self, model: ChatModel, slug: str, config: Mapping[str, Any]) -> ChatModel:
        """``model`` (built from configuration ``slug``) with its calls metered."""
        self.meter.models = {**self.meter.models, id(model): ModelRef.of(slug, config)}
        return MeteredChatModel(model, self.meter)  # type: ignore[return-value]

    def close(self) -> None:
        """Blocking: settle the budgets and add the calls to the turn's call log."""
        if not self.meter.rounds:
            return
        with transaction.atomic():
            self.meter.settle()
            if self.trace_id:
                _append(self.trace_id, self.purpose, self.meter.summary())


def _append(trace_id: str, purpose: str, summary: Mapping[str, Any]) -> None:
    """Add ``summary``'s priced rounds to call log ``trace_id`` (its totals too)."""
    log = CallLog.objects.select_for_update().filter(trace_id=trace_id).first()
    rounds = [dict(entry, purpose=purpose) for entry in summary["cost_rounds"]]
    if log is None or not rounds:
        return
    had = bool(log.cost_rounds)
    log.cost_rounds = [*(log.cost_rounds or []), *rounds]
    if not had:
        log.currency = summary.get("currency", "")
        log.price_source = summary.get("price_source", "")
        for name in ("input_cost", "output_cost", "total_cost"):
            setattr(log, name, summary.get(name))
    else:
        both_known = log.total_cost is not None and summary.get("total_cost") is not None
        if both_known and log.currency == summary.get("currency"):
            for name in ("input_cost", "output_cost", "total_cost"):
                setattr(log, name, clamp(getattr(log, name) + Decimal(summary[name])))
        else:
            log.input_cost = log.output_cost = log.total_cost = None
        if log.price_source != summary.get("price_source"):
            unknown = PriceSource.UNKNOWN in (log.price_source, summary.get("price_source"))
            log.price_source = PriceSource.UNKNOWN if unknown else PriceSource.MIXED
    log.save(update_fields=["cost_rounds", "currency", "price_source", *_COSTS])


_COSTS = ("input_cost", "output_cost", "total_cost")
