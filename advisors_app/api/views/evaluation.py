"""Evaluation runs compared: ``GET /api/eval-runs/<a>/compare/<b>/`` (issue 22, "Compare").

Run ``a`` is the baseline, run ``b`` the candidate; the body is
:meth:`advisors_app.evaluation.compare.Comparison.to_dict`: counts of regressed / improved /
unchanged items, per score key the means, pass rates and the mean paired delta with its
bootstrap 95 % interval, and per item the deltas and status. For staff with
``advisors_app.view_evalrun`` (who may see runs in the admin); anyone else gets 403, an
unknown run 404.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.base import ApiView
from advisors_app.api.errors import Conflict, ErrorSerializer
from advisors_app.api.permissions import model_permission
from advisors_app.api.serializers.evaluation import EvalRunComparisonSerializer
from advisors_app.evaluation.compare import compare_runs
from advisors_app.models import EvalRun

__all__ = ["EvalRunCompareView", "sees_eval_runs"]


def sees_eval_runs(user: Any) -> bool:
    """Whether ``user`` may read evaluation runs: staff with ``advisors_app.view_evalrun``."""
    return bool(
        getattr(user, "is_staff", False) and user.has_perm(model_permission("view", EvalRun))
    )


class EvalRunCompareView(ApiView):
    """``GET /api/eval-runs/<a>/compare/<b>/``."""

    @extend_schema(
        tags=["evaluation"],
        summary="Compare two evaluation runs item by item",
        description="Run a is the baseline, run b the candidate, matched by dataset item key: "
        "per item the delta of every score and whether it regressed, improved or stayed; per "
        "score key the mean delta with a bootstrap 95 % interval (fixed seed). Staff with "
        "advisors_app.view_evalrun only.",
        responses={
            200: EvalRunComparisonSerializer,
            401: OpenApiResponse(ErrorSerializer, description="Not authenticated."),
            403: OpenApiResponse(
                ErrorSerializer, description="Not staff with advisors_app.view_evalrun."
            ),
            400: OpenApiResponse(
                ErrorSerializer, description="The same run twice, or runs of different datasets."
            ),
            404: OpenApiResponse(ErrorSerializer, description="No run has one of these ids."),
            409: OpenApiResponse(ErrorSerializer, description="A run has not finished yet."),
        },
    )
    def get(self, request: Request, a: int, b: int) -> Response:
        if not sees_eval_runs(request.user):
            raise PermissionDenied("This needs staff status and advisors_app.view_evalrun.")
        runs = EvalRun.objects.in_bulk([a, b])
        for run_id in (a, b):
            if run_id not in runs:
                raise Http404(f"No evaluation run {run_id}.")
        baseline, candidate = runs[a], runs[b]
        if a == b:
            raise ValidationError({"b": ["Compare a run with another run, not with itself."]})
        if baseline.dataset_id != candidate.dataset_id:
            raise ValidationError(
                {"b": [f"Run {b} is of another dataset than run {a}: their items do not match."]}
            )
        for run in (baseline, candidate):
            if not run.finished:
                raise Conflict(f"Run {run.pk} has not finished ({run.status}); compare it after.")
        comparison = compare_runs(baseline, candidate)
        return Response(EvalRunComparisonSerializer(comparison.to_dict()).data)
