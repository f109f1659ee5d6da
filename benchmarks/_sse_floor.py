"""The floors under SSE time to first token in ``turn_pipeline.py``: the same event stream with
no turn behind it, served by daphne in two ways.

- :data:`application`, a bare ASGI app (``daphne _sse_floor:application``): daphne, Twisted's
  HTTP parser and the client, nothing else;
- :func:`stream`, an ``async def`` Django view answering with a ``StreamingHttpResponse`` of an
  async generator, behind the site's whole middleware stack (``TURNBENCH_URLCONF=_sse_floor``
  makes this module the URLconf of ``turn_pipeline_settings``): Django's ASGI handler, its
  per-request thread, the middleware, the streaming response.

Both answer any ``POST`` with the events a turn of the scripted model sends (``start``, eight
``delta``, ``done``), so the client is the benchmark's own SSE client.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from django.http import StreamingHttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

__all__ = ["application", "stream", "urlpatterns"]

ANSWER = [f"w{i} " for i in range(8)]
HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
]


def _event(frame: dict[str, Any]) -> bytes:
    data = json.dumps(frame, separators=(",", ":"))
    return f"event: {frame['type']}\ndata: {data}\n\n".encode()


def _events() -> list[bytes]:
    return [
        _event({"type": "start", "conversation_id": "floor", "chain": "floor"}),
        *(_event({"type": "delta", "text": text}) for text in ANSWER),
        _event({"type": "done", "reason": "complete", "conversation_id": "floor"}),
    ]


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A bare ASGI app: read the body, send the events, one body message each."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    for event in _events():
        await send({"type": "http.response.body", "body": event, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _body() -> AsyncIterator[bytes]:
    for event in _events():
        yield event


async def stream(request: Any) -> Any:
    """The Django floor: no authentication, no database, the events at once."""
    response = StreamingHttpResponse(_body(), content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    return response


urlpatterns = [path("floor/", csrf_exempt(stream))]
