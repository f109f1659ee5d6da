"""What a model call costs: admin prices, the packaged genai-prices data, or unknown.

A call is priced by the chat-model configuration it ran on (:class:`ModelRef`):

1. an admin price (:class:`~advisors_app.models.ModelPrice`) valid at the call's time — for that
   configuration first, else the longest matching model-name pattern — always wins;
2. else the configuration's pricing mode: ``free`` → zero; ``auto`` → the ``genai-prices``
   package's offline data for the provider (matched by base URL, OpenAI itself without one)
   and model; ``manual`` → nothing more;
3. else the price is **unknown**: the cost is stored as ``None`` with source ``unknown`` and
   flagged in the admin, never read as zero.

A configuration with a blank mode is ``free`` when it runs on the embedded or scripted
provider or on a server on this machine or a private network, ``auto`` otherwise.

Admin prices and modes are read once and kept for :data:`CACHE_SECONDS` (and dropped at once
in the process that saves a change), so pricing a call needs no query.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from advisors_app.models import ChatModelConfig, ModelPrice
from advisors_app.models.costs import PriceSource

__all__ = [
    "CACHE_SECONDS",
    "Cost",
    "ModelRef",
    "Price",
    "PriceBook",
    "clear_price_cache",
    "cost_of",
    "price_book",
    "priced_as",
    "pricing_mode",
]

#: The attribute :func:`priced_as` sets on a chat model.
MODEL_REF_ATTRIBUTE = "advisors_model_ref"

#: How long a process keeps admin prices and pricing modes before reading them again.
CACHE_SECONDS = 30.0
_MILLION = Decimal(1_000_000)
_ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class ModelRef:
    """The chat model a call ran on: its configuration's slug (the alias for a settings
    model), provider, model name and base URL."""

    config: str
    provider: str
    model: str = ""
    base_url: str = ""

    @classmethod
    def of(cls, slug: str, config: Mapping[str, Any]) -> ModelRef:
        """From a configuration mapping (``ModelConfig.to_config`` or a settings alias)."""
        return cls(
            slug,
            str(config.get("provider", "")),
            str(config.get("model") or ""),
            str(config.get("base_url") or ""),
        )


def priced_as(model: Any, slug: str, config: Mapping[str, Any]) -> Any:
    """``model``, marked as built from configuration ``slug``: a meter that did not build it
    (a judge's model, resolved by the evaluator) prices its calls by that configuration."""
    setattr(model, MODEL_REF_ATTRIBUTE, ModelRef.of(slug, config))
    return model


@dataclass(frozen=True, slots=True)
class Price:
    """Per million tokens; ``cached_input`` ``None``: cached prompt tokens cost ``input``."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None
    currency: str
    source: str


@dataclass(frozen=True, slots=True)
class Cost:
    """What one call cost; ``input``/``output`` ``None`` when its price is unknown."""

    input: Decimal | None
    output: Decimal | None
    currency: str
    source: str

    @property
    def total(self) -> Decimal | None:
        if self.input is None or self.output is None:
            return None
        return self.input + self.output

    @property
    def known(self) -> bool:
        return self.source != PriceSource.UNKNOWN


_UNKNOWN = Cost(None, None, "", PriceSource.UNKNOWN)


@dataclass(frozen=True, slots=True)
class PriceBook:
    """Admin prices (newest first) and each configuration's pricing mode, as read at
    ``read_at``: prices calls without a query."""

    prices: tuple[ModelPrice, ...]
    modes: Mapping[str, str]
    read_at: float

    def price_for(self, ref: ModelRef, at: datetime | None = None) -> Price | None:
        """The price of a call of ``ref`` at ``at`` (default: now); ``None`` when unknown."""
        at = at or timezone.now()
        admin = _admin_price(self.prices, ref, at)
        if admin is not None:
            return admin
        mode = pricing_mode(ref, self.modes.get(ref.config, ""))
        if mode == "free":
            return Price(_ZERO, _ZERO, None, "", PriceSource.FREE)
        if mode == "auto":
            return _package_price(ref.model, ref.provider, ref.base_url)
        return None


_lock = threading.Lock()
_book: PriceBook | None = None


def clear_price_cache(**_: Any) -> None:
    """Drop the cached admin prices and modes (on every save or delete of either)."""
    global _book
    _book = None


for _model in (ModelPrice, ChatModelConfig):
    post_save.connect(clear_price_cache, sender=_model, dispatch_uid=f"pricing-{_model.__name__}")
    post_delete.connect(
        clear_price_cache, sender=_model, dispatch_uid=f"pricing-del-{_model.__name__}"
    )


def price_book(*, fresh: bool = False) -> PriceBook:
    """Blocking: the admin prices and modes, read again when older than
    :data:`CACHE_SECONDS` (or when ``fresh``)."""
    global _book
    book = _book
    if not fresh and book is not None and time.monotonic() - book.read_at < CACHE_SECONDS:
        return book
    with _lock:
        prices = tuple(
            ModelPrice.objects.select_related("chat_model").order_by("-valid_from", "-pk")
        )
        modes = dict(ChatModelConfig.objects.values_list("slug", "pricing"))
        book = _book = PriceBook(prices, modes, time.monotonic())
    return book


def pricing_mode(ref: ModelRef, mode: str = "") -> str:
    """``auto``, ``manual`` or ``free``: ``mode`` (a configuration's field), or the default for
    the provider and base URL when blank."""
    if mode:
        return mode
    if ref.provider in ("embedded", "scripted"):
        return "free"
    return "free" if _self_hosted(ref.base_url) else "auto"


def _self_hosted(base_url: str) -> bool:
    """Whether ``base_url`` is a server on this machine or a private network."""
    host = urlsplit(base_url).hostname if base_url else None
    if not host:
        return False
    if host == "localhost" or host.endswith((".local", ".internal", ".localhost")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_private or address.is_loopback or address.is_link_local


def _admin_price(prices: tuple[ModelPrice, ...], ref: ModelRef, at: datetime) -> Price | None:
    best: tuple[int, ModelPrice] | None = None
    for row in prices:  # newest first: the first valid row of a rank wins
        if row.valid_from > at:
            continue
        if row.chat_model_id is not None:
            rank = 1_000_000 if row.chat_model.slug == ref.config else -1
        else:
            rank = len(row.model_pattern) if _matches(row.model_pattern, ref.model) else -1
        if rank >= 0 and (best is None or rank > best[0]):
            best = (rank, row)
    if best is None:
        return None
    row = best[1]
    return Price(
        row.input_per_million,
        row.output_per_million,
        row.cached_input_per_million,
        row.currency,
        PriceSource.OVERRIDE,
    )


def _matches(pattern: str, model: str) -> bool:
    return bool(model) and fnmatch.fnmatchcase(model.lower(), pattern.strip().lower())


@lru_cache(maxsize=256)
def _package_price(model: str, provider: str, base_url: str) -> Price | None:
    """The genai-prices data's current price, per million tokens (``None``: not in it)."""
    if not model:
        return None
    from genai_prices import Usage, calc_price

    where: dict[str, Any] = {"provider_api_url": base_url} if base_url else {}
    if not base_url and provider == "openai":
        where = {"provider_id": "openai"}
    try:
        found = calc_price(Usage(input_tokens=1_000_000), model_ref=model, **where)
    except LookupError:
        return None
    price = found.model_price
    return Price(
        _per_million(price.input_mtok),
        _per_million(price.output_mtok),
        _per_million(price.cache_read_mtok) if price.cache_read_mtok is not None else None,
        "USD",  # genai-prices' prices are in US dollars
        PriceSource.PACKAGE,
    )


def _per_million(value: Any) -> Decimal:
    """A flat genai-prices price; a tiered one (by prompt size) at its base tier."""
    if value is None:
        return _ZERO
    if isinstance(value, Decimal):
        return value
    base = getattr(value, "base", None)
    return Decimal(str(base if base is not None else value))


def cost_of(
    price: Price | None, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
) -> Cost:
    """What ``prompt_tokens`` (of which ``cached_tokens`` came from the provider's cache) and
    ``completion_tokens`` cost at ``price``."""
    if price is None:
        return _UNKNOWN
    cached = min(max(cached_tokens, 0), prompt_tokens)
    cached_rate = price.cached_input if price.cached_input is not None else price.input
    input_cost = (price.input * (prompt_tokens - cached) + cached_rate * cached) / _MILLION
    output_cost = price.output * completion_tokens / _MILLION
    return Cost(input_cost, output_cost, price.currency, price.source)
