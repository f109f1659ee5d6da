"""The Vercel AI SDK's UI message stream (protocol ``v1``, what ``useChat`` reads): the body
``useChat`` sends in, the turn's frames out as the stream's parts.

In (``DefaultChatTransport``'s body): ``id`` — the chat — is the conversation (a chat this user
never used starts one under that id), ``messages`` the chat's ``UIMessage`` list, whose last
user message's text parts are the turn's message (the server keeps the history), ``trigger``
``submit-message`` (a ``regenerate-message`` is refused: a turn cannot be taken back), and the
turn's own ``params``, ``label`` and ``version`` when the page adds them to the body. When the
last message is the assistant's and carries tool-approval answers (``addToolApprovalResponse``:
parts in state ``approval-responded``), the request resumes the paused turn with them instead.

Out, as Server-Sent Events ``data: <part>`` (:class:`UiMessageParts`), then ``data: [DONE]``:

===================  ==========================================================================
turn frame           parts
===================  ==========================================================================
start                ``start`` (``messageId``: the trace id — left out when a resume continues
                     the paused message; ``messageMetadata``: conversation, chain, trace, version)
delta                ``text-start`` (the first of a text part), ``text-delta``
tool_call            ``text-end`` (of open text), ``tool-input-start``, ``tool-input-available``
tool_result          ``tool-output-available`` (``{"ok", "duration_ms"}``: the tool's own result
                     stays on the server) or ``tool-output-error``
sources              one ``source-document`` per document
budget_warning       ``data-budget-warning`` (transient)
approval_required    ``tool-input-start``, ``tool-input-available``, ``tool-approval-request``
                     for each waiting call
done                 ``text-end`` (of open text), ``finish`` (``finishReason``; ``messageMetadata``:
                     the REST call body without its content)
error                ``text-end`` (of open text), ``error`` (``errorText``), ``finish``
                     (``finishReason: "error"``)
===================  ==========================================================================

A resumed call rejected by the user gets ``tool-output-denied``; the resumed calls' inputs are
not sent again (the paused message has them). A page that reconnects to a running turn
(``useChat``'s ``resume``) gets its parts translated from its first frame.
"""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from advisors_app.protocols.common import invalid, run_result, tool_output
from advisors_app.turn.input import TurnInput
from advisors_app.validation import FieldErrors

__all__ = [
    "DONE",
    "FIELD_NAMES",
    "HEADERS",
    "AiSdkChat",
    "UiMessageParts",
    "chat_input",
    "encode",
]

#: The headers of a UI message stream response (besides its ``text/event-stream`` type).
HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
#: The stream's last line.
DONE = "data: [DONE]\n\n"
#: The turn's fields as the chat's body names them.
FIELD_NAMES = {"message": "messages", "conversation_id": "id", "decisions": "messages"}
_FIELDS = ("id", "messages", "trigger", "messageId", "params", "label", "version")
_FINISH_REASONS = {
    "STOP": "stop",
    "END_TURN": "stop",
    "LENGTH": "length",
    "MAX_TOKENS": "length",
    "CONTENT_FILTER": "content-filter",
    "TOOL_CALLS": "tool-calls",
    "APPROVAL_REQUIRED": "tool-calls",
}


@dataclass(frozen=True, slots=True)
class AiSdkChat:
    """A chat request read: the turn it asks for, and the calls a resume decides
    (``rejected``: those the user refused)."""

    turn: TurnInput
    resumed: frozenset[str]
    rejected: frozenset[str]


def chat_input(data: Any) -> AiSdkChat:
    """The turn ``data`` (``useChat``'s decoded body) asks for; raises
    :class:`~advisors_app.exceptions.TurnError` ``invalid`` with field errors named as the
    body names them."""
    if not isinstance(data, Mapping):
        raise invalid({"non_field_errors": ["Send a JSON object: the chat's id and messages."]})
    errors: FieldErrors = {
        str(name): [f"Unknown field. Known fields: {', '.join(_FIELDS)}."]
        for name in data
        if name not in _FIELDS
    }
    trigger = data.get("trigger", "submit-message")
    if trigger != "submit-message":
        errors["trigger"] = [
            "Only submit-message is supported: a reply cannot be regenerated, send a new message."
        ]
    messages = data.get("messages")
    message = None
    decisions = None
    if not isinstance(messages, list) or not messages:
        errors["messages"] = ["Send the chat's messages: a non-empty list."]
    else:
        decisions = _approval_answers(messages[-1])
        if decisions is None:
            message = _last_user_text(messages, errors)
    if errors:
        raise invalid(errors)
    turn = TurnInput(
        message,
        data.get("id"),
        data.get("params"),
        data.get("label"),
        data.get("version"),
        decisions=decisions,
    )
    answered = decisions or []
    return AiSdkChat(
        turn,
        frozenset(d["approval_id"] for d in answered),
        frozenset(d["approval_id"] for d in answered if d["decision"] == "reject"),
    )


def _parts(message: Any) -> list[Any]:
    parts = message.get("parts") if isinstance(message, Mapping) else None
    return parts if isinstance(parts, list) else []


def _approval_answers(message: Any) -> list[dict[str, Any]] | None:
    """The decisions of an assistant message's answered tool approvals (``None``: none)."""
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return None
    decisions = []
    for part in _parts(message):
        if not isinstance(part, Mapping) or part.get("state") != "approval-responded":
            continue
        approval = part.get("approval")
        if not isinstance(approval, Mapping):
            continue
        decision: dict[str, Any] = {
            "approval_id": approval.get("id"),
            "decision": "approve" if approval.get("approved") is True else "reject",
        }
        if decision["decision"] == "reject" and approval.get("reason") is not None:
            decision["reason"] = approval["reason"]
        decisions.append(decision)  # checked by the turn (errors under "messages")
    return decisions or None


