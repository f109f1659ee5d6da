"""One JSON error shape for every 4xx and 5xx answer of the API.

Every error body is::

    {"error": {"code": "invalid",
               "message": "The request is invalid.",
               "fields": {"message": ["This field may not be blank."]},
               "provider_status": null, "retry_after": null,
               "conversation_id": null, "trace_id": null}}

- ``code``: a stable, machine-readable string: DRF's codes (``parse_error``,
  ``not_authenticated``, ``authentication_failed``, ``permission_denied``, ``not_found``,
  ``method_not_allowed``, ``not_acceptable``, ``unsupported_media_type``, ``throttled``), the
  ``code`` of every :class:`~advisors_app.exceptions.Refusal` the app raises (``invalid``,
  ``chain_not_found``, ``conflict``, ``protected``, ``too_large``, ``budget_exceeded``, …), the
  provider codes of :func:`advisors_app.turn.events.error_event` (``rate_limited``,
  ``provider_timeout``, …), ``output_invalid``, ``context_overflow``, ``guard_blocked`` and
  ``internal_error``; docs/rest-api.md lists them all with their HTTP status.
- ``message``: one sentence for people. Secret values and credential-shaped tokens in it (and
  in ``fields``) are replaced by ``[REDACTED]`` (:func:`advisors_app.security.redaction.redact`).
- ``fields``: dotted field path → messages (``"advisors.1.params.top_k"``); ``{}`` when the error
  is not about a field. DRF's ``non_field_errors`` keeps its name.
- ``provider_status``: the model provider's HTTP status for provider errors, else ``null``.
- ``retry_after``: seconds to wait (throttling and provider rate limits; also sent as the
  ``Retry-After`` header), else ``null``.
- ``conversation_id`` and ``trace_id``: set when a chat turn failed after it started (the
  call log row has the trace id).
- ``reset_at``: only for ``budget_exceeded``: the ISO time the budget's period ends.

The ``error`` events of the SSE stream and the websocket carry the same information in the
flat event shape of :mod:`advisors_app.turn.events` (``errors`` instead of ``fields``): a
refusal's body is built from its ``error`` frame, so the two cannot drift apart.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from advisors_app.exceptions import Conflict, Refusal
from advisors_app.security.redaction import redact
from advisors_app.turn.events import ErrorEvent, error_event
from advisors_app.validation import printable

__all__ = [
    "PROVIDER_HTTP_STATUS",
    "Conflict",
    "ErrorSerializer",
    "api_exception_handler",
    "api_not_found",
    "error_body",
    "event_status",
    "flatten_errors",
]

logger = logging.getLogger("advisors_app.api")

#: HTTP status of a REST answer for each ``error_event`` code of a failed turn.
PROVIDER_HTTP_STATUS: dict[str, int] = {
    "rate_limited": status.HTTP_429_TOO_MANY_REQUESTS,
    "provider_timeout": status.HTTP_504_GATEWAY_TIMEOUT,
    "provider_unreachable": status.HTTP_502_BAD_GATEWAY,
    "provider_unavailable": status.HTTP_503_SERVICE_UNAVAILABLE,
    "provider_malformed_response": status.HTTP_502_BAD_GATEWAY,
    "provider_authentication": status.HTTP_502_BAD_GATEWAY,
    "provider_bad_request": status.HTTP_502_BAD_GATEWAY,
    "provider_error": status.HTTP_502_BAD_GATEWAY,
    "output_invalid": status.HTTP_502_BAD_GATEWAY,
    # The prompt cannot fit the model's context window: the request is too long, not a fault
    # of the provider (it was not called).
    "context_overflow": status.HTTP_400_BAD_REQUEST,
    # A budget counting the turn is used up (the model was not called); retry after its reset.
    "budget_exceeded": status.HTTP_429_TOO_MANY_REQUESTS,
    # A guard rail blocked the turn and no guard outside it answered with a refusal (the
    # guard is ordered inside the advisor that screened): the content was refused.
    "guard_blocked": status.HTTP_422_UNPROCESSABLE_ENTITY,
}


def error_body(
    code: str,
    message: str,
    fields: Mapping[str, list[str]] | None = None,
    *,
    provider_status: int | None = None,
    retry_after: float | None = None,
    conversation_id: str | None = None,
    trace_id: str | None = None,
    reset_at: str | None = None,
) -> dict[str, Any]:
    """The JSON body of an error answer (see the module docstring). Field paths and messages
    quoting refused input are made encodable (:func:`~advisors_app.validation.printable`), and
    every secret in them is redacted (:func:`~advisors_app.security.redaction.redact`): whatever a
    provider's or a validator's message quotes, no key leaves the server."""
    return {
        "error": {
            "code": code,
            "message": redact(printable(message)),
            "fields": {
                redact(printable(field)): [redact(printable(m)) for m in messages]
                for field, messages in (fields or {}).items()
            },
            "provider_status": provider_status,
            "retry_after": retry_after,
            "conversation_id": conversation_id,
            "trace_id": trace_id,
            # Only for ``budget_exceeded``: every other error keeps its shape.
            **({"reset_at": reset_at} if reset_at is not None else {}),
        }
    }


def flatten_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested ``ValidationError.detail`` as ``{"advisors.0.params": ["..."]}``."""
    if isinstance(detail, Mapping):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            for field, messages in flatten_errors(value, path).items():
                flat.setdefault(field, []).extend(messages)
        return flat
    if isinstance(detail, list):
        if all(not isinstance(item, (list, Mapping)) for item in detail):
            return {prefix: [str(item) for item in detail]} if detail else {}
        flat = {}
        for index, value in enumerate(detail):
            path = f"{prefix}.{index}" if prefix else str(index)
            for field, messages in flatten_errors(value, path).items():
                flat.setdefault(field, []).extend(messages)
        return flat
    return {prefix: [str(detail)]}


