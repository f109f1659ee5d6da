"""Chains: every user lists and reads the enabled ones; staff create, change and delete them."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics

from advisors_app.api.base import ApiView
from advisors_app.api.errors import ErrorSerializer
from advisors_app.api.pagination import ApiPagination
from advisors_app.api.permissions import IsStaffOrReadOnly
from advisors_app.api.serializers import ChainConfigSerializer, ChainSerializer
from advisors_app.models import AdvisorChain

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
    "lint, ...) and see disabled chains too."
)


class _ChainView(ApiView):
    permission_classes = [IsStaffOrReadOnly]
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet[AdvisorChain]:
        chains = AdvisorChain.objects.order_by("slug")
        if not self.request.user.is_staff:
            chains = chains.filter(enabled=True)
        if self.request.method == "GET":
            chains = chains.prefetch_related("advisors")
        return chains

    def get_serializer_class(self) -> Any:
        if self.request.method == "GET" and not self.request.user.is_staff:
            return ChainSerializer
        return ChainConfigSerializer


@extend_schema_view(
    get=extend_schema(
        tags=["chains"],
        summary="Chains you may call",
        description="Enabled chains with the JSON Schema of the params a request may send."
        + _STAFF_NOTE,
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
        responses={204: None, **_WRITE, **_MISSING},
    ),
)
class ChainDetailView(_ChainView, generics.RetrieveUpdateDestroyAPIView):
    """``/api/chains/<slug>/``: read (users), replace, change, delete (staff)."""
