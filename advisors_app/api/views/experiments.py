"""Experiments for staff: list and create per chain, read and change, start / pause / stop /
conclude, results per arm (issue 37; docs/experiments.md).

Thin transports over :mod:`advisors_app.experiments`. As the version endpoints: authenticated
users who are not staff get 404; staff read with ``advisors_app.view_advisorchain``; every write
needs ``advisors_app.run_experiment`` (403 otherwise), and concluding also the permission to
move the label (``change_chainlabel``, and ``promote_production`` for ``production``).
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status as http
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.base import ApiView
from advisors_app.api.errors import ErrorSerializer
from advisors_app.api.permissions import StaffOnlyElseNotFound
from advisors_app.api.serializers.experiments import (
    ConcludeSerializer,
    ExperimentSerializer,
    ExperimentWriteSerializer,
    ReasonSerializer,
)
from advisors_app.experiments import status as statuses
from advisors_app.experiments.editing import ExperimentError, create_experiment, update_experiment
from advisors_app.experiments.lifecycle import conclude
from advisors_app.experiments.results import results
from advisors_app.models import AdvisorChain, Experiment

__all__ = [
    "ChainExperimentListView",
    "ExperimentActionView",
    "ExperimentConcludeView",
    "ExperimentDetailView",
    "ExperimentResultsView",
]

_TAGS = ["experiments"]
_ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Field errors."),
    401: OpenApiResponse(ErrorSerializer, description="Not authenticated."),
    403: OpenApiResponse(ErrorSerializer, description="Staff without the permission."),
    404: OpenApiResponse(ErrorSerializer, description="No such experiment or chain."),
}
RUN_EXPERIMENT = "advisors_app.run_experiment"


def _body(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise ExperimentError(
            "Send a JSON object.", fields={"non_field_errors": ["Send a JSON object."]}
        )
    return request.data


class _ExperimentView(ApiView):
    permission_classes = [StaffOnlyElseNotFound]

    def require_runner(self, request: Request) -> None:
        if not request.user.has_perm(RUN_EXPERIMENT):
            raise PermissionDenied(f"This needs the {RUN_EXPERIMENT} permission.")

    def get_experiment(self, pk: int) -> Experiment:
        found = (
            Experiment.objects.select_related("chain")
            .prefetch_related("arms__version")
            .filter(pk=pk)
            .first()
        )
        if found is None:
            raise Http404(f"No experiment {pk}.")
        return found


class ChainExperimentListView(_ExperimentView):
    """``/api/chains/<slug>/experiments/``: the chain's experiments, newest first; ``POST``
    creates a draft."""

    def _chain(self, slug: str) -> AdvisorChain:
        chain = AdvisorChain.objects.filter(slug=slug).first()
        if chain is None:
            raise Http404(f"No chain {slug!r}.")
        return chain

    @extend_schema(
        tags=_TAGS,
        summary="A chain's experiments (staff)",
        responses={200: ExperimentSerializer(many=True), **_ERRORS},
    )
    def get(self, request: Request, slug: str) -> Response:
        rows = (
            self._chain(slug).experiments.select_related("chain").prefetch_related("arms__version")
        )
        return Response(ExperimentSerializer(rows, many=True).data)

    @extend_schema(
        tags=_TAGS,
        summary="Create an experiment (staff with run_experiment)",
        description='`{"name", "label": "production", "unit": "user"|"conversation", "arms": '
        '[{"name", "version", "weight"}], "guardrails": [{"metric", "max"|"min"}], "targeting"?}`: '
        "weights in basis points summing to 10000, the first arm the control. Created as a draft.",
        request=ExperimentWriteSerializer,
        responses={201: ExperimentSerializer, **_ERRORS},
    )
    def post(self, request: Request, slug: str) -> Response:
        self.require_runner(request)
        experiment = create_experiment(self._chain(slug), _body(request), user=request.user)
        fresh = self.get_experiment(experiment.pk)
        return Response(ExperimentSerializer(fresh).data, status=http.HTTP_201_CREATED)


class ExperimentDetailView(_ExperimentView):
    """``/api/experiments/<id>/``: read; ``PATCH`` changes name, weights, guardrails, targeting
    (and, in a draft, label, unit and arms)."""

    @extend_schema(
        tags=_TAGS,
        summary="An experiment (staff)",
        responses={200: ExperimentSerializer, **_ERRORS},
    )
    def get(self, request: Request, pk: int) -> Response:
        return Response(ExperimentSerializer(self.get_experiment(pk)).data)

    @extend_schema(
        tags=_TAGS,
        summary="Change an experiment (staff with run_experiment)",
        request=ExperimentWriteSerializer,
        responses={200: ExperimentSerializer, **_ERRORS},
    )
    def patch(self, request: Request, pk: int) -> Response:
        self.require_runner(request)
        experiment = self.get_experiment(pk)
        update_experiment(experiment, _body(request))
        return Response(ExperimentSerializer(self.get_experiment(pk)).data)


class ExperimentActionView(_ExperimentView):
    """``POST /api/experiments/<id>/start/``, ``.../pause/``, ``.../stop/`` (``{"reason"?}``)."""

    action_name = ""
    _ACTIONS = {"start": statuses.start, "pause": statuses.pause, "stop": statuses.stop}

    @extend_schema(
        tags=_TAGS,
        summary="Start, pause or stop an experiment (staff with run_experiment)",
        description="start: draft or paused → running (400 on `label` while another experiment "
        "of the label runs or is paused); pause: running → paused (every unit served the "
        "control's version); stop: running or paused → stopped (the label's version again).",
        request=ReasonSerializer,
        responses={
            200: ExperimentSerializer,
            409: OpenApiResponse(ErrorSerializer, description="The status does not allow it."),
            **_ERRORS,
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        self.require_runner(request)
        experiment = self.get_experiment(pk)
        serializer = ReasonSerializer(data=request.data if isinstance(request.data, dict) else {})
        serializer.is_valid(raise_exception=True)
        reason = serializer.validated_data.get("reason", "")
        self._ACTIONS[self.action_name](experiment, user=request.user, reason=reason)
        return Response(ExperimentSerializer(self.get_experiment(pk)).data)


class ExperimentConcludeView(_ExperimentView):
    """``POST /api/experiments/<id>/conclude/`` ``{"winner": "<arm name>"}``."""

    @extend_schema(
        tags=_TAGS,
        summary="Conclude: move the label to the winner's version (staff with run_experiment)",
        description="Moves the experiment's label through the same path as a manual promotion: "
        "the permission to move the label and the chain's promotion gate apply (403, 409).",
        request=ConcludeSerializer,
        responses={
            200: ExperimentSerializer,
            409: OpenApiResponse(
                ErrorSerializer, description="Refused by the promotion gate or the status."
            ),
            **_ERRORS,
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        self.require_runner(request)
        experiment = self.get_experiment(pk)
        serializer = ConcludeSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        conclude(experiment, serializer.validated_data["winner"], user=request.user)
        return Response(ExperimentSerializer(self.get_experiment(pk)).data)


class ExperimentResultsView(_ExperimentView):
    """``GET /api/experiments/<id>/results/``: figures per arm with 95 % intervals."""

    @extend_schema(tags=_TAGS, summary="Results per arm (staff)", responses={200: dict, **_ERRORS})
    def get(self, request: Request, pk: int) -> Response:
        return Response(results(self.get_experiment(pk)))
