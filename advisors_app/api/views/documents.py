"""Collections and documents, as the caller may see them: shared rows plus their own.

Uploads become ingestion jobs run by a task worker (:mod:`advisors_app.ingestion.uploads` checks
sizes,
quotas and the rate; :mod:`advisors_app.ingestion.jobs` runs them) with the caller as owner
(the chunks are theirs alone, even in a shared collection) and their tenant; searches go through
``PgVectorStore.for_user``, whose scope (collection, shared + own rows, tenant) is ANDed with
any filter, so no filter can widen it. Lists use the same scope
(:func:`advisors_app.stores.scoped.visible_documents`). A collection of another user or tenant
behaves as one that does not exist.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import ProtectedError, QuerySet
from django.http import Http404
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import generics
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.base import ApiView
from advisors_app.api.errors import Conflict, ErrorSerializer
from advisors_app.api.pagination import ApiPagination
from advisors_app.api.serializers.documents import (
    CollectionSerializer,
    DocumentSerializer,
    FileUploadSerializer,
    IngestionJobSerializer,
    SearchRequestSerializer,
    SearchResultSerializer,
    TextUploadSerializer,
)
from advisors_app.api.throttles import SearchRateThrottle, search_throttled
from advisors_app.core.vectorstore import SearchRequest
from advisors_app.ingestion.jobs import Upload
from advisors_app.ingestion.parsing import check_supported
from advisors_app.ingestion.uploads import check_upload, submit_upload
from advisors_app.models import Collection, Document, IngestionJob
from advisors_app.security.protection import protecting_versions, protection_message
from advisors_app.stores.scoped import user_tenant, visible_collections, visible_documents
from advisors_app.stores.vectors import PgVectorStore

__all__ = [
    "CollectionDetailView",
    "CollectionListView",
    "DocumentDetailView",
    "DocumentListView",
    "DocumentSearchView",
    "IngestionDetailView",
    "IngestionListView",
]

_AUTH = {401: OpenApiResponse(ErrorSerializer, description="Not authenticated.")}
_INVALID = {400: OpenApiResponse(ErrorSerializer, description="Invalid input; see fields.")}


def _collection(user: Any, slug: str) -> Collection:
    found = visible_collections(user).filter(slug=slug).first()
    if found is None:
        raise ValidationError({"collection": [f"No collection {slug!r} that you may use."]})
    return found


@extend_schema_view(
    get=extend_schema(
        tags=["documents"],
        summary="Collections you may use",
        responses={200: CollectionSerializer(many=True), **_AUTH},
    ),
    post=extend_schema(
        tags=["documents"],
        summary="Create a collection of your own",
        request=CollectionSerializer,
        responses={201: CollectionSerializer, **_INVALID, **_AUTH},
    ),
)
class CollectionListView(ApiView, generics.ListCreateAPIView):
    """``/api/collections/``: shared and own collections; a new one belongs to the caller."""

    serializer_class = CollectionSerializer
    pagination_class = ApiPagination

    def get_queryset(self) -> QuerySet[Collection]:
        return visible_collections(self.request.user).order_by("slug")

    def perform_create(self, serializer: Any) -> None:
        serializer.save(owner=self.request.user)


@extend_schema_view(
    get=extend_schema(
        tags=["documents"],
        summary="One collection you may use",
        responses={
            200: CollectionSerializer,
            **_AUTH,
            404: OpenApiResponse(ErrorSerializer, description="No such collection."),
        },
    ),
    delete=extend_schema(
        tags=["documents"],
        summary="Delete a collection with all its documents",
        description="Your own collection; a shared one needs the "
        "`advisors_app.delete_collection` permission. Refused (409, naming the chains and "
        "versions) while a labelled chain version searches it: publish versions without it "
        "and move the labels first.",
        responses={
            204: None,
            **_AUTH,
            403: OpenApiResponse(ErrorSerializer, description="A shared collection."),
            404: OpenApiResponse(ErrorSerializer, description="No such collection."),
            409: OpenApiResponse(
                ErrorSerializer, description="A labelled chain version refers to it."
            ),
        },
    ),
)
class CollectionDetailView(ApiView):
    """``/api/collections/<slug>/``: read; delete your own (or a shared one, with permission)."""

    def _collection(self, request: Request, slug: str) -> Collection:
        found = visible_collections(request.user).filter(slug=slug).first()
        if found is None:
            raise Http404(f"No collection {slug!r} that you may use.")
        return found

    def get(self, request: Request, slug: str) -> Response:
        return Response(CollectionSerializer(self._collection(request, slug)).data)

    def delete(self, request: Request, slug: str) -> Response:
        collection = self._collection(request, slug)
        if collection.owner_id != request.user.pk and not request.user.has_perm(
            "advisors_app.delete_collection"
        ):
            raise PermissionDenied(
                "Deleting a shared collection needs the advisors_app.delete_collection permission."
            )
        versions = protecting_versions(collection)
        if versions:
            raise Conflict(protection_message(collection, versions), code="protected")
        try:
            with transaction.atomic():  # a savepoint: a refused delete leaves nothing behind
                collection.delete()
        except ProtectedError as exc:  # a label moved onto such a version meanwhile
            raise Conflict(str(exc.args[0]), code="protected") from exc
        return Response(status=204)


@extend_schema_view(
    get=extend_schema(
        tags=["documents"],
        summary="Documents (chunks) you may see",
        parameters=[
            OpenApiParameter("collection", str, description="Only this collection (slug)."),
            OpenApiParameter("source", str, description="Only this source name."),
        ],
        responses={200: DocumentSerializer(many=True), **_AUTH},
    ),
    post=extend_schema(
        tags=["documents"],
        summary="Upload documents",
        description="JSON `{collection, name, text, metadata?}`, or multipart form data with "
        "`collection`, one or more `file` parts (.txt, .md, .html, .pdf) and `metadata` "
        "(JSON text). Answers 202 with an ingestion job at once; a task worker reads, splits "
        "and embeds the files and stores them as your own chunks, all sources or none. Poll "
        "`GET /api/ingestions/<id>/` until `done` or `failed`. Sending a source again "
        "replaces its chunks (unchanged ones are kept). Limits, each named when passed: files "
        "per request and bytes per file (413), chunks per collection and bytes per day per "
        "user (429 `quota_exceeded`), uploads per minute (429 `throttled`); pages, "
        "decompressed bytes and characters per file and CPU time per job fail the job.",
        request={
            "application/json": TextUploadSerializer,
            "multipart/form-data": FileUploadSerializer,
        },
        responses={
            202: IngestionJobSerializer,
            **_INVALID,
            **_AUTH,
            413: OpenApiResponse(ErrorSerializer, description="Too many or too large files."),
            429: OpenApiResponse(ErrorSerializer, description="A quota or the upload rate."),
        },
    ),
)
class DocumentListView(ApiView, generics.ListAPIView):
    """``/api/documents/``: list visible chunks; upload text or files."""

    serializer_class = DocumentSerializer
    pagination_class = ApiPagination
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    def get_queryset(self) -> QuerySet[Document]:
        documents = visible_documents(self.request.user).select_related("collection")
        params = self.request.query_params
        if params.get("collection"):
            documents = documents.filter(collection__slug=params["collection"])
        if params.get("source"):
            documents = documents.filter(source=params["source"])
        return documents.order_by("collection__slug", "source", "created_at", "id")

    def post(self, request: Request) -> Response:
        multipart = request.content_type.startswith(("multipart/", "application/x-www-form"))
        serializer = (FileUploadSerializer if multipart else TextUploadSerializer)(
            data=request.data
        )
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        collection = _collection(request.user, data["collection"])
        if multipart:
            for upload in data["file"]:
                try:
                    check_supported(upload.name, upload.content_type)
                except ValueError as exc:
                    raise ValidationError({"file": [str(exc)]}) from None
            check_upload(request.user, collection, [(f.name, f.size) for f in data["file"]])
            uploads = [Upload(f.name, f.read(), f.content_type or "") for f in data["file"]]
        else:
            text = data["text"].encode()
            check_upload(request.user, collection, [(data["name"], len(text))])
            uploads = [Upload(data["name"], text, "text/plain", as_text=True)]
        job = submit_upload(
            request.user,
            collection,
            uploads,
            tenant=user_tenant(request.user),
            metadata=data.get("metadata", {}),
        )
        body = IngestionJobSerializer(job).data
        return Response(body, status=202, headers={"Location": body["url"]})


@extend_schema_view(
    delete=extend_schema(
        tags=["documents"],
        summary="Delete one of your documents (chunks)",
        responses={
            204: None,
            **_AUTH,
            403: OpenApiResponse(ErrorSerializer, description="A shared document."),
            404: OpenApiResponse(ErrorSerializer, description="No such document."),
        },
    )
)
class DocumentDetailView(ApiView):
    """``DELETE /api/documents/<id>/``: only the caller's own chunks."""

    def delete(self, request: Request, document_id: str) -> Response:
        document = visible_documents(request.user).filter(pk=document_id).first()
        if document is None:
            raise Http404("No document with this id that you may see.")
        if document.owner_id != request.user.pk:
            raise PermissionDenied("Only your own documents can be deleted; this one is shared.")
        document.delete()
        return Response(status=204)


