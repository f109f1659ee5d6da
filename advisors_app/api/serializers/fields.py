"""The API's own field classes: text that must be text, a slug looked up only when PostgreSQL
can hold it, an advisor order as people write it (read as the admin reads it:
:func:`advisors_app.orders.clean_order`)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from advisors_app.orders import ORDER_FORMS, clean_order
from advisors_app.validation import text_problem

__all__ = ["OrderField", "SlugLookupField", "TextField"]


class TextField(serializers.CharField):
    """A ``CharField`` that takes text only: DRF's turns a number or a boolean into its text
    (``{"title": 42}`` stored "42"), where the rest of the API refuses the wrong type."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class SlugLookupField(serializers.SlugRelatedField):
    """A ``SlugRelatedField`` that refuses text PostgreSQL cannot hold before looking it up."""

    def to_internal_value(self, data: Any) -> Any:
        problem = text_problem(data) if isinstance(data, str) else None
        if problem:
            raise serializers.ValidationError(problem)
        return super().to_internal_value(data)


@extend_schema_field(
    {
        "oneOf": [{"type": "integer"}, {"type": "string", "example": "HIGHEST+200"}],
        "nullable": True,
    }
)
class OrderField(serializers.Field):
    """An advisor order: an integer, ``"HIGHEST+N"`` or ``"LOWEST-N"``; null: the type's default."""

    def to_internal_value(self, data: Any) -> int | None:
        if isinstance(data, bool) or not isinstance(data, (int, str)):
            raise serializers.ValidationError(ORDER_FORMS)
        try:
            return clean_order(str(data))
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def to_representation(self, value: Any) -> int | None:
        return value
