"""The floors under time to first token in ``turn_pipeline.py``: the same events with no turn
behind them, served by daphne.

- :data:`application`, a bare ASGI app (``daphne _floors:application``): daphne, Twisted's
  HTTP or websocket protocol and the client, nothing else. Over HTTP it answers any ``POST``
  with the SSE events a turn of the scripted model sends (``start``, eight ``delta``, ``done``);
  on a websocket it answers each text frame with the same events as frames, then the
  ``conversation`` frame the chat consumer sends after a turn, so the clients are the
  benchmark's own SSE and websocket clients;
- :func:`stream`, an ``async def`` Django view answering with a ``StreamingHttpResponse`` of an
  async generator, behind the site's whole middleware stack (``TURNBENCH_URLCONF=_floors``
  makes this module the URLconf of ``turn_pipeline_settings``): Django's ASGI handler, its
  per-request thread, the middleware, the streaming response.
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


def _frames() -> list[dict[str, Any]]:
    return [
        {"type": "start", "conversation_id": "floor", "chain": "floor"},
        *({"type": "delta", "text": text} for text in ANSWER),
        {"type": "done", "reason": "complete", "conversation_id": "floor"},
    ]


def _events() -> list[bytes]:
    return [_event(frame) for frame in _frames()]


async def _websocket(receive: Any, send: Any) -> None:
    """Accept, then answer each text frame with the turn's frames and ``conversation``."""
    while True:
        message = await receive()
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.accept"})
        elif message["type"] == "websocket.disconnect":
            return
        elif message.get("text") is not None:
            for frame in [*_frames(), {"type": "conversation", "conversation_id": "floor"}]:
                await send({"type": "websocket.send", "text": json.dumps(frame)})


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A bare ASGI app: over HTTP read the body, send the events, one body message each; on a
    websocket the events as frames (:func:`_websocket`)."""
    if scope["type"] == "websocket":
        await _websocket(receive, send)
        return
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
