"""Template tags drawing a chain's picture (:mod:`advisors_app.admin.chain_picture`):
``{% load chain_pictures %}``, then ``{% chain_picture chain %}`` for a chain's draft as saved,
or ``{% draw_chain_picture picture %}`` for a picture a view prepared (``picture_context``)."""

from __future__ import annotations

from typing import Any

from django import template

from advisors_app.admin.chain_picture import chain_picture as _chain_picture
from advisors_app.admin.chain_picture import picture_context
from advisors_app.admin.chains import draft_check
from advisors_app.models import AdvisorChain

__all__ = ["chain_picture", "draw_chain_picture", "register"]

register = template.Library()

_TEMPLATE = "admin/advisors_app/chain_picture.html"


@register.inclusion_tag(_TEMPLATE)
def chain_picture(chain: AdvisorChain, caption: str = "") -> dict[str, Any]:
    """The picture of ``chain``'s draft (the rows as saved); the change page's lint has
    resolved the same snapshot already, and it is reused."""
    return picture_context(_chain_picture(draft_check(chain).snapshot), caption=caption)


@register.inclusion_tag(_TEMPLATE)
def draw_chain_picture(picture: dict[str, Any]) -> dict[str, Any]:
    """A picture prepared by a view (:func:`~advisors_app.admin.chain_picture.turn_picture`)."""
    return picture
