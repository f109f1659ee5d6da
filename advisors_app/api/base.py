"""Base views of the API: the error shape, explicit permissions, and an async ``APIView``.

DRF's ``APIView.dispatch`` is synchronous, so under ASGI Django would run a chat view in its
one thread-sensitive worker thread, and a model call of a minute would hold that thread (every
other synchronous view of the process waits behind it). :class:`AsyncAPIView` runs DRF's request
pipeline — authentication, permissions, throttles and body parsing, which may touch the database
or a cache — in a worker thread through ``sync_to_async``, then awaits the ``async def`` handler
on the event loop, so a turn costs no thread while it waits for the model. (``adrf`` does the
same and more; we need only this, so we do not depend on it.)
"""

from __future__ import annotations

import inspect
from typing import Any

from django.http import HttpRequest, HttpResponseBase
from rest_framework.exceptions import UnsupportedMediaType, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.utils.mediatypes import media_type_matches
from rest_framework.views import APIView

from advisors_app.api.errors import api_exception_handler
from advisors_app.db.threads import db_sync_to_async
from advisors_app.validation import text_problem

__all__ = ["ApiView", "AsyncAPIView"]


class ApiView(APIView):
    """An ``APIView`` with the app's error handler and explicit permission checks.

    Permission classes are set on every view (not left to ``DEFAULT_PERMISSION_CLASSES``), so
    a project whose default is ``AllowAny`` still keeps anonymous users out. Authentication
    follows the project's ``DEFAULT_AUTHENTICATION_CLASSES`` (session and token in the example
    site).
    """

    permission_classes = [IsAuthenticated]

    def get_exception_handler(self) -> Any:
        return api_exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """DRF's checks, then query and path parameters: text PostgreSQL cannot hold (a NUL,
        an unpaired surrogate) is a 400 naming the parameter, never a failed query."""
        super().initial(request, *args, **kwargs)
        parameters = [(name, [name, *values]) for name, values in request.query_params.lists()]
        parameters += [(name, [value]) for name, value in kwargs.items() if isinstance(value, str)]
        errors = {
            name: [problem]
            for name, texts in parameters
            for problem in {text_problem(text) for text in texts} - {None}
        }
        if errors:
            raise ValidationError(errors)


class AsyncAPIView(ApiView):
    """An ``ApiView`` whose handlers are ``async def`` (see the module docstring).

    The request body is parsed in the worker thread too, so ``request.data`` is ready (and a
    malformed body already answered with 400) when the handler runs. Subclasses define only
    ``async def`` handlers (Django then serves the view asynchronously); ``OPTIONS`` keeps
    DRF's synchronous metadata answer.
    """

    def _prepare(self, request: Request, *args: Any, **kwargs: Any) -> None:
        self.initial(request, *args, **kwargs)
        if request.method not in ("GET", "HEAD", "OPTIONS", "DELETE"):
            self._check_media_type(request)
            request.data  # noqa: B018 - parse now, off the event loop

    def _check_media_type(self, request: Request) -> None:
        """A body its parsers cannot read is a 415 saying what to send, not a parse error
        (a form-encoded body read as JSON was "JSON parse error"). A body without a content
        type is read by the first parser (the chat views' content negotiation picks it)."""
        content_type = request.content_type
        if not content_type:
            return
        accepted = [parser.media_type for parser in self.get_parsers()]
        if any(media_type_matches(media_type, content_type) for media_type in accepted):
            return
        sent = content_type.split(";")[0].strip()
        raise UnsupportedMediaType(
            sent,
            detail=f"Send the request body as {' or '.join(accepted)} (Content-Type: "
            f"{accepted[0]}), not {sent}.",
        )

    async def dispatch(  # type: ignore[override]
        self, request: HttpRequest, *args: Any, **kwargs: Any
    ) -> HttpResponseBase:
        self.args = args
        self.kwargs = kwargs
        drf_request = self.initialize_request(request, *args, **kwargs)
        self.request = drf_request
        self.headers = self.default_response_headers
        try:
            await db_sync_to_async(self._prepare)(drf_request, *args, **kwargs)
            method = (drf_request.method or "").lower()
            handler = (
                getattr(self, method, self.http_method_not_allowed)
                if method in self.http_method_names
                else self.http_method_not_allowed
            )
            response = handler(drf_request, *args, **kwargs)
            if inspect.isawaitable(response):
                response = await response
        except Exception as exc:
            response = self.handle_exception(exc)
        self.response = self.finalize_response(drf_request, response, *args, **kwargs)
        return self.response
