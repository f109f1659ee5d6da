"""The views of docs/integration.md, as written there (``tests/test_integration.py`` checks that
they are): a sync view that calls a chain and an async view that streams one, served with this
URLconf."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse, StreamingHttpResponse
from django.urls import path
from django.views.decorators.http import require_POST

from advisors_app.exceptions import TurnError
from advisors_app.integration import astream_chain, call_chain


@login_required
@require_POST
def ask(request):
    try:
        outcome = call_chain(
            "helper",
            request.user,
            request.POST.get("message", ""),
            conversation_id=request.POST.get("conversation_id") or None,
        )
    except TurnError as exc:  # refused before it ran: nothing stored
        return JsonResponse({"error": exc.message, "fields": exc.fields}, status=exc.http_status)
    return JsonResponse({"answer": outcome.content, "conversation_id": outcome.conversation_id})


@require_POST
async def ask_stream(request):
    user = await request.auser()
    if not user.is_authenticated:
        return JsonResponse({"error": "Log in first."}, status=401)
    try:
        stream = await astream_chain("helper", user, request.POST.get("message", ""))
    except TurnError as exc:
        return JsonResponse({"error": exc.message, "fields": exc.fields}, status=exc.http_status)

    async def lines():
        async with stream:  # a client that leaves stops the model; the partial turn is kept
            async for event in stream:
                yield json.dumps(event.to_dict()) + "\n"

    return StreamingHttpResponse(lines(), content_type="application/x-ndjson")


urlpatterns = [path("ask/", ask), path("ask-stream/", ask_stream)]
