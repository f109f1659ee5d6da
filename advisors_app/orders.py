"""How advisor orders read to people: ``-2147483448`` is ``HIGHEST+200``."""

from __future__ import annotations

from advisors_app.core.advisor import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE

__all__ = ["format_order"]


def format_order(order: int | None) -> str:
    """``-2147483448`` → ``"HIGHEST+200"``; orders near the ends read better relative to them."""
    if order is None:
        return "default"
    if order - HIGHEST_PRECEDENCE <= 1_000_000:
        return "HIGHEST" if order == HIGHEST_PRECEDENCE else f"HIGHEST+{order - HIGHEST_PRECEDENCE}"
    if LOWEST_PRECEDENCE - order <= 1_000_000:
        return "LOWEST" if order == LOWEST_PRECEDENCE else f"LOWEST-{LOWEST_PRECEDENCE - order}"
    return str(order)
