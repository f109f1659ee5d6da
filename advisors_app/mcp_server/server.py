"""The MCP server: ``tools/list`` and ``tools/call`` over the caller's chains (the SDK's
low-level ``Server``; the protocol itself is the SDK's).

``tools/list`` answers the chains :func:`~advisors_app.mcp_server.chains.chain_tools` lets the
caller ask; ``tools/call`` of ``ask_<slug>`` runs one turn through the turn
(:func:`~advisors_app.turn.call_turn`), exactly as ``POST /api/chains/<slug>/call/`` does:
the same :class:`~advisors_app.turn.input.TurnInput` validation, throttling, budgets, guards,
memory and conversation ownership. The answer is the reply's text, with ``conversation_id``,
``message_id``, ``finish_reason``, ``finish_category``, ``trace_id``, ``version`` (and
``sources`` when retrieval cited any) as structured content. Everything that is not an answer
is a tool error (``isError``) whose text says what went wrong — refused input with its field
errors, a throttled or over-budget caller, a guard's refusal, a paused turn, a failed
provider — with the message the REST API gives (secrets redacted,
:func:`~advisors_app.turn.events.error_event`), never a protocol error and never a crash.

Who calls is the Django user the endpoint (:mod:`advisors_app.mcp_server.asgi`) put in the
HTTP request's ASGI scope under ``"user"``, after checking the token.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from asgiref.sync import sync_to_async
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from advisors_app.core.advisors.safe_guard import CONTENT_FILTER
from advisors_app.core.advisors.tool_calling import APPROVAL_REQUIRED
from advisors_app.exceptions import Refusal
from advisors_app.mcp_server.chains import (
    ARGUMENTS,
    OUTPUT_SCHEMA,
    ChainTool,
    chain_for_tool,
    chain_tools,
)
from advisors_app.turn import TurnInput, TurnOutcome, call_turn
from advisors_app.turn.events import error_event

__all__ = ["SERVER_NAME", "build_server"]

SERVER_NAME = "advisors"

logger = logging.getLogger(__name__)


def build_server() -> Server[Any]:
    """A new low-level MCP ``Server`` serving the caller's chains as ``ask_<slug>`` tools."""
    return Server(
        SERVER_NAME,
        title="Advisor chains",
        instructions="Each tool asks one assistant (a chain). Pass conversation_id from an "
        "answer's structured content to continue that conversation.",
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
    )


def _user(ctx: ServerRequestContext[Any, Any]) -> Any:
    request = ctx.request
    return request.scope.get("user") if request is not None else None


async def _list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    tools = await sync_to_async(chain_tools)(_user(ctx))
    # Each caller gets their own list: clients may reuse it for this credential only.
    return types.ListToolsResult(tools=[_tool(t) for t in tools], cache_scope="private")


def _tool(chain: ChainTool) -> types.Tool:
    return types.Tool(
        name=chain.name,
        title=chain.title,
        description=chain.description,
        input_schema=chain.input_schema,
        output_schema=OUTPUT_SCHEMA,
        # A turn writes to the caller's conversation and may call the chain's tools.
        annotations=types.ToolAnnotations(
            title=chain.title, read_only_hint=False, destructive_hint=False, open_world_hint=True
        ),
    )


async def _call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    user = _user(ctx)
    slug = await sync_to_async(chain_for_tool)(user, params.name)
    try:
        if slug is None:
            raise Refusal(
                f"No tool {params.name!r}: list the tools to see the chains you may ask.",
                code="not_found",
                http_status=404,
            )
        arguments = dict(params.arguments or {})
        unknown = sorted(set(arguments) - set(ARGUMENTS))
        if unknown:
            raise Refusal(
                f"Unknown argument{'s' * (len(unknown) > 1)} {', '.join(unknown)}; "
                f"the arguments are {', '.join(ARGUMENTS)}.",
                fields={name: ["Unknown field."] for name in unknown},
            )
        outcome = await call_turn(slug, user, TurnInput.from_data(arguments))
    except Exception as exc:  # refused (a Refusal) or failed: the caller is told, never a crash
        return _failure(exc)
    return _answer(outcome)


def _answer(outcome: TurnOutcome) -> types.CallToolResult:
    structured: dict[str, Any] = {
        "conversation_id": outcome.conversation_id,
        "message_id": outcome.message_id,
        "finish_reason": outcome.finish_reason,
        "finish_category": outcome.finish_category,
        "trace_id": outcome.trace_id,
        "version": outcome.version,
    }
    if outcome.sources:
        structured["sources"] = outcome.sources
    if outcome.finish_reason == CONTENT_FILTER:
        # A guard refused: its answer is the refusal, and the caller must not take it for one.
        return _error(outcome.content, {"code": "refused", **structured})
    if outcome.finish_reason == APPROVAL_REQUIRED:
        ids = ", ".join(str(a.get("approval_id")) for a in outcome.pending_approvals)
        return _error(
            f"The answer waits for approval of tool calls ({ids}): decide them in the chat "
            "page or with the REST API, then continue the conversation there.",
            {"code": "approval_required", **structured},
        )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=outcome.content)],
        structured_content=structured,
    )


def _failure(exc: BaseException) -> types.CallToolResult:
    """A refused or failed call as a tool error, from the ``error`` frame
    (:func:`~advisors_app.turn.events.error_event`, the one mapping of every
    :class:`~advisors_app.exceptions.Refusal`): its message (redacted) with the field errors
    spelled out, so a model reading only the text can fix its call, and the frame's non-null
    keys as structured content."""
    event = error_event(exc).to_dict()
    if event["code"] == "internal_error":
        logger.error("MCP tool call failed (trace %s)", event["trace_id"], exc_info=exc)
    text = event["message"]
    if event["errors"]:
        text += " " + json.dumps(event["errors"], ensure_ascii=False)
    if event["retry_after"] is not None:
        text += f" Retry after {event['retry_after']} s."
    details = {key: value for key, value in event.items() if key != "type" and value is not None}
    return _error(text, details)


def _error(text: str, details: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=details,
        is_error=True,
    )
