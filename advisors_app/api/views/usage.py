"""What turns used and cost: ``GET /api/usage/?group_by=day|chain|model&from=&to=`` (issue 21,
"Reports").

A user sees their own usage; staff with ``advisors_app.view_calllog`` (who may read every call
log in the admin) see everyone's, or one user's with ``?user=<id>``. The rows come from
:func:`advisors_app.costs.reports.usage_rows`: costs per currency as decimal strings, summed from
each call's model rounds, and calls whose price is unknown counted apart — never as zero.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.base import ApiView
from advisors_app.api.errors import ErrorSerializer
from advisors_app.api.permissions import model_permission
from advisors_app.api.serializers.usage import UsageQuerySerializer, UsageRowSerializer
from advisors_app.costs.reports import usage_rows
from advisors_app.models import CallLog

__all__ = ["UsageView", "sees_all_usage"]


def sees_all_usage(user: Any) -> bool:
    """Whether ``user`` may read everyone's usage: staff who may view call logs (what the
    admin's call log pages and spend report ask)."""
    return bool(
        getattr(user, "is_staff", False) and user.has_perm(model_permission("view", CallLog))
    )


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
