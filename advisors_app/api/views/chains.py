"""Chains: every user lists and reads the enabled ones that ``production`` serves; staff create,
change and delete them (and see drafts, disabled and unpublished chains).

Writes change the chain's *draft*; callers keep getting what its ``production`` label serves
until someone publishes (``POST /api/chains/<slug>/versions/``) and moves the label
(:mod:`advisors_app.api.views.versions`).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import ProtectedError, Q, QuerySet, RestrictedError
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics

from advisors_app.api.base import ApiView
from advisors_app.api.errors import Conflict, ErrorSerializer
from advisors_app.api.pagination import ApiPagination
from advisors_app.api.permissions import IsStaffOrReadOnly, sees_chain_configuration
from advisors_app.api.serializers.chains import (
    ChainConfigSerializer,
    ChainSerializer,
    with_version_state,
)
from advisors_app.models import PRODUCTION, AdvisorChain, ChainVersion

__all__ = ["ChainDetailView", "ChainListView"]

_READ = {401: OpenApiResponse(ErrorSerializer, description="Not authenticated.")}
_WRITE = {
    400: OpenApiResponse(
        ErrorSerializer,
        description="Invalid configuration: fields name the problem (advisors.1.params.top_k, "
        "default_options, tools); chain lint errors are under advisors.",
    ),
    401: OpenApiResponse(ErrorSerializer, description="Not authenticated."),
    403: OpenApiResponse(ErrorSerializer, description="Not staff."),
}
_MISSING = {404: OpenApiResponse(ErrorSerializer, description="No such chain.")}
_STAFF_NOTE = (
    " Staff receive the whole configuration (the ChainConfig fields: chat_model, advisors, "
    "lint, ...) and see disabled and unpublished chains too. The configuration is the chain's "
    "draft: what callers get is the version its production label points at (see versions and "
    "labels)."
)


class _ChainView(ApiView):
    permission_classes = [IsStaffOrReadOnly]
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet[AdvisorChain]:
        chains = AdvisorChain.objects.order_by("slug")
        if not sees_chain_configuration(self.request.user):
            # Only what callers can run: a chain nothing serves yet (or any more) is a 404,
            # its name and description the business of those who edit it.
            chains = chains.filter(enabled=True, labels__name=PRODUCTION)
        if self.request.method == "GET":
            chains = with_version_state(
                chains.select_related("chat_model", "system_template").prefetch_related("advisors")
            )
        return chains

    def get_serializer_class(self) -> Any:
        if self.request.method == "GET" and not sees_chain_configuration(self.request.user):
            return ChainSerializer
        return ChainConfigSerializer


@extend_schema_view(
    get=extend_schema(
        tags=["chains"],
        summary="Chains you may call",
        description="Enabled chains that production serves, with the JSON Schema of the "
        "params a request may send." + _STAFF_NOTE,
        responses={200: ChainSerializer(many=True), **_READ},
    ),
    post=extend_schema(
        tags=["chains"],
        summary="Create a chain (staff)",
        request=ChainConfigSerializer,
        responses={201: ChainConfigSerializer, **_WRITE},
    ),
)
class ChainListView(_ChainView, generics.ListCreateAPIView):
    """``/api/chains/``: list (users), create (staff)."""

    pagination_class = ApiPagination


@extend_schema_view(
    get=extend_schema(
        tags=["chains"],
        summary="One chain",
        description="A chain with the JSON Schema of its request params." + _STAFF_NOTE,
        responses={200: ChainSerializer, **_READ, **_MISSING},
    ),
    put=extend_schema(
        tags=["chains"],
        summary="Replace a chain's configuration (staff)",
        request=ChainConfigSerializer,
        responses={200: ChainConfigSerializer, **_WRITE, **_MISSING},
    ),
    patch=extend_schema(
        tags=["chains"],
        summary="Change part of a chain's configuration (staff)",
        request=ChainConfigSerializer,
        responses={200: ChainConfigSerializer, **_WRITE, **_MISSING},
    ),
    delete=extend_schema(
        tags=["chains"],
        summary="Delete a chain (staff)",
        description="Deletes the chain with its versions and labels. Refused (409) while "
        "conversations or call logs refer to one of its versions: disable it instead.",
        responses={
            204: None,
            **_WRITE,
            **_MISSING,
            409: OpenApiResponse(
                ErrorSerializer, description="Conversations or call logs use its versions."
            ),
        },
    ),
)
class ChainDetailView(_ChainView, generics.RetrieveUpdateDestroyAPIView):
    """``/api/chains/<slug>/``: read (users), replace, change, delete (staff)."""

    def perform_destroy(self, instance: AdvisorChain) -> None:
        try:
            with transaction.atomic():  # a savepoint: a refused delete leaves nothing behind
                instance.delete()
        except (ProtectedError, RestrictedError) as exc:
            used = (
                ChainVersion.objects.filter(chain=instance)
                .filter(Q(conversations__isnull=False) | Q(call_logs__isnull=False))
                .values_list("number", flat=True)
                .distinct()
                .order_by("number")
            )
            if not used:
                raise Conflict(str(exc.args[0]), code="protected") from exc
            versions = ", ".join(f"v{n}" for n in used)
            raise Conflict(
                f"Cannot delete chain {instance.slug!r}: conversations or call logs refer to "
                f"its versions {versions}. Disable the chain instead "
                '(PATCH {"enabled": false}).',
                code="protected",
            ) from exc
