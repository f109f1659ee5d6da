"""Call logs with costs, as the turn service writes them, for the report and usage tests."""

from __future__ import annotations

import itertools
from datetime import datetime
from decimal import Decimal
from typing import Any

from advisors_app.costs.budgets import money
from advisors_app.models import CallLog

__all__ = ["log_call", "priced_round"]

_traces = itertools.count(1)


def priced_round(
    model: str,
    prompt: int,
    completion: int,
    input_cost: str | None,
    output_cost: str | None,
    currency: str = "USD",
    source: str = "override",
) -> dict[str, Any]:
    """One ``cost_rounds`` entry (``input_cost``/``output_cost`` ``None``: unknown price)."""
    return {
        "model_config": model,
        "provider": "openai",
        "model": f"{model}-name",
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cached_prompt_tokens": 0,
        "estimated": False,
        "input_cost": input_cost,
        "output_cost": output_cost,
        # A free price has no currency (pricing.PriceBook.price_for).
        "currency": currency if input_cost is not None and source != "free" else "",
        "price_source": source if input_cost is not None else "unknown",
    }


def log_call(
    user: Any, chain: str, created: datetime, *rounds: dict[str, Any], **fields: Any
) -> CallLog:
    """A completed call log of ``user`` on chain slug ``chain`` at ``created`` with ``rounds``;
    its cost fields summed from them as the meter does (``None`` when a price is unknown or
    the currencies differ)."""
    known = all(r["input_cost"] is not None for r in rounds)
    currencies = {r["currency"] for r in rounds if r["currency"]}
    sources = {r["price_source"] for r in rounds}
    costs: dict[str, Any] = {}
    if rounds:
        costs["currency"] = next(iter(sorted(currencies)), "")
        costs["price_source"] = (
            "unknown" if not known else sources.pop() if len(sources) == 1 else "mixed"
        )
    if rounds and known and len(currencies) <= 1:
        input_cost = sum((Decimal(r["input_cost"]) for r in rounds), Decimal(0))
        output_cost = sum((Decimal(r["output_cost"]) for r in rounds), Decimal(0))
        costs.update(
            input_cost=input_cost, output_cost=output_cost, total_cost=input_cost + output_cost
        )
    prompt = sum(r["prompt_tokens"] for r in rounds)
    completion = sum(r["completion_tokens"] for r in rounds)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    log = CallLog.objects.create(
        chain_slug=chain,
        user=user,
        trace_id=f"trace{next(_traces):027d}",
        mode="call",
        status="ok",
        latency=0.5,
        usage=fields.pop("usage", usage),
        cost_rounds=list(rounds),
        **{**costs, **fields},
    )
    CallLog.objects.filter(pk=log.pk).update(created=created)
    log.refresh_from_db()
    return log


def amount(text: str) -> str:
    """``text`` as :func:`advisors_app.costs.budgets.money` writes it."""
    return money(Decimal(text))
