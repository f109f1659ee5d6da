"""``/api/chains/<slug>/online-evaluations/``: a chain's online evaluation rules (issue 39).

Staff only (others get 404, as for experiments); reading needs ``view_onlineevaluation``,
creating ``add_onlineevaluation`` — the model permissions the admin asks. Bad input is a 400
with field errors (an unknown evaluator, params its schema refuses, a rate outside 0–1).
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status as http
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.base import ApiView
from advisors_app.api.errors import ErrorSerializer
from advisors_app.api.permissions import StaffOnlyElseNotFound
from advisors_app.api.serializers.online import OnlineEvaluationSerializer
from advisors_app.models import AdvisorChain

__all__ = ["ChainOnlineEvaluationListView"]

_ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Field errors."),
    401: OpenApiResponse(ErrorSerializer, description="Not authenticated."),
    403: OpenApiResponse(ErrorSerializer, description="Staff without the permission."),
    404: OpenApiResponse(ErrorSerializer, description="No such chain."),
}


class ChainOnlineEvaluationListView(ApiView):
    """The chain's rules; ``POST`` adds one."""

    permission_classes = [StaffOnlyElseNotFound]

    def _chain(self, request: Request, slug: str, perm: str) -> AdvisorChain:
        if not request.user.has_perm(f"advisors_app.{perm}_onlineevaluation"):
            raise PermissionDenied(
                f"This needs the advisors_app.{perm}_onlineevaluation permission."
            )
        chain = AdvisorChain.objects.filter(slug=slug).first()
        if chain is None:
            raise Http404(f"No chain {slug!r}.")
        return chain

    @extend_schema(
        tags=["evaluation"],
        summary="A chain's online evaluation rules (staff with view_onlineevaluation)",
        responses={200: OnlineEvaluationSerializer(many=True), **_ERRORS},
    )
    def get(self, request: Request, slug: str) -> Response:
        chain = self._chain(request, slug, "view")
        rows = chain.online_evaluations.select_related("judge_model")
        return Response(OnlineEvaluationSerializer(rows, many=True).data)

    @extend_schema(
        tags=["evaluation"],
        summary="Add an online evaluation rule (staff with add_onlineevaluation)",
        request=OnlineEvaluationSerializer,
        responses={201: OnlineEvaluationSerializer, **_ERRORS},
    )
    def post(self, request: Request, slug: str) -> Response:
        chain = self._chain(request, slug, "add")
        serializer = OnlineEvaluationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        rule = serializer.save(chain=chain)
        return Response(OnlineEvaluationSerializer(rule).data, status=http.HTTP_201_CREATED)
