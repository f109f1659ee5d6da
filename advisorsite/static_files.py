"""WhiteNoise for an ASGI site: static files served without making every request synchronous.

``whitenoise.middleware.WhiteNoiseMiddleware`` is synchronous only. In an ASGI stack Django then
runs it (and every request through it) on a thread, hopping back to the event loop for the views
below, and serves files through a synchronous iterator that Django reads on a thread with a
warning per file. :class:`AsyncWhiteNoiseMiddleware` is the same middleware, configured by the
same ``WHITENOISE_*`` settings, that in an async stack looks static paths up in WhiteNoise's
table (built once, at start, from ``STATIC_ROOT``) on the event loop, passes every other
request straight on, and streams a file's bytes from a thread 64 KiB at a time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import IO, Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from whitenoise.middleware import WhiteNoiseMiddleware

__all__ = ["AsyncWhiteNoiseMiddleware"]

_BLOCK = 64 * 1024


async def _chunks(file: IO[bytes] | None) -> AsyncIterator[bytes]:
    if file is None:  # HEAD, 304
        return
    read = sync_to_async(file.read, thread_sensitive=False)
    try:
        while chunk := await read(_BLOCK):
            yield chunk
    finally:
        file.close()


class AsyncWhiteNoiseMiddleware(WhiteNoiseMiddleware):
    """``WhiteNoiseMiddleware`` that runs on the event loop in an ASGI stack (module docstring)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        if self.autorefresh:  # DEBUG: looks in the directories on every request
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is None:
            return await self.get_response(request)  # type: ignore[no-any-return]
        found = await sync_to_async(static_file.get_response, thread_sensitive=False)(
            request.method, request.META
        )
        response = StreamingHttpResponse(_chunks(found.file), status=int(found.status))
        del response["Content-Type"]  # WhiteNoise's headers say it, when there is a body
        for name, value in found.headers:
            response[name] = value
        return response
