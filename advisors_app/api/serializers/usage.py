"""The query and the rows of ``GET /api/usage/`` (:mod:`advisors_app.api.views.usage`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from advisors_app.costs.reports import API_GROUPINGS, local_range

__all__ = ["DEFAULT_DAYS", "UsageQuerySerializer", "UsageRowSerializer"]

#: The days ``from`` goes back when not given: the last 30 days, today included.
DEFAULT_DAYS = 30


class UsageQuerySerializer(serializers.Serializer):
    """The query parameters of ``GET /api/usage/``; ``from`` is added in :meth:`get_fields`
    (a Python keyword cannot name a class attribute)."""

    group_by = serializers.ChoiceField(
        choices=list(API_GROUPINGS),
        default="day",
        help_text="day: the site's local days; chain: the chain's slug; model: the chat-model "
        "configuration's slug (a turn counts towards every model it called).",
    )
    to = serializers.DateField(
        required=False, help_text="The last day (inclusive), YYYY-MM-DD; default today."
    )
    user = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="Only this user's usage (staff with advisors_app.view_calllog; others may "
        "name only themselves).",
    )

    class Meta:
        ref_name = "UsageQuery"

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        first = serializers.DateField(
            required=False,
            help_text=f"The first day (inclusive), YYYY-MM-DD; default {DEFAULT_DAYS - 1} days "
            "before to.",
        )
        return {"group_by": fields.pop("group_by"), "from": first, **fields}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        last = attrs.get("to") or timezone.localdate()
        first = attrs.get("from")
        if first is None:
            try:
                first = last - timedelta(days=DEFAULT_DAYS - 1)
            except OverflowError:
                first = last.min
        if first > last:
            raise ValidationError({"from": [f"from ({first}) is after to ({last})."]})
        try:
            attrs["start"], attrs["end"] = local_range(first, last)
        except OverflowError:
            raise ValidationError({"from": [f"{first} is out of range."]}) from None
        attrs["from"], attrs["to"] = first, last
        return attrs


class UsageRowSerializer(serializers.Serializer):
    """One group's usage."""

    key = serializers.CharField(
        allow_null=True,
        help_text="The day (YYYY-MM-DD), chain slug or model configuration slug; for model, "
        "null gathers calls logged without their model calls (before costs were recorded).",
    )
    calls = serializers.IntegerField(help_text="Turns (call logs); for model, turns that used it.")
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost = serializers.DictField(
        child=serializers.CharField(),
        help_text='Currency → cost as a decimal string ({"USD": "0.0123"}), of the model calls '
        "whose price is known; free calls add nothing.",
    )
    unknown_cost_calls = serializers.IntegerField(
        help_text="Turns with a model call whose price is unknown (not counted in cost)."
    )

    class Meta:
        ref_name = "UsageRow"
