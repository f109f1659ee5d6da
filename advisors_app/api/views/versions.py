"""Chain versions and labels for staff: list, publish, diff, move labels, roll back, restore.

Thin transports over :mod:`advisors_app.definition` — the same functions the admin and the
management commands call, with the same permission rules (:func:`can_publish`,
:func:`can_move_label`). Authenticated users who are not staff get 404 from every endpoint
here; staff without the Django model permission get 403 on writes. Versions are immutable:
their endpoints answer ``PUT``, ``PATCH`` and ``DELETE`` with 405.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import generics
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.base import ApiView
from advisors_app.api.errors import Conflict, ErrorSerializer
from advisors_app.api.pagination import ApiPagination
from advisors_app.api.permissions import StaffOnlyElseNotFound
from advisors_app.api.serializers.versions import (
    ChainDiffSerializer,
    ChainLabelEventSerializer,
    ChainLabelSerializer,
    ChainVersionDetailSerializer,
    ChainVersionSerializer,
    LabelMoveSerializer,
    LabelRollbackSerializer,
    PublishSerializer,
    RestoreResultSerializer,
)
from advisors_app.definition import (
    PublishError,
    VersionLookupError,
    can_move_label,
    can_publish,
    diff_snapshots,
    move_label,
    publish,
    resolve_snapshot,
    restore_to_draft,
    rollback,
)
from advisors_app.definition.runtime import DRAFT
from advisors_app.evaluation.gate import gate_refusal
from advisors_app.models import (
    PRODUCTION,
    AdvisorChain,
    ChainLabel,
    ChainLabelEvent,
    ChainVersion,
)
from advisors_app.models.versions import LABEL_NAME_VALIDATOR

__all__ = [
    "ChainDiffView",
    "ChainLabelDetailView",
    "ChainLabelHistoryView",
    "ChainLabelListView",
    "ChainLabelRollbackView",
    "ChainVersionDetailView",
    "ChainVersionListView",
    "ChainVersionRestoreView",
]

_TAGS = ["versions"]
_AUTH = {401: OpenApiResponse(ErrorSerializer, description="Not authenticated.")}
_MISSING = {
    404: OpenApiResponse(ErrorSerializer, description="No such chain (or the caller is not staff).")
}
_READ = {**_AUTH, **_MISSING}


def _forbidden(what: str) -> dict[int, OpenApiResponse]:
    return {403: OpenApiResponse(ErrorSerializer, description=f"Staff without {what}.")}


_NUMBER = re.compile(r"[0-9]{1,10}")


def _ref_problem(ref: str) -> str | None:
    """Why ``ref`` cannot name a version, ``draft`` or a label, or ``None``."""
    if not ref:
        return "Name a version number, 'draft' or a label."
    if ref == DRAFT or _NUMBER.fullmatch(ref):
        return None
    try:
        LABEL_NAME_VALIDATOR(ref)
    except DjangoValidationError:
        return f"{ref!r} is not a version number, 'draft' or a label name."
    return None


def _label_permission(name: str) -> str:
    if name == PRODUCTION:
        return "the advisors_app.change_chainlabel and advisors_app.promote_production permissions"
    return "the advisors_app.change_chainlabel permission"


class _ChainScoped(ApiView):
    """A view under ``/api/chains/<slug>/`` for staff only (404 for anyone else)."""

    permission_classes = [StaffOnlyElseNotFound]
    _chain: AdvisorChain | None = None

    def get_chain(self) -> AdvisorChain:
        """The chain of the URL, enabled or not (staff see every chain); 404 when missing."""
        if self._chain is None:
            slug = self.kwargs["slug"]
            self._chain = AdvisorChain.objects.filter(slug=slug).first()
            if self._chain is None:
                raise Http404(f"No chain {slug!r}.")
        return self._chain

    def get_label(self) -> ChainLabel:
        name = self.kwargs["name"]
        label = self.get_chain().labels.select_related("version").filter(name=name).first()
        if label is None:
            raise Http404(f"Chain {self.kwargs['slug']!r} has no label {name!r}.")
        return label

    def require(self, allowed: bool, permission: str) -> None:
        """403 naming ``permission`` ("the advisors_app.x permission") unless ``allowed``."""
        if not allowed:
            raise PermissionDenied(f"This needs {permission}.")


def _versions(chain: AdvisorChain) -> QuerySet[ChainVersion]:
    return (
        chain.versions.select_related("created_by", "parent")
        .prefetch_related("labels")
        .order_by("-number")
    )


@extend_schema_view(
    get=extend_schema(
        tags=_TAGS,
        summary="A chain's versions, newest first (staff)",
        description="Each published version with who published it, its message, the version "
        "it was restored from (parent) and the labels pointing at it.",
        responses={200: ChainVersionSerializer(many=True), **_READ},
    ),
    post=extend_schema(
        tags=_TAGS,
        summary="Publish the draft (staff with add_chainversion)",
        description="Resolves, lints and compiles the chain's draft and stores it as a new "
        "immutable version: 201 with it. A draft identical to the newest version creates "
        "nothing: 200 with that version. Lint or compile errors (a factory that fails is "
        "`advisors_app.E113`) answer 400 listing them under `fields.draft`. The first version "
        "of a chain gets the `production` label; later ones are served only once a label "
        "is moved to them.",
        request=PublishSerializer,
        responses={
            201: ChainVersionDetailSerializer,
            200: OpenApiResponse(
                ChainVersionDetailSerializer, description="Nothing changed: the newest version."
            ),
            400: OpenApiResponse(
                ErrorSerializer, description="The draft has errors (fields.draft)."
            ),
            **_AUTH,
            **_forbidden("advisors_app.add_chainversion"),
            **_MISSING,
        },
    ),
)
class ChainVersionListView(_ChainScoped, generics.ListAPIView):
    """``/api/chains/<slug>/versions/``: list (staff), publish the draft (``POST``)."""

    queryset = ChainVersion.objects.none()  # the model, for the schema; see get_queryset
    serializer_class = ChainVersionSerializer
    pagination_class = ApiPagination

    def get_queryset(self) -> QuerySet[ChainVersion]:
        return _versions(self.get_chain())

    def post(self, request: Request, slug: str) -> Response:
        chain = self.get_chain()
        self.require(can_publish(request.user), "the advisors_app.add_chainversion permission")
        serializer = PublishSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            version, created = publish(
                chain, message=serializer.validated_data["message"], user=request.user
            )
        except PublishError as exc:
            raise ValidationError({"draft": [f"{m.id}: {m}" for m in exc.messages]}) from None
        body = ChainVersionDetailSerializer(_versions(chain).get(pk=version.pk)).data
        return Response(body, status=201 if created else 200)


@extend_schema_view(
    get=extend_schema(
        tags=_TAGS,
        summary="One version with its snapshot (staff)",
        responses={
            200: ChainVersionDetailSerializer,
            **_AUTH,
            404: OpenApiResponse(ErrorSerializer, description="No such chain or version."),
        },
    )
)
class ChainVersionDetailView(_ChainScoped):
    """``GET /api/chains/<slug>/versions/<n>/``. No writes: a version never changes (405)."""

    def get(self, request: Request, slug: str, number: int) -> Response:
        version = _versions(self.get_chain()).filter(number=number).first()
        if version is None:
            raise Http404(f"Chain {slug!r} has no version {number}.")
        return Response(ChainVersionDetailSerializer(version).data)


class ChainVersionRestoreView(_ChainScoped):
    """``POST /api/chains/<slug>/versions/<n>/restore/``: copy a version into the draft."""

    @extend_schema(
        tags=_TAGS,
        summary="Restore a version into the draft (staff with change_advisorchain)",
        description="Makes the chain's editable rows say what the version says; what labels "
        "serve does not change. Templates and word lists the version names are created when "
        "missing; existing ones that differ are left alone (other chains share them) and named "
        "in `notes`. The next version published from this draft names this one as its parent.",
        request=None,
        responses={
            200: RestoreResultSerializer,
            **_AUTH,
            **_forbidden("advisors_app.change_advisorchain"),
            404: OpenApiResponse(ErrorSerializer, description="No such chain or version."),
        },
    )
    def post(self, request: Request, slug: str, number: int) -> Response:
        chain = self.get_chain()
        self.require(
            request.user.has_perm("advisors_app.change_advisorchain"),
            "the advisors_app.change_advisorchain permission",
        )
        version = chain.versions.filter(number=number).first()
        if version is None:
            raise Http404(f"Chain {slug!r} has no version {number}.")
        notes = restore_to_draft(version)
        return Response(RestoreResultSerializer({"version": number, "notes": notes}).data)


class ChainDiffView(_ChainScoped):
    """``GET /api/chains/<slug>/diff/?from=&to=``: what changed between two snapshots."""

    @extend_schema(
        tags=_TAGS,
        summary="Diff two versions, labels or the draft (staff)",
        description="`from` and `to` each name a version number, `draft` (the editable rows) "
        "or a label. The answer has a unified text diff of the canonical snapshots, the "
        "changed chain fields, advisors added/removed/reordered/changed, per-template text "
        "diffs and word-list changes.",
        parameters=[
            OpenApiParameter(
                "from", str, required=True, description="A version number, draft or a label."
            ),
            OpenApiParameter(
                "to", str, required=True, description="A version number, draft or a label."
            ),
        ],
        responses={
            200: ChainDiffSerializer,
            400: OpenApiResponse(
                ErrorSerializer, description="A missing or unknown from/to (fields name it)."
            ),
            **_READ,
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        chain = self.get_chain()
        resolved: dict[str, tuple[str, Any]] = {}
        errors: dict[str, list[str]] = {}
        for field in ("from", "to"):
            ref = request.query_params.get(field, "")
            problem = _ref_problem(ref)
            if problem:
                errors[field] = [problem]
            else:
                try:
                    resolved[field] = resolve_snapshot(chain, ref)
                except VersionLookupError as exc:
                    errors[field] = [str(exc)]
        if errors:
            raise ValidationError(errors)
        (a_name, a), (b_name, b) = resolved["from"], resolved["to"]
        diff = diff_snapshots(a, b, names=(a_name, b_name))
        return Response({"from": a_name, "to": b_name, **diff})


@extend_schema_view(
    get=extend_schema(
        tags=_TAGS,
        summary="A chain's labels (staff)",
        description="Every label with the version number it points at. `production` is what "
        "callers get unless they name another label or a version.",
        responses={200: ChainLabelSerializer(many=True), **_READ},
    )
)
class ChainLabelListView(_ChainScoped, generics.ListAPIView):
    """``GET /api/chains/<slug>/labels/``."""

    queryset = ChainLabel.objects.none()  # the model, for the schema; see get_queryset
    serializer_class = ChainLabelSerializer
    pagination_class = ApiPagination

    def get_queryset(self) -> QuerySet[ChainLabel]:
        return self.get_chain().labels.select_related("version").order_by("name")


_LABEL_MISSING = {
    404: OpenApiResponse(ErrorSerializer, description="No such chain or label."),
}


@extend_schema_view(
    get=extend_schema(
        tags=_TAGS,
        summary="One label (staff)",
        responses={200: ChainLabelSerializer, **_AUTH, **_LABEL_MISSING},
    ),
    put=extend_schema(
        tags=_TAGS,
        summary="Move (or create) a label (staff with change_chainlabel)",
        description="Points the label at a version of the chain, creating the label if "
        "needed, and records who, when and why in its history. Callers of the label get "
        "that version from their next request on, in every server process. Moving "
        "`production` also needs `advisors_app.promote_production`. Moving a label to the "
        "version it already points at records nothing. A chain with a promotion gate on the "
        "label moves it only to a version no worse than the one it serves (409 otherwise).",
        request=LabelMoveSerializer,
        responses={
            200: ChainLabelSerializer,
            400: OpenApiResponse(
                ErrorSerializer, description="An unknown version or a malformed label name."
            ),
            **_AUTH,
            **_forbidden("advisors_app.change_chainlabel (or promote_production)"),
            **_MISSING,
            409: OpenApiResponse(
                ErrorSerializer,
                description="The chain's promotion gate refuses the move: the version has no "
                "up-to-date evaluation run on the gate's dataset, or it is worse than the one "
                "the label serves.",
            ),
        },
    ),
)
class ChainLabelDetailView(_ChainScoped):
    """``/api/chains/<slug>/labels/<name>/``: read, or move with ``PUT {"version", "reason"}``."""

    def get(self, request: Request, slug: str, name: str) -> Response:
        return Response(ChainLabelSerializer(self.get_label()).data)

    def put(self, request: Request, slug: str, name: str) -> Response:
        chain = self.get_chain()
        self.require(can_move_label(request.user, name), _label_permission(name))
        try:
            LABEL_NAME_VALIDATOR(name)
        except DjangoValidationError as exc:
            raise ValidationError({"name": exc.messages}) from None
        if name == DRAFT:  # a diff or a call could not tell it from the editable rows
            raise ValidationError({"name": ["'draft' names the chain's editable rows."]})
        serializer = LabelMoveSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        number = serializer.validated_data["version"]
        version = chain.versions.filter(number=number).first()
        if version is None:
            raise ValidationError({"version": [f"Chain {slug!r} has no version {number}."]})
        refused = gate_refusal(chain, name, version)
        if refused:  # the chain's promotion gate (advisors_app.evaluation.gate)
            raise Conflict(" ".join(refused))
        label = move_label(
            chain, name, version, user=request.user, reason=serializer.validated_data["reason"]
        )
        return Response(ChainLabelSerializer(label).data)


class ChainLabelRollbackView(_ChainScoped):
    """``POST /api/chains/<slug>/labels/<name>/rollback/``: move a label back one step."""

    @extend_schema(
        tags=_TAGS,
        summary="Roll a label back (staff with change_chainlabel)",
        description="Undoes the label's latest move not undone yet: points it back to the "
        "version it pointed at before that move (no new version is made) and records the roll "
        "back in its history. Rolling back again undoes the move before (after v1 → v2 → v3: "
        "v2, then v1). The same permissions as moving it; 409 when nothing is left to undo: the "
        "label never moved, or every move was rolled back already.",
        request=LabelRollbackSerializer,
        responses={
            200: ChainLabelSerializer,
            400: OpenApiResponse(ErrorSerializer, description="An invalid reason."),
            **_AUTH,
            **_forbidden("advisors_app.change_chainlabel (or promote_production)"),
            **_LABEL_MISSING,
            409: OpenApiResponse(
                ErrorSerializer,
                description="Nothing to roll back to: the label never moved, or every move "
                "was rolled back already.",
            ),
        },
    )
    def post(self, request: Request, slug: str, name: str) -> Response:
        chain = self.get_chain()
        self.require(can_move_label(request.user, name), _label_permission(name))
        self.get_label()
        serializer = LabelRollbackSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            label = rollback(
                chain, name, user=request.user, reason=serializer.validated_data["reason"]
            )
        except VersionLookupError as exc:
            raise Conflict(str(exc)) from None
        return Response(ChainLabelSerializer(label).data)


@extend_schema_view(
    get=extend_schema(
        tags=_TAGS,
        summary="A label's history, newest first (staff)",
        description="Every move of the label: from which version to which, by whom, when and "
        "why (`from` is null for the move that created it).",
        responses={200: ChainLabelEventSerializer(many=True), **_AUTH, **_LABEL_MISSING},
    )
)
class ChainLabelHistoryView(_ChainScoped, generics.ListAPIView):
    """``GET /api/chains/<slug>/labels/<name>/history/``."""

    queryset = ChainLabelEvent.objects.none()  # the model, for the schema; see get_queryset
    serializer_class = ChainLabelEventSerializer
    pagination_class = ApiPagination

    def get_queryset(self) -> QuerySet[ChainLabelEvent]:
        return self.get_label().events.select_related("from_version", "to_version", "actor")