class DocumentSearchView(ApiView):
    """``POST /api/documents/search/``: similarity search in one collection, at most
    ``ADVISORS["SEARCH_THROTTLE_RATE"]`` per user."""

    parser_classes = [JSONParser]
    throttle_classes = [SearchRateThrottle]

    def throttled(self, request: Request, wait: float | None) -> None:
        raise search_throttled(wait)

    @extend_schema(
        tags=["documents"],
        summary="Search a collection",
        description="Nearest chunks to the query among the shared ones and your own, best "
        "first. `filter` uses Spring AI's filter language over metadata (`==`, `!=`, `>`, "
        "`>=`, `<`, `<=`, `in`, `nin`, `&&`, `||`, `NOT`, parentheses); an invalid filter "
        "answers 400 naming the position. Every search, answered or refused, counts against "
        "ADVISORS['SEARCH_THROTTLE_RATE'] per user (429 `throttled` past it).",
        request=SearchRequestSerializer,
        responses={
            200: SearchResultSerializer(many=True),
            **_INVALID,
            **_AUTH,
            429: OpenApiResponse(ErrorSerializer, description="Too many searches."),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = SearchRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        collection = _collection(request.user, data["collection"])
        store = PgVectorStore.for_user(collection, request.user, tenant=user_tenant(request.user))
        found = store.similarity_search(
            SearchRequest(
                query=data["query"],
                top_k=data["top_k"],
                similarity_threshold=data["similarity_threshold"],
                filter_expression=data.get("filter"),
            )
        )
        results = [
            {"id": d.id, "text": d.text, "metadata": d.metadata, "score": d.score} for d in found
        ]
        return Response(SearchResultSerializer(results, many=True).data)


@extend_schema_view(
    get=extend_schema(
        tags=["documents"],
        summary="Your ingestion jobs, newest first",
        responses={200: IngestionJobSerializer(many=True), **_AUTH},
    )
)
class IngestionListView(ApiView, generics.ListAPIView):
    """``GET /api/ingestions/``: the caller's own uploads' jobs."""

    serializer_class = IngestionJobSerializer
    pagination_class = ApiPagination

    def get_queryset(self) -> QuerySet[IngestionJob]:
        jobs = IngestionJob.objects.filter(created_by=self.request.user)
        return jobs.select_related("collection").order_by("-created_at", "id")


class IngestionDetailView(ApiView):
    """``GET /api/ingestions/<id>/``: one of the caller's jobs; anyone else's is a 404."""

    @extend_schema(
        tags=["documents"],
        summary="One of your ingestion jobs",
        description="`status` is `queued`, `running`, `done` or `failed`; `done` of `total` "
        "chunks are embedded; `errors` name the file and the limit; `documents` say what "
        "each source became.",
        responses={
            200: IngestionJobSerializer,
            **_AUTH,
            404: OpenApiResponse(ErrorSerializer, description="No such job of yours."),
        },
    )
    def get(self, request: Request, job_id: str) -> Response:
        try:
            uuid.UUID(job_id)
        except ValueError:
            raise Http404("No ingestion job with this id that you may see.") from None
        job = (
            IngestionJob.objects.select_related("collection")
            .filter(pk=job_id, created_by=request.user)
            .first()
        )
        if job is None:
            raise Http404("No ingestion job with this id that you may see.")
        return Response(IngestionJobSerializer(job).data)
