"""AG-UI (protocol 1.0, the ``ag-ui-protocol`` package's models): a ``RunAgentInput`` in, the
turn's frames out as AG-UI events.

In: ``threadId`` is the conversation (a thread this user never used starts one, under that id;
another user's thread id is another conversation, as a ``conversation_id`` is on every
transport), ``runId`` is echoed, the last message — the user's — is the turn's message (the
server keeps the history: the earlier messages are not read), ``forwardedProps`` may carry the
turn's ``params``, ``label`` and ``version`` (its other keys are the client framework's and are
ignored), and ``resume`` answers the interrupts of a paused run (below). ``tools``, ``context``
and ``state`` are not read: the chain's own tools run on the server.

Out, frame by frame (:class:`AgUiEvents`):

===================  ==========================================================================
turn frame           AG-UI events
===================  ==========================================================================
start                ``RUN_STARTED`` (``protocolVersion``; ``metadata``: conversation, chain,
                     trace id, version)
delta                ``TEXT_MESSAGE_START`` (the first of a message), ``TEXT_MESSAGE_CONTENT``
tool_call            ``TEXT_MESSAGE_END`` (of open text), ``TOOL_CALL_START`` / ``ARGS`` /
                     ``END``
tool_result          ``TOOL_CALL_RESULT``: ``{"ok", "duration_ms"}`` (and ``error``) as JSON —
                     the tool's own result stays on the server
sources              ``CUSTOM`` ``sources``; budget_warning: ``CUSTOM`` ``budget_warning``
approval_required    ``TOOL_CALL_START`` / ``ARGS`` / ``END`` of each waiting call (the proposal)
done                 ``TEXT_MESSAGE_END`` (of open text), ``RUN_FINISHED``: outcome ``success``
                     (``result``: the REST call body without its content; ``usage``), or
                     ``interrupt`` (one interrupt per waiting call), or ``cancelled``
error                ``TEXT_MESSAGE_END`` (of open text), ``RUN_ERROR`` (``code``, ``message``)
===================  ==========================================================================

Interrupts. A turn paused for approval ends its run with the interrupt outcome: each interrupt
is ``reason: "tool_call"``, its ``id`` and ``toolCallId`` the waiting call's id (the
``approval_id`` of the other transports), with a ``responseSchema`` of ``{"approved",
"editedArgs"?, "reason"?, "grant"?}``. The client resumes with a new run on the same thread
whose ``resume`` answers every interrupt: ``status: "resolved"`` with ``{"approved": true}``
(approve), ``{"approved": true, "editedArgs": {...}}`` (edit: the arguments replaced whole),
``{"approved": false, "reason"?}`` (reject), ``"grant": true`` to allow the tool for the rest of
the conversation; ``status: "cancelled"`` rejects. The resumed run does not repeat the calls'
``TOOL_CALL_START`` / ``ARGS`` / ``END``: it sends their ``TOOL_CALL_RESULT`` (a rejected call's
right after ``RUN_STARTED``: ``{"ok": false, "error"}``). A run without
``resume`` on a thread with waiting calls answers them as not run, as a new message does on
every transport (the protocol would refuse it; the turn's rule is kept, one rule everywhere).

No ``STEP_*`` events: the turn's stream does not mark where an advisor starts and ends (the
trace does, in the call log), so a step would claim a boundary the stream does not have.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    CustomEvent,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TextPart,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError

from advisors_app.protocols.common import invalid, run_result, tool_output
from advisors_app.turn.input import TurnInput
from advisors_app.validation import FieldErrors

__all__ = ["FIELD_NAMES", "AgUiEvents", "AgUiRun", "encode", "run_input"]

#: The turn's fields as an AG-UI client sends them (its field errors are reported there).
FIELD_NAMES = {
    "message": "messages",
    "conversation_id": "threadId",
    "decisions": "resume",
    "params": "forwardedProps.params",
    "label": "forwardedProps.label",
    "version": "forwardedProps.version",
}
#: Longest run id echoed back.
MAX_RUN_ID = 255
_PAYLOAD_KEYS = ("approved", "editedArgs", "reason", "grant")
_encoder = EventEncoder()


@dataclass(frozen=True, slots=True)
class AgUiRun:
    """A ``RunAgentInput`` read: its thread and run, the turn it asks for, and the tool calls
    its ``resume`` decides (their proposals were sent by the run that paused; ``rejected``:
    those refused, which will not run)."""

    thread_id: str
    run_id: str
    turn: TurnInput
    resumed: frozenset[str]
    rejected: frozenset[str] = frozenset()


def run_input(data: Any) -> AgUiRun:
    """The run ``data`` (a decoded JSON body) asks for; raises
    :class:`~advisors_app.exceptions.TurnError` ``invalid`` with field errors named as the
    client sent them (``messages``, ``resume.0.payload.approved``, …)."""
    if not isinstance(data, Mapping):
        raise invalid({"non_field_errors": ["Send a JSON object: a RunAgentInput."]})
    try:
        run = RunAgentInput.model_validate(data)
    except ValidationError as exc:
        raise invalid(_validation_errors(exc)) from None
    errors: FieldErrors = {}
    if len(run.run_id) > MAX_RUN_ID:
        errors["runId"] = [f"Use at most {MAX_RUN_ID} characters."]
    forwarded = run.forwarded_props if run.forwarded_props is not None else {}
    if not isinstance(forwarded, Mapping):
        errors["forwardedProps"] = ["Send an object (params, label, version) or leave it out."]
        forwarded = {}
    decisions = None
    message = None
    if run.resume:
        decisions = []
        for number, entry in enumerate(run.resume):
            decision = _decision(entry, f"resume.{number}", errors)
            if decision is not None:
                decisions.append(decision)
    else:
        message = _new_message(run, errors)
    if errors:
        raise invalid(errors)
    turn = TurnInput(
        message,
        run.thread_id,
        forwarded.get("params"),
        forwarded.get("label"),
        forwarded.get("version"),
        decisions=decisions,
    )
    resumed = frozenset(entry.interrupt_id for entry in run.resume or ())
    rejected = frozenset(d["approval_id"] for d in decisions or () if d["decision"] == "reject")
    return AgUiRun(run.thread_id, run.run_id, turn, resumed, rejected)


def _validation_errors(exc: ValidationError) -> FieldErrors:
    errors: FieldErrors = {}
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "non_field_errors"
        errors.setdefault(where, []).append(error["msg"])
    return errors


def _new_message(run: RunAgentInput, errors: FieldErrors) -> str | None:
    """The text of the run's last message, which must be the user's new one."""
    if not run.messages or run.messages[-1].role != "user":
        errors["messages"] = [
            "End the messages with the user's new message (role user): its text is the turn's "
            "message (the server keeps the conversation's history)."
        ]
        return None
    content = run.messages[-1].content
    if isinstance(content, str):
        return content
    texts = [part.text for part in content if isinstance(part, TextPart)]
    if not texts:
        errors[f"messages.{len(run.messages) - 1}.content"] = ["Send the message's text."]
        return None
    return "\n".join(texts)


def _decision(entry: ResumeEntry, where: str, errors: FieldErrors) -> dict[str, Any] | None:
    """The turn's decision for one resume entry (``None``, with ``errors``, when malformed)."""
    if entry.status == "cancelled":
        return {"approval_id": entry.interrupt_id, "decision": "reject"}
    payload = entry.payload
    if not isinstance(payload, Mapping) or not isinstance(payload.get("approved"), bool):
        errors[f"{where}.payload"] = ['Send {"approved": true|false} (see the responseSchema).']
        return None
    unknown = sorted(str(key) for key in payload if key not in _PAYLOAD_KEYS)
    if unknown:
        errors[f"{where}.payload"] = [f"Unknown keys {unknown}; known: {', '.join(_PAYLOAD_KEYS)}."]
        return None
    decision: dict[str, Any] = {"approval_id": entry.interrupt_id}
    edited = payload.get("editedArgs")
    if payload["approved"]:
        decision["decision"] = "edit" if edited is not None else "approve"
        if edited is not None:
            decision["arguments"] = edited
    else:
        decision["decision"] = "reject"
        if edited is not None:
            errors[f"{where}.payload.editedArgs"] = ["Edited arguments go with an approval."]
    for key, name in (("reason", "reason"), ("grant", "grant")):
        if key in payload:
            decision[name] = payload[key]
    return decision  # its values are checked by the turn (errors under "resume")


