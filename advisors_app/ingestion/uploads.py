"""What a user may upload over the REST API: sizes, quotas per user, and a rate.

Checked in this order, before anything is stored, each refusal naming its setting:

1. files per request (``ADVISORS["UPLOAD_MAX_FILES"]``) and bytes per file
   (``MAX_UPLOAD_BYTES``): 413 ``too_large``;
2. room in the collection: a user already holding ``MAX_CHUNKS_PER_COLLECTION`` chunks there
   gets 429 ``quota_exceeded`` (the job checks the exact count once the files are split);
3. bytes per user in any 24 hours (``UPLOAD_BYTES_PER_DAY``, counted from the jobs of that
   window, under a per-user lock so parallel uploads cannot both pass): 429 ``quota_exceeded``
   with ``retry_after`` when the window will make room, 413 when the upload alone is larger;
4. the upload rate (``UPLOAD_THROTTLE_RATE``), counted like chat turns
   (:mod:`advisors_app.turn.throttling`) and only for uploads that passed everything else, so
   refused requests use up none of it: 429 ``throttled`` with ``retry_after``.

The admin upload and the ``ingest`` command are operators' tools: the parsing limits bind them
(they protect the worker), these per-user quotas do not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from rest_framework.throttling import UserRateThrottle

from advisors_app.conf import app_settings
from advisors_app.exceptions import Refusal
from advisors_app.ingestion.jobs import Upload, submit_job
from advisors_app.ingestion.parsing import Limits
from advisors_app.models import Collection, Document, IngestionJob

__all__ = [
    "UPLOAD_THROTTLE_SCOPE",
    "UploadRateThrottle",
    "UploadRefused",
    "check_upload",
    "submit_upload",
]

UPLOAD_THROTTLE_SCOPE = "advisors_upload"
#: Name of the advisory lock that serialises one user's uploads (with the user's id).
_LOCK = "advisors_app.ingestion.uploads"
_DAY = timedelta(days=1)


class UploadRefused(Refusal):
    """Raised when an upload passes a size limit, a quota or the rate: ``http_status`` 413 or
    429, ``code`` (``too_large``, ``quota_exceeded``, ``throttled``), ``setting`` (the
    ``ADVISORS`` key), ``retry_after`` (seconds, or ``None``)."""

    def __init__(
        self,
        message: str,
        *,
        http_status: int,
        code: str,
        setting: str,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, code=code, http_status=http_status, retry_after=retry_after)
        self.setting = setting


class UploadRateThrottle(UserRateThrottle):
    """At most ``ADVISORS["UPLOAD_THROTTLE_RATE"]`` uploads per user (DRF's rate form)."""

    scope = UPLOAD_THROTTLE_SCOPE

    def get_rate(self) -> str | None:
        return app_settings.UPLOAD_THROTTLE_RATE or None


def _refuse(message: str, setting: str, status: int, **extra: Any) -> UploadRefused:
    value = getattr(app_settings, setting)
    code = "too_large" if status == 413 else "quota_exceeded"
    return UploadRefused(
        f"{message} (ADVISORS[{setting!r}] = {value}).",
        http_status=status,
        code=code,
        setting=setting,
        **extra,
    )


def check_upload(user: Any, collection: Collection, files: Sequence[tuple[str, int]]) -> None:
    """Steps 1 and 2 of the module docstring for ``(name, size in bytes)`` of each file, before
    any is read; raises :class:`UploadRefused`."""
    most = app_settings.UPLOAD_MAX_FILES
    if most and len(files) > most:
        raise _refuse(
            f"{len(files)} files in one upload, more than {most}", "UPLOAD_MAX_FILES", 413
        )
    largest = app_settings.MAX_UPLOAD_BYTES
    for name, size in files:
        if largest and size > largest:
            raise _refuse(f"{name} is larger than {largest} bytes", "MAX_UPLOAD_BYTES", 413)
    room = app_settings.MAX_CHUNKS_PER_COLLECTION
    if room and Document.objects.filter(collection=collection, owner=user).count() >= room:
        raise _refuse(
            f"You hold {room} or more chunks in {collection.slug} already; delete some first",
            "MAX_CHUNKS_PER_COLLECTION",
            429,
        )


def _check_daily_bytes(user: Any, size: int) -> None:
    limit = app_settings.UPLOAD_BYTES_PER_DAY
    if not limit:
        return
    if size > limit:
        raise _refuse(
            f"This upload has {size} bytes, more than a day's quota", "UPLOAD_BYTES_PER_DAY", 413
        )
    now = timezone.now()
    recent = list(
        IngestionJob.objects.filter(created_by=user, created_at__gt=now - _DAY)
        .order_by("created_at")
        .values_list("created_at", "bytes")
    )
    used = sum(size for _, size in recent)
    if used + size <= limit:
        return
    # Room comes back as the oldest uploads leave the 24-hour window.
    freed, wait = 0, 0.0
    for created_at, earlier in recent:
        freed += earlier
        if used - freed + size <= limit:
            wait = (created_at + _DAY - now).total_seconds()
            break
    raise _refuse(
        f"You uploaded {used} bytes in the last 24 hours; {size} more would pass the quota",
        "UPLOAD_BYTES_PER_DAY",
        429,
        retry_after=max(1.0, wait),
    )


def submit_upload(
    user: Any,
    collection: Collection,
    uploads: Sequence[Upload],
    *,
    tenant: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> IngestionJob:
    """Steps 3 and 4 of the module docstring, then :func:`submit_job` for ``user`` (who owns
    the chunks), with the settings' limits and the chunk quota. Raises
    :class:`UploadRefused`."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"{_LOCK}:{user.pk}"]
            )
        _check_daily_bytes(user, sum(len(upload.data) for upload in uploads))
        throttle = UploadRateThrottle()
        if not throttle.allow_request(SimpleNamespace(user=user, META={}), None):
            wait = throttle.wait()
            raise UploadRefused(
                "Too many uploads; try again later "
                f"(ADVISORS['UPLOAD_THROTTLE_RATE'] = {app_settings.UPLOAD_THROTTLE_RATE}).",
                http_status=429,
                code="throttled",
                setting="UPLOAD_THROTTLE_RATE",
                retry_after=wait,
            )
        return submit_job(
            collection,
            uploads,
            created_by=user,
            owner=user,
            tenant=tenant,
            metadata=metadata,
            limits=Limits.from_settings(quotas=True),
        )