def _last_user_text(messages: list[Any], errors: FieldErrors) -> str | None:
    for number in range(len(messages) - 1, -1, -1):
        item = messages[number]
        if isinstance(item, Mapping) and item.get("role") == "user":
            texts: list[Any] = [
                part.get("text")
                for part in _parts(item)
                if isinstance(part, Mapping) and part.get("type") == "text"
            ]
            if not texts or not all(isinstance(text, str) for text in texts):
                errors[f"messages.{number}.parts"] = ["Send the message's text as text parts."]
                return None
            return "\n".join(texts)
    errors["messages"] = ["Send the user's message: a message with role user and text parts."]
    return None


def encode(part: Mapping[str, Any]) -> str:
    """One part as a Server-Sent Event."""
    return f"data: {json.dumps(part, ensure_ascii=False, separators=(',', ':'))}\n\n"


class UiMessageParts:
    """Translates one turn's frames, in order, into UI message stream parts (see the module)."""

    def __init__(self, resumed: Collection[str] = (), rejected: Collection[str] = ()) -> None:
        self._resumed = frozenset(resumed)
        self._rejected = frozenset(rejected)
        self._trace = ""
        self._text: str | None = None  # the open text part's id
        self._texts = 0

    def translate(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The parts of ``frame``; ``[]`` for a frame the protocol has no counterpart of."""
        handler = getattr(self, f"_on_{frame['type']}", None)
        return handler(frame) if handler is not None else []

    def _end_text(self) -> list[dict[str, Any]]:
        if self._text is None:
            return []
        ended, self._text = self._text, None
        return [{"type": "text-end", "id": ended}]

    @staticmethod
    def _input(call_id: str, name: str, arguments: Any) -> list[dict[str, Any]]:
        return [
            {"type": "tool-input-start", "toolCallId": call_id, "toolName": name},
            {"type": "tool-input-available", "toolCallId": call_id, "toolName": name,
             "input": arguments},
        ]  # fmt: skip

    def _on_start(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        self._trace = frame["trace_id"]
        about = {key: frame[key] for key in ("conversation_id", "chain", "trace_id", "version")}
        start: dict[str, Any] = {"type": "start", "messageMetadata": about}
        if not self._resumed:  # a resume continues the paused message, under its id
            start["messageId"] = self._trace
        denied = [{"type": "tool-output-denied", "toolCallId": c} for c in sorted(self._rejected)]
        return [start, *denied]

    def _on_delta(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        parts = []
        if self._text is None:
            self._texts += 1
            self._text = f"{self._trace}-text-{self._texts}"
            parts.append({"type": "text-start", "id": self._text})
        parts.append({"type": "text-delta", "id": self._text, "delta": frame["text"]})
        return parts

    def _on_tool_call(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        parts = self._end_text()
        if frame["id"] in self._resumed:  # the paused message has its input
            return parts
        try:
            arguments = json.loads(frame["arguments"] or "{}")
        except ValueError:  # the model's text as it sent it
            arguments = frame["arguments"]
        return parts + self._input(frame["id"], frame["name"], arguments)

    def _on_tool_result(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        if frame["ok"]:
            part = {"type": "tool-output-available", "toolCallId": frame["id"]}
            part["output"] = tool_output(frame)
        else:
            part = {"type": "tool-output-error", "toolCallId": frame["id"]}
            part["errorText"] = frame["error"] or "The tool failed."
        return [*self._end_text(), part]

    def _on_sources(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [_source_document(number, s) for number, s in enumerate(frame["sources"])]

    def _on_budget_warning(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        warning = {k: v for k, v in frame.items() if k not in ("type", "event_id")}
        return [{"type": "data-budget-warning", "data": warning, "transient": True}]

    def _on_approval_required(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        parts = self._end_text()
        for approval in frame["approvals"]:
            call_id = approval["approval_id"]
            parts += self._input(call_id, approval["tool"], approval["arguments"])
            parts.append({"type": "tool-approval-request", "approvalId": call_id,
                          "toolCallId": call_id})  # fmt: skip
        return parts

    def _on_done(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        # A model that names no finish reason ended its answer normally.
        reason = _FINISH_REASONS.get(str(frame.get("finish_reason") or "STOP").upper(), "other")
        finish = {"type": "finish", "finishReason": reason, "messageMetadata": run_result(frame)}
        return [*self._end_text(), finish]

    def _on_error(self, frame: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [
            *self._end_text(),
            {"type": "error", "errorText": frame["message"]},
            {"type": "finish", "finishReason": "error"},
        ]


def _source_document(number: int, source: Mapping[str, Any]) -> dict[str, Any]:
    """A retrieved document as a ``source-document`` part (our ranking in its metadata)."""
    name = source.get("source")
    part: dict[str, Any] = {
        "type": "source-document",
        "sourceId": str(source.get("document_id") or name or number),
        "mediaType": (mimetypes.guess_type(name)[0] if isinstance(name, str) else None)
        or "text/plain",
        "title": str(source.get("title") or name or "Document"),
    }
    if isinstance(name, str) and name:
        part["filename"] = name
    part["providerMetadata"] = {
        "advisors": {key: source.get(key) for key in ("score", "snippet", "retrieval")}
    }
    return part
