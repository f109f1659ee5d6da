"""How advisor orders read to people: ``-2147483448`` is ``HIGHEST+200``, and back."""

from __future__ import annotations

import re

from advisors_app.core.advisor import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE

__all__ = [
    "ORDER_FORMS",
    "ORDER_RANGE",
    "clean_order",
    "format_order",
    "order_range_problem",
    "parse_order",
]

#: The message for text that is no order.
ORDER_FORMS = "Enter a whole number, HIGHEST+N or LOWEST-N."
#: The message for an order past either end.
ORDER_RANGE = f"Use {HIGHEST_PRECEDENCE} (HIGHEST) to {LOWEST_PRECEDENCE} (LOWEST)."

_RELATIVE = re.compile(r"^(HIGHEST|LOWEST)(?:_PRECEDENCE)?\s*(?:([+-])\s*(\d+))?$", re.IGNORECASE)


def format_order(order: int | None) -> str:
    """``-2147483448`` → ``"HIGHEST+200"``; orders near the ends read better relative to them."""
    if order is None:
        return "default"
    if order - HIGHEST_PRECEDENCE <= 1_000_000:
        return "HIGHEST" if order == HIGHEST_PRECEDENCE else f"HIGHEST+{order - HIGHEST_PRECEDENCE}"
    if LOWEST_PRECEDENCE - order <= 1_000_000:
        return "LOWEST" if order == LOWEST_PRECEDENCE else f"LOWEST-{LOWEST_PRECEDENCE - order}"
    return str(order)


def parse_order(value: int | str) -> int:
    """``"HIGHEST+200"`` → ``-2147483448``: an integer (or its text), ``HIGHEST[_PRECEDENCE]±N``
    or ``LOWEST[_PRECEDENCE]±N`` (any case, spaces ignored). The range is not checked
    (:func:`order_range_problem`). Raises ``ValueError`` (:data:`ORDER_FORMS`) for other text.
    """
    if isinstance(value, int):
        return value
    text = value.strip().replace(" ", "")
    match = _RELATIVE.match(text)
    if match:
        base = HIGHEST_PRECEDENCE if match.group(1).upper() == "HIGHEST" else LOWEST_PRECEDENCE
        offset = int(match.group(3) or 0)
        return base + offset if match.group(2) == "+" else base - offset
    try:
        return int(text)
    except ValueError:
        raise ValueError(ORDER_FORMS) from None


def order_range_problem(order: int) -> str | None:
    """:data:`ORDER_RANGE` when ``order`` is past ``HIGHEST_PRECEDENCE..LOWEST_PRECEDENCE``."""
    return None if HIGHEST_PRECEDENCE <= order <= LOWEST_PRECEDENCE else ORDER_RANGE


def clean_order(text: str) -> int | None:
    """An order as a person types it (the admin's order column, the API's ``order``): blank is
    ``None`` (the type's default), anything else :func:`parse_order` within range. Raises
    ``ValueError`` (:data:`ORDER_FORMS` or :data:`ORDER_RANGE`)."""
    if not text.strip():
        return None
    order = parse_order(text)
    problem = order_range_problem(order)
    if problem:
        raise ValueError(problem)
    return order
