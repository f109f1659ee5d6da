"""What turns used and cost: ``GET /api/usage/?group_by=day|chain|model&from=&to=`` (issue 21,
"Reports").

A user sees their own usage; staff with ``advisors_app.view_calllog`` (who may read every call
log in the admin) see everyone's, or one user's with ``?user=<id>``. The rows come from
:func:`advisors_app.costs.reports.usage_rows`: costs per currency as decimal strings, summed from
each
call's model rounds, and calls whose price is unknown counted apart — never as zero.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.base import ApiView
from advisors_app.api.errors import ErrorSerializer
from advisors_app.api.permissions import model_permission
from advisors_app.costs.reports import API_GROUPINGS, local_range, usage_rows
from advisors_app.models import CallLog

__all__ = [
    "DEFAULT_DAYS",
    "UsageQuerySerializer",
    "UsageRowSerializer",
    "UsageView",
    "sees_all_usage",
]

#: The days ``from`` goes back when not given: the last 30 days, today included.
DEFAULT_DAYS = 30


def sees_all_usage(user: Any) -> bool:
    """Whether ``user`` may read everyone's usage: staff who may view call logs (what the
    admin's call log pages and spend report ask)."""
    return bool(
        getattr(user, "is_staff", False) and user.has_perm(model_permission("view", CallLog))
    )


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


class UsageView(ApiView):
    """``GET /api/usage/?group_by=&from=&to=&user=``: usage rows, sorted by key."""

    @extend_schema(
        tags=["usage"],
        summary="Calls, tokens and cost, by day, chain or model",
        description="Your own usage; staff with advisors_app.view_calllog see everyone's, or "
        "one user's with user. Days are the site's time zone; groups without calls are "
        "left out.",
        parameters=[UsageQuerySerializer],
        responses={
            200: UsageRowSerializer(many=True),
            400: OpenApiResponse(
                ErrorSerializer, description="Unknown group_by, a bad date, or from after to."
            ),
            401: OpenApiResponse(ErrorSerializer, description="Not authenticated."),
            403: OpenApiResponse(
                ErrorSerializer, description="user names someone else and you may not see it."
            ),
        },
    )
    def get(self, request: Request) -> Response:
        query = UsageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        asked = query.validated_data
        user_id = asked.get("user")
        if not sees_all_usage(request.user):
            if user_id not in (None, request.user.pk):
                raise PermissionDenied(
                    "You may see your own usage only: other users' needs staff status and "
                    "advisors_app.view_calllog."
                )
            user_id = request.user.pk
        rows = usage_rows(asked["group_by"], asked["start"], asked["end"], user_id)
        return Response(UsageRowSerializer([row.to_dict() for row in rows], many=True).data)