def encode(event: BaseEvent, event_id: str | None) -> str:
    """One AG-UI event as SSE (the package's encoder), with the ``id:`` of the turn's frame it
    came from, so a client that lost the stream can resume after it."""
    head = f"id: {event_id}\n" if event_id else ""
    return head + _encoder.encode(event)


def _response_schema(allowed: Collection[str]) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "approved": {"type": "boolean"},
        "grant": {
            "type": "boolean",
            "description": "Allow the tool for the rest of the conversation.",
        },
    }
    if "edit" in allowed:
        properties["editedArgs"] = {
            "type": "object",
            "description": "Full replacement of the tool's arguments. Not merged.",
        }
    if "reject" in allowed:
        properties["reason"] = {"type": "string", "description": "Why (with approved false)."}
    return {"type": "object", "properties": properties, "required": ["approved"]}


class AgUiEvents:
    """Translates one turn's frames, in order, into AG-UI events (see the module)."""

    def __init__(
        self,
        thread_id: str,
        run_id: str,
        resumed: Collection[str] = (),
        rejected: Collection[str] = (),
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._resumed = frozenset(resumed)
        self._rejected = sorted(rejected)
        self._trace = ""
        self._text: str | None = None  # the open text message's id
        self._last_text: str | None = None
        self._texts = 0
        self._interrupts: list[Interrupt] = []

    def translate(self, frame: Mapping[str, Any]) -> list[BaseEvent]:
        """The events of ``frame``; ``[]`` for a frame AG-UI has no counterpart of."""
        handler = getattr(self, f"_on_{frame['type']}", None)
        return handler(frame) if handler is not None else []

    def _end_text(self) -> list[BaseEvent]:
        if self._text is None:
            return []
        ended, self._text = self._text, None
        self._last_text = ended
        return [TextMessageEndEvent(message_id=ended)]

    def _proposal(self, call_id: str, name: str, arguments: str) -> list[BaseEvent]:
        events: list[BaseEvent] = [
            ToolCallStartEvent(
                tool_call_id=call_id, tool_call_name=name, parent_message_id=self._last_text
            )
        ]
        if arguments:
            events.append(ToolCallArgsEvent(tool_call_id=call_id, delta=arguments))
        events.append(ToolCallEndEvent(tool_call_id=call_id))
        return events

    def _on_start(self, frame: Mapping[str, Any]) -> list[BaseEvent]:
        self._trace = frame["trace_id"]
        about = {key: frame[key] for key in ("conversation_id", "chain", "trace_id", "version")}
        started = RunStartedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            protocol_version=PROTOCOL_VERSION,
            metadata=about,
        )
        # A rejected call never runs, so the turn sends nothing of it: its result says so,
        # and the client's call is not left waiting.
        refused = {"ok": False, "error": "Rejected: the call did not run."}
        return [started] + [
            ToolCallResultEvent(
                message_id=f"{self._trace}-result-{call_id}",
                tool_call_id=call_id,
                content=json.dumps(refused),
                role="tool",
            )
            for call_id in self._rejected
        ]

    def _on_delta(self, frame: Mapping[str, Any]) -> list[BaseEvent]:
        events: list[BaseEvent] = []
        if self._text is None:
            self._texts += 1
            self._text = f"{self._trace}-text-{self._texts}"
            events.append(TextMessageStartEvent(message_id=self._text, role="assistant"))
        events.append(TextMessageContentEvent(message_id=self._text, delta=frame["text"]))
        return events

    def _on_tool_call(self, frame: Mapping[str, Any]) -> list[BaseEvent]:
        events = self._end_text()
        if frame["id"] in self._resumed:  # proposed by the run that paused
            return events
        return events + self._proposal(frame["id"], frame["name"], frame["arguments"])

    def _on_tool_result(self, frame: Mapping[str, Any]) -> list[BaseEvent]:
        output = tool_output(frame)
        if not frame["ok"]:
            output["error"] = frame["error"]
        result = ToolCallResultEvent(
            message_id=f"{self._trace}-result-{frame['id']}",
            tool_call_id=frame["id"],
            content=json.dumps(output),
            role="tool",
        )
        return [*self._end_text(), result]

    def _on_sources(self, frame: Mapping[str, Any]) -> list[BaseEvent]:
        return [CustomEvent(name="sources", value=frame["sources"])]

    def _on_budget_warning(self, frame: Mapping[str, Any]) -> list[BaseEvent]:
        warning = {k: v for k, v in frame.items() if k not in ("type", "event_id")}
        return [CustomEvent(name="budget_warning", value=warning)]

    def _on_approval_required(self, frame: Mapping[str, Any]) -> list[BaseEvent]:
        events = self._end_text()
        for approval in frame["approvals"]:
            call_id, tool = approval["approval_id"], approval["tool"]
            events += self._proposal(call_id, tool, json.dumps(approval["arguments"]))
            self._interrupts.append(
                Interrupt(
                    id=call_id,
                    reason="tool_call",
                    message=approval.get("reason") or f"Run {tool}?",
                    tool_call_id=call_id,
                    response_schema=_response_schema(approval["allowed_decisions"]),
                    expires_at=approval.get("expires_at"),
                    metadata={
                        "tool": tool,
                        "arguments": approval["arguments"],
                        "allowed_decisions": approval["allowed_decisions"],
                    },
                )
            )
        return events

    def _on_done(self, frame: Mapping[str, Any]) -> list[BaseEvent]:
        outcome: Any
        if frame["reason"] == "cancelled":
            outcome = RunFinishedCancelledOutcome()
        elif self._interrupts:
            outcome = RunFinishedInterruptOutcome(interrupts=self._interrupts)
        else:
            outcome = RunFinishedSuccessOutcome()
        usage = frame.get("usage")
        finished = RunFinishedEvent(
            thread_id=self.thread_id,
            run_id=self.run_id,
            result=run_result(frame),
            outcome=outcome,
            usage=[_token_usage(usage, frame)] if usage else None,
        )
        return [*self._end_text(), finished]

    def _on_error(self, frame: Mapping[str, Any]) -> list[BaseEvent]:
        return [*self._end_text(), RunErrorEvent(message=frame["message"], code=frame["code"])]


def _token_usage(usage: Mapping[str, Any], done: Mapping[str, Any]) -> TokenUsage:
    model = (done.get("metadata") or {}).get("model")
    return TokenUsage(
        model=model if isinstance(model, str) and model else None,
        input_tokens=usage["prompt_tokens"],
        output_tokens=usage["completion_tokens"],
        total_tokens=usage["prompt_tokens"] + usage["completion_tokens"],
    )
