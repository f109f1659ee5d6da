"""Tool calls for models that cannot use the ``tools`` API, by JSON-Schema-constrained decoding.

Tiny local models (SmolLM2-135M) answer in prose when given OpenAI's ``tools`` parameter, but a
server with constrained decoding (llama.cpp's ``response_format`` ``json_schema``) can force
their output to match a schema. :class:`ToolCallEmulation` builds that schema — *one of*
"call tool X with arguments matching X's parameter schema" or "answer with text" — plus a short
system instruction listing the tools, and turns the JSON the model produced back into a real
``AssistantMessage(tool_calls=...)`` or a plain text answer. Objects are closed
(``additionalProperties: false``): without it a small model invents extra keys.

The model sees this protocol::

    {"tool": "<name>", "arguments": {...}}     call one tool
    {"answer": "<text>"}                      answer the user

so a reply holds at most one call (no parallel calls); its id is generated (``call_<hex>``).
A chat model can cap the tool rounds of a turn (``emulated_tool_rounds``; SmolLM2 gets 1): past
the cap only the answer is allowed. SmolLM2, given a tool result, otherwise tends to call the
same tool again until the tool loop's identical-call limit stops it.

When the request also asks for structured output (``response_format`` ``json_schema`` or
``json_object``), the ``answer`` alternative takes that schema and the answer text is its JSON.
Earlier tool calls in the history are shown to the model in the same JSON form, and tool
results as user messages, so no chat template needs tool support.

Streaming (:class:`EmulatedOutput`): the raw JSON never reaches the consumer.

* Nothing is emitted until the first key is decoded (a few tokens).
* ``answer`` with a text schema: the decoded text is emitted incrementally, as it arrives
  (JSON escapes decoded, a half-received escape held back until complete).
* ``answer`` with a structured schema: the answer's JSON is emitted once, when the stream ends.
* ``tool``: nothing is emitted while the call is generated; at the end one chunk carries the
  complete ``ToolCall`` (arguments are whole JSON, never fragments) with finish reason
  ``TOOL_CALLS``. Calls and streams give identical results.
* Output cut short (finish reason ``LENGTH``): a text answer keeps what was decoded, with
  ``LENGTH``; an incomplete tool call or undecodable output raises
  :class:`~advisors_app.core.exceptions.MalformedResponseError` (while iterating, in streams).
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions import MalformedResponseError
from ..messages import AssistantMessage, ToolCall, ToolResponseMessage

__all__ = ["EmulatedOutput", "ToolCallEmulation", "tool_spec"]

TOOL_CALLS = "TOOL_CALLS"

_INSTRUCTIONS = (
    "You can call tools. Reply with one JSON object only:\n"
    '{{"tool": "<tool name>", "arguments": {{...}}}} to call one of the tools below, or\n'
    '{{"answer": ...}} to answer the user directly.\n'
    "Call a tool only when you need its result; once you have the result, answer the user.\n"
    "Tools:\n{tools}"
)


_AFTER_RESULTS = "Now answer my question using this result."


def tool_spec(callback: Any) -> dict[str, Any]:
    """``{"name", "description", "parameters"}`` of a tool (OpenAI's function form, plain JSON).

    Accepts a :class:`~advisors_app.core.tools.ToolCallback` (its ``definition``), a
    ``ToolDefinition`` (``input_schema`` a mapping or JSON text, as Spring AI's), or a mapping
    in OpenAI's tool format. Raises ``ValueError`` for anything else.
    """
    if isinstance(callback, Mapping):
        data = callback.get("function", callback)
        name = data.get("name")
        description = data.get("description", "")
        schema = data.get("parameters", data.get("input_schema"))
    else:
        definition = getattr(callback, "definition", callback)
        name = getattr(definition, "name", None)
        description = getattr(definition, "description", "")
        schema = getattr(definition, "input_schema", None)
    if not isinstance(name, str) or not name:
        raise ValueError(
            f"cannot read a tool definition (name, description, schema) from {callback!r}"
        )
    if isinstance(schema, str):
        schema = json.loads(schema) if schema.strip() else None
    return {
        "name": name,
        "description": description or "",
        "parameters": plain_json(schema) if schema else {"type": "object", "properties": {}},
    }


def plain_json(value: Any) -> Any:
    """``value`` with every mapping a ``dict`` and every tuple a ``list`` (JSON-serialisable)."""
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]
    return value


def _arguments(schema: Mapping[str, Any]) -> str:
    """``city: string, days: integer (optional)`` for an object schema."""
    required = set(schema.get("required", ()))
    parts = []
    for name, prop in (schema.get("properties") or {}).items():
        kind = "any"
        if isinstance(prop, Mapping):
            if "enum" in prop:
                kind = " | ".join(json.dumps(v, ensure_ascii=False) for v in prop["enum"])
            else:
                kind = str(prop.get("type", "any"))
        parts.append(f"{name}: {kind}" + ("" if name in required else " (optional)"))
    return ", ".join(parts)


def _closed(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an object schema that forbids keys it does not declare."""
    result = copy.deepcopy(dict(schema))
    if result.get("type", "object") == "object":
        result.setdefault("type", "object")
        result.setdefault("properties", {})
        result.setdefault("additionalProperties", False)
    return result


def _answer_schema(response_format: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The schema of a structured answer requested by ``response_format``; ``None`` for text."""
    if not response_format:
        return None
    kind = response_format.get("type")
    if kind == "json_schema":
        schema = response_format.get("json_schema", {}).get("schema")
        return dict(schema) if schema else {"type": "object"}
    if kind == "json_object":
        return {"type": "object"}
    return None


class ToolCallEmulation:
    """The plan for one request: its tools, the decoding schema and the instruction text.

    ``allow_calls=False`` leaves only the answer alternative in the schema (the tools stay
    listed, so earlier calls in the history still make sense): the chat model sets it once a
    turn has had its allowed number of tool rounds.
    """

    def __init__(
        self,
        tools: Sequence[Mapping[str, Any]],
        response_format: Mapping[str, Any] | None,
        *,
        allow_calls: bool = True,
    ) -> None:
        self.tools = [dict(t) for t in tools]
        self.tool_names = {t["name"] for t in self.tools} if allow_calls else set()
        self.answer_schema = _answer_schema(response_format)
        self.allow_calls = allow_calls

    @property
    def answer_is_text(self) -> bool:
        return self.answer_schema is None

    def response_format(self) -> dict[str, Any]:
        """The ``response_format`` that constrains the output to a call or an answer."""
        alternatives: list[dict[str, Any]] = [
            {
                "type": "object",
                "properties": {
                    "tool": {"const": tool["name"]},
                    "arguments": _closed(tool["parameters"]),
                },
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
            for tool in self.tools
            if self.allow_calls
        ]
        alternatives.append(
            {
                "type": "object",
                "properties": {"answer": self.answer_schema or {"type": "string"}},
                "required": ["answer"],
                "additionalProperties": False,
            }
        )
        return {
            "type": "json_schema",
            "json_schema": {"name": "tool_call_or_answer", "schema": {"anyOf": alternatives}},
        }

    def instructions(self) -> str:
        """The system text that lists the tools and explains the reply format.

        Tools are shown as signatures (``- get_weather(city: string): Get the weather.``): in
        trials SmolLM2 chose the right tool for 6 of 7 questions that way and for 3 of 7 when
        shown the JSON Schemas. The schemas still bind the output, through the grammar.
        """
        lines = [
            f"- {tool['name']}({_arguments(tool['parameters'])}): "
            + " ".join(str(tool["description"]).split())
            for tool in self.tools
        ]
        return _INSTRUCTIONS.format(tools="\n".join(lines))

    @staticmethod
    def history_messages(message: AssistantMessage | ToolResponseMessage) -> list[dict[str, Any]]:
        """OpenAI messages showing an earlier tool call or tool result in the emulated form."""
        if isinstance(message, ToolResponseMessage):
            # Phrased as the user's request: as a "tool" or "system" message, SmolLM2 calls the
            # same tool again instead of answering.
            results = "\n".join(
                f"Result of tool {r.name}: {r.response_data}" for r in message.responses
            )
            return [{"role": "user", "content": f"{results}\n{_AFTER_RESULTS}"}]
        return [
            {
                "role": "assistant",
                "content": json.dumps(
                    {"tool": call.name, "arguments": call.parsed_arguments()}, ensure_ascii=False
                ),
            }
            for call in message.tool_calls
        ]

    def output(self) -> EmulatedOutput:
        return EmulatedOutput(self)


def _partial(raw: str) -> Any:
    import jiter

    try:
        return jiter.from_json(raw.encode(), partial_mode="trailing-strings")
    except ValueError:
        return None


class EmulatedOutput:
    """Decodes one generation's JSON, fed in pieces; see the module docstring for the rules."""

    __slots__ = ("_emitted", "_mode", "_plan", "_raw")

    def __init__(self, plan: ToolCallEmulation) -> None:
        self._plan = plan
        self._raw: list[str] = []
        self._emitted = ""
        self._mode: str | None = None

    def feed(self, delta: str) -> str:
        """Take a piece of the model's output; return the answer text to emit now (maybe "")."""
        if not delta:
            return ""
        self._raw.append(delta)
        if self._mode == "tool" or (self._mode == "answer" and not self._plan.answer_is_text):
            return ""
        value = _partial("".join(self._raw))
        if not isinstance(value, dict):
            return ""
        if self._mode is None:
            if "tool" in value:
                self._mode = "tool"
                return ""
            if "answer" not in value:
                return ""
            self._mode = "answer"
            if not self._plan.answer_is_text:
                return ""
        return self._take_text(value.get("answer"))

    def _take_text(self, answer: Any) -> str:
        if not isinstance(answer, str) or not answer.startswith(self._emitted):
            return ""
        # A lone high surrogate is half of a \\uXXXX pair whose second half has not arrived.
        end = len(answer) - 1 if answer and "\ud800" <= answer[-1] <= "\udbff" else len(answer)
        new = answer[len(self._emitted) : end]
        self._emitted += new
        return new

    def finish(self, finish_reason: str | None) -> tuple[str, tuple[ToolCall, ...], str | None]:
        """The rest of the answer text, the tool calls, and the finish reason to report.

        Raises :class:`MalformedResponseError` when the output is neither a complete tool call
        nor a (possibly truncated) answer.
        """
        raw = "".join(self._raw)
        value = _partial(raw)
        if isinstance(value, dict) and "tool" in value:
            return "", (self._tool_call(raw, finish_reason),), TOOL_CALLS
        if isinstance(value, dict) and "answer" in value:
            answer = value["answer"]
            if self._plan.answer_is_text and isinstance(answer, str):
                rest = self._take_text(answer) if answer.startswith(self._emitted) else ""
                return rest, (), finish_reason
            return json.dumps(self._complete(raw, finish_reason)["answer"]), (), finish_reason
        raise self._malformed(raw, finish_reason)

    def _complete(self, raw: str, finish_reason: str | None) -> dict[str, Any]:
        try:
            value = json.loads(raw)
        except ValueError:
            raise self._malformed(raw, finish_reason) from None
        if not isinstance(value, dict):
            raise self._malformed(raw, finish_reason)
        return value

    def _tool_call(self, raw: str, finish_reason: str | None) -> ToolCall:
        value = self._complete(raw, finish_reason)
        name, arguments = value.get("tool"), value.get("arguments", {})
        if not isinstance(name, str) or name not in self._plan.tool_names:
            raise self._malformed(raw, finish_reason)
        if not isinstance(arguments, dict):
            raise self._malformed(raw, finish_reason)
        return ToolCall(
            f"call_{uuid.uuid4().hex[:24]}", name, json.dumps(arguments, ensure_ascii=False)
        )

    @staticmethod
    def _malformed(raw: str, finish_reason: str | None) -> MalformedResponseError:
        return MalformedResponseError(
            "tool-call emulation: the model's output is neither a complete tool call nor an "
            f"answer (finish reason {finish_reason}): {raw[:200]!r}",
            body=raw,
        )