def event_status(event: ErrorEvent) -> int:
    """The HTTP status answering a turn that failed with ``event``."""
    return PROVIDER_HTTP_STATUS.get(event.code, status.HTTP_500_INTERNAL_SERVER_ERROR)


def _retry_header(seconds: float | None) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))} if seconds else {}


def _from_event(event: ErrorEvent, http_status: int) -> Response:
    body = error_body(
        event.code,
        event.message,
        event.errors,
        provider_status=event.provider_status,
        retry_after=event.retry_after,
        conversation_id=event.conversation_id,
        trace_id=event.trace_id,
        reset_at=event.reset_at,
    )
    return Response(body, status=http_status, headers=_retry_header(event.retry_after))


def _code(exc: exceptions.APIException) -> str:
    codes = exc.get_codes()
    return codes if isinstance(codes, str) else exc.default_code


def _from_api_exception(exc: exceptions.APIException) -> Response:
    headers = _retry_header(getattr(exc, "wait", None))
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
    code = _code(exc)
    if isinstance(exc.detail, (list, dict)):
        fields = flatten_errors(exc.detail)
        message = "The request is invalid."
        code = "invalid"
    else:
        fields = {}
        message = str(exc.detail)
    body = error_body(code, message, fields, retry_after=getattr(exc, "wait", None))
    return Response(body, status=exc.status_code, headers=headers)


def api_exception_handler(exc: Exception, context: Mapping[str, Any]) -> Response:
    """DRF exception handler: every exception becomes the one error shape, never HTML.

    Handles DRF's exceptions, Django's ``Http404``/``PermissionDenied``, a delete refused by
    ``ProtectedError``/``RestrictedError`` (409 ``protected``, with Django's message), a body over
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (413 ``too_large``), JSON nested too deeply to parse (400
    ``parse_error``), every :class:`~advisors_app.exceptions.Refusal` (its ``http_status``, the
    body from its ``error`` frame: :func:`~advisors_app.turn.events.error_event`), provider
    errors of a failed call (502/503/504/429 with the provider's status and message, through
    the same function), and anything else as a logged 500 ``internal_error`` that reveals no
    detail.
    """
    set_rollback()
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    elif isinstance(exc, (ProtectedError, RestrictedError)):
        # Views that delete say which rows protect the target; this is the net under them.
        exc = Conflict(str(exc.args[0]), code="protected")
    elif isinstance(exc, RequestDataTooBig):  # over DATA_UPLOAD_MAX_MEMORY_SIZE
        message = f"The request body is too large: {exc}"
        exc = Refusal(message, code="too_large", http_status=413)
    elif isinstance(exc, RecursionError):
        # Only parsing recurses with the request's shape: JSON nested deeper than it can read.
        exc = exceptions.ParseError("The JSON is nested too deeply to read.")
    if isinstance(exc, Refusal):
        return _from_event(error_event(exc), exc.http_status)
    if isinstance(exc, exceptions.APIException):
        return _from_api_exception(exc)
    event = error_event(exc)
    if event.code == "internal_error":
        logger.error("API request failed", exc_info=exc)
        body = error_body("internal_error", "The server could not complete this request.")
        return Response(body, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    return _from_event(event, event_status(event))


@csrf_exempt  # a POST to a mistyped path is still answered in JSON, not a CSRF page
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """JSON 404 for any path under the API prefix that names no endpoint."""
    body = error_body("not_found", f"No API endpoint at {request.path}.")
    return JsonResponse(body, status=status.HTTP_404_NOT_FOUND)


class _ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable error code, e.g. invalid, not_found.")
    message = serializers.CharField(help_text="What went wrong, for people.")
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text='Field path → messages, e.g. {"params.options.temperature": ["..."]}.',
    )
    provider_status = serializers.IntegerField(
        allow_null=True, help_text="The model provider's HTTP status (provider errors)."
    )
    retry_after = serializers.FloatField(
        allow_null=True, help_text="Seconds to wait before retrying (429)."
    )
    conversation_id = serializers.CharField(allow_null=True)
    trace_id = serializers.CharField(allow_null=True)
    reset_at = serializers.DateTimeField(
        required=False, help_text="When the used-up budget resets (budget_exceeded only)."
    )

    class Meta:
        ref_name = "ErrorDetail"


class ErrorSerializer(serializers.Serializer):
    """The body of every error answer (documentation only)."""

    error = _ErrorDetailSerializer()

    class Meta:
        ref_name = "Error"
