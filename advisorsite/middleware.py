"""Django's middleware (and django-csp's) without a thread hop per method on every request of an
ASGI site.

Under ASGI, Django runs each sync-only middleware method (``MiddlewareMixin.process_request`` /
``process_response``) through ``sync_to_async``: a switch to asgiref's one thread for database
work and back, twice per middleware, on every request — about a dozen hops before a chat stream
sends its first byte, queued behind whatever that thread is doing. The middleware below do no
I/O in those methods (headers, redirects, cookies, lazy objects), so these subclasses run them on
the event loop; in a sync stack they are Django's own. ``SessionMiddleware`` and
``MessageMiddleware`` only set up lazy objects on the way in, so that half runs on the loop too;
on the way out they may write the session, which keeps its hop — only for a request that has
something to write (a modified session, messages added or read). CSRF runs on the loop only
while ``CSRF_USE_SESSIONS`` is off (with it on, the token lives in the session, read from the
database); its ``process_view`` passes an exempt view (the API's) on the loop and checks any
other in the worker thread.

Django's deployment checks look for its middleware by dotted path, so the example site silences
``security.W001``–``W003`` and :func:`check_middleware` checks for these subclasses instead.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import iscoroutinefunction, sync_to_async
from csp import middleware as csp
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.core import checks
from django.http import HttpRequest
from django.middleware import clickjacking, common, csrf, security
from django.utils.module_loading import import_string

__all__ = [
    "AuthenticationMiddleware",
    "CSPMiddleware",
    "CommonMiddleware",
    "CsrfViewMiddleware",
    "MessageMiddleware",
    "SecurityMiddleware",
    "SessionMiddleware",
    "XFrameOptionsMiddleware",
    "check_middleware",
]


class _OnTheEventLoop:
    """Runs ``process_request`` and (when :meth:`_response_on_loop` says so)
    ``process_response`` inline in an async stack."""

    get_response: Any

    def _inline(self) -> bool:
        return True

    def _response_on_loop(self, request: HttpRequest) -> bool:
        """Whether ``process_response`` does no I/O for this request (else it keeps its hop)."""
        return True

    async def __acall__(self, request: HttpRequest) -> Any:
        if not self._inline():
            return await super().__acall__(request)  # type: ignore[misc]
        process_request = getattr(self, "process_request", None)
        response = process_request(request) if process_request is not None else None
        response = response or await self.get_response(request)
        process_response = getattr(self, "process_response", None)
        if process_response is not None:
            if self._response_on_loop(request):
                response = process_response(request, response)
            else:
                response = await sync_to_async(process_response)(request, response)
        return response


class SecurityMiddleware(_OnTheEventLoop, security.SecurityMiddleware):
    pass


class CSPMiddleware(_OnTheEventLoop, csp.CSPMiddleware):
    """django-csp's: the policy header is built from settings, with no I/O."""


class SessionMiddleware(_OnTheEventLoop, sessions.SessionMiddleware):
    def _response_on_loop(self, request: HttpRequest) -> bool:
        # Only a session to save means I/O (a modified one, or every one by the setting).
        session = getattr(request, "session", None)
        return not (settings.SESSION_SAVE_EVERY_REQUEST or getattr(session, "modified", True))


class CommonMiddleware(_OnTheEventLoop, common.CommonMiddleware):
    pass


class CsrfViewMiddleware(_OnTheEventLoop, csrf.CsrfViewMiddleware):
    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)
        if iscoroutinefunction(self):  # an async stack: see _aprocess_view
            self.process_view = self._aprocess_view  # type: ignore[method-assign]

    def _inline(self) -> bool:
        return not settings.CSRF_USE_SESSIONS

    async def _aprocess_view(
        self, request: HttpRequest, callback: Any, callback_args: Any, callback_kwargs: Any
    ) -> Any:
        """A view exempt from CSRF (the API's) is passed at once, as Django's method does
        first thing; any other is checked in the worker thread (the form body is read)."""
        if getattr(callback, "csrf_exempt", False):
            return None
        check = sync_to_async(super().process_view)
        return await check(request, callback, callback_args, callback_kwargs)


class AuthenticationMiddleware(_OnTheEventLoop, auth.AuthenticationMiddleware):
    pass


class MessageMiddleware(_OnTheEventLoop, messages.MessageMiddleware):
    def _response_on_loop(self, request: HttpRequest) -> bool:
        # Storing messages (into the session, which may be read for it) only when some were
        # added or read.
        storage = getattr(request, "_messages", None)
        return storage is None or not (storage.used or storage.added_new)


class XFrameOptionsMiddleware(_OnTheEventLoop, clickjacking.XFrameOptionsMiddleware):
    pass


#: The deployment warnings Django gives when its middleware is missing, by the class each
#: stands for.
_REQUIRED = {
    "security.W001": security.SecurityMiddleware,
    "security.W002": clickjacking.XFrameOptionsMiddleware,
    "security.W003": csrf.CsrfViewMiddleware,
}


@checks.register(checks.Tags.security, deploy=True)
def check_middleware(**kwargs: Any) -> list[checks.CheckMessage]:
    """Django's ``security.W001``–``W003`` for these subclasses: warn when ``MIDDLEWARE`` has
    neither Django's class nor a subclass of it."""
    classes = [import_string(path) for path in settings.MIDDLEWARE]
    return [
        checks.Warning(
            f"No {required.__module__}.{required.__name__} (or a subclass) in MIDDLEWARE.",
            id=f"advisorsite.{code.replace('security.', '')}",
        )
        for code, required in _REQUIRED.items()
        if not any(isinstance(c, type) and issubclass(c, required) for c in classes)
    ]
