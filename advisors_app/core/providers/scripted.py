"""``ScriptedChatModel``: the shipped fake chat model, for tests and demos without a model.

Like httpx's ``MockTransport`` or Pydantic AI's ``FunctionModel``, it is part of the product: a
chain can be exercised end to end, deterministically, and the prompts it sent inspected.

Besides its script, the model can follow **tool rules**, a stateless rule set stored as JSON in
a model config (so a demo calls tools without an API key, and a restart between a paused turn
and its resume answers the same):

=============  ===========================================================================
key            meaning
=============  ===========================================================================
``tool_rules`` list of ``{"when": <regex>, "tool": <name>, "arguments"?: {...}}``. When the
               prompt ends with a user message, the first rule whose ``when`` is found in
               that message's text (``re.search``, case-insensitive) **and** whose ``tool``
               the prompt's options offer (``ToolCallingChatOptions`` tool callbacks or
               names) makes the answer one call of that tool with finish reason
               ``TOOL_CALLS``. ``arguments`` (a JSON object, default ``{}``) is copied with
               ``{message}`` (the user message's text) and ``{<group>}`` (a named group of
               ``when``; ``""`` when it did not take part) replaced in its strings.
``after_tool`` text answered when the prompt ends with a tool response message;
               ``{tool_result}`` is the response text (several joined by newlines, e.g. the
               rejection text of a rejected call), ``{tool_name}`` the tool name(s),
               ``{message}`` the last user message's text.
=============  ===========================================================================

Everything else (no rule matches, a rule's tool is not offered, a tool response without
``after_tool``) is answered from the script and does not consume it otherwise. A rule's call
gets a new random id (``call_<24 hex>``), as a real model's would; ``stream()`` sends it as one
chunk.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..aggregation import ChatResponseAccumulator
from ..context_window import validated_context_window
from ..exceptions import AdvisorStateError
from ..messages import AssistantMessage, ToolCall, ToolResponseMessage, UserMessage
from ..prompt import ChatOptions, Prompt, ToolCallingChatOptions, merge_options
from ..response import ChatGenerationMetadata, ChatResponse, Generation

__all__ = [
    "AFTER_TOOL_PLACEHOLDERS",
    "ScriptItem",
    "ScriptedChatModel",
    "ToolRule",
    "check_after_tool",
    "parse_tool_rules",
]

Chunk: TypeAlias = str | ChatResponse | BaseException
ScriptItem: TypeAlias = (
    str | ChatResponse | BaseException | Sequence[Chunk] | Callable[[Prompt], Any]
)


#: The placeholders ``after_tool`` may use.
AFTER_TOOL_PLACEHOLDERS = frozenset({"tool_result", "tool_name", "message"})
_RULE_KEYS = frozenset({"when", "tool", "arguments"})
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _fill(template: str, values: Mapping[str, str]) -> str:
    # Only {name} of a known value is replaced: the user's text is never a template, and a
    # brace the template means literally stays.
    return _PLACEHOLDER.sub(
        lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template
    )


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _filled(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _fill(value, values)
    if isinstance(value, Mapping):
        return {key: _filled(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [_filled(item, values) for item in value]
    return value


def _unknown_placeholders(texts: Iterable[str], known: Iterable[str]) -> list[str]:
    allowed = set(known)
    return sorted({n for text in texts for n in _PLACEHOLDER.findall(text)} - allowed)


@dataclass(frozen=True, slots=True)
class ToolRule:
    """One tool rule of a :class:`ScriptedChatModel` (see the module docstring).

    ``when`` is compiled case-insensitive; ``arguments`` is the JSON object template. Build
    rules from JSON with :func:`parse_tool_rules`, which checks them.
    """

    when: re.Pattern[str]
    tool: str
    arguments: Mapping[str, Any]

    def arguments_for(self, message: str) -> str | None:
        """The call's arguments as JSON text when ``when`` is found in ``message``, else
        ``None``."""
        match = self.when.search(message)
        if match is None:
            return None
        values = {name: group or "" for name, group in match.groupdict().items()}
        values["message"] = message
        return json.dumps(_filled(self.arguments, values), ensure_ascii=False)


def parse_tool_rules(value: Any) -> tuple[ToolRule, ...]:
    """The rules of a ``tool_rules`` config value (a list of JSON objects).

    Raises ``ValueError`` naming the rule (``tool_rules[<i>]``), the key and the fix: not a
    list, a rule that is not an object or has unknown keys, a ``when`` that is missing, not a
    string or not a valid regular expression, a blank ``tool``, ``arguments`` that are not an
    object, or a placeholder that is neither ``{message}`` nor a named group of ``when``.
    """
    if not isinstance(value, list):
        raise ValueError(f"'tool_rules' must be a list of rules, got {value!r}")
    rules = []
    for index, rule in enumerate(value):
        where = f"'tool_rules'[{index}]"
        if not isinstance(rule, Mapping):
            raise ValueError(
                f'{where} must be an object {{"when": <regex>, "tool": <name>, '
                f'"arguments"?: {{...}}}}, got {rule!r}'
            )
        unknown = sorted(set(rule) - _RULE_KEYS)
        if unknown:
            raise ValueError(
                f"{where} has unknown key(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(sorted(_RULE_KEYS))}"
            )
        when = rule.get("when")
        if not isinstance(when, str) or not when:
            raise ValueError(f"{where}: 'when' must be a non-empty regular expression string")
        try:
            pattern = re.compile(when, re.IGNORECASE)
        except re.error as error:
            raise ValueError(
                f"{where}: 'when' is not a valid regular expression: {error}"
            ) from error
        tool = rule.get("tool")
        if not isinstance(tool, str) or not tool.strip():
            raise ValueError(f"{where}: 'tool' must name a tool, got {tool!r}")
        arguments = rule.get("arguments", {})
        if not isinstance(arguments, Mapping):
            raise ValueError(f"{where}: 'arguments' must be a JSON object, got {arguments!r}")
        bad = _unknown_placeholders(_strings(arguments), {"message", *pattern.groupindex})
        if bad:
            raise ValueError(
                f"{where}: unknown placeholder(s) {', '.join('{' + n + '}' for n in bad)} in "
                "'arguments'; use {message} or a named group (?P<name>...) of 'when'"
            )
        rules.append(ToolRule(pattern, tool, dict(arguments)))
    return tuple(rules)


def check_after_tool(value: Any) -> str:
    """``value`` when it is a valid ``after_tool`` template; raises ``ValueError`` otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"'after_tool' must be a string, got {value!r}")
    bad = _unknown_placeholders([value], AFTER_TOOL_PLACEHOLDERS)
    if bad:
        raise ValueError(
            f"'after_tool' has unknown placeholder(s) {', '.join('{' + n + '}' for n in bad)}; "
            "use {tool_result}, {tool_name} or {message}"
        )
    return value


def _offered_tools(options: ChatOptions | None) -> frozenset[str]:
    if not isinstance(options, ToolCallingChatOptions):
        return frozenset()
    return frozenset({c.name for c in options.tool_callbacks} | set(options.tool_names))


def _last_user_text(prompt: Prompt) -> str:
    for message in reversed(prompt.instructions):
        if isinstance(message, UserMessage):
            return message.text
    return ""


def _chunk_response(chunk: str | ChatResponse) -> ChatResponse:
    if isinstance(chunk, ChatResponse):
        return chunk
    return ChatResponse((Generation(AssistantMessage(chunk)),))


class ScriptedChatModel:
    """A chat model that answers from a script, one item per ``call()`` or ``stream()``.

    Items: a ``str`` is one generation with finish reason ``"STOP"``; a ``ChatResponse`` is
    returned as is; a list is a chunk sequence (``str`` chunks carry no finish reason; a
    ``ChatResponse`` chunk is sent as is; an exception instance is raised at that point of the
    stream) and ``call()`` returns its aggregate; an exception instance is raised; a callable
    receives the prompt and returns any of these (it may be ``async``).

    ``stream()`` of a non-list item yields it as one chunk. ``chunk_delay`` (seconds) is slept
    before each streamed chunk. With ``repeat=True`` the script cycles forever; otherwise an
    exhausted script raises :class:`AdvisorStateError`. ``tool_rules`` (:class:`ToolRule`
    objects, or their JSON dicts) and ``after_tool`` answer before the script, from the prompt
    alone (see the module docstring); bad ones raise ``ValueError``. ``prompts`` records each
    prompt when its call or stream starts; ``events`` records ``"call"``, ``"stream"``,
    ``"complete"``, ``"cancel"`` and ``"error"`` so tests can see whether a stream was closed
    early. ``context_window`` (tokens, ``None``: unknown) makes the model advisors check each
    prompt against it (:mod:`advisors_app.core.context_window`), deterministically.
    """

    def __init__(
        self,
        responses: Iterable[ScriptItem] = (),
        *,
        default_options: ChatOptions | None = None,
        chunk_delay: float = 0.0,
        repeat: bool = False,
        tool_rules: Sequence[ToolRule | Mapping[str, Any]] = (),
        after_tool: str | None = None,
        context_window: int | None = None,
    ) -> None:
        self._context_window = validated_context_window(context_window)
        self._tool_rules = tuple(
            rule if isinstance(rule, ToolRule) else parse_tool_rules([rule])[0]
            for rule in tool_rules
        )
        self._after_tool = check_after_tool(after_tool) if after_tool is not None else None
        self._script = list(responses)
        self._repeat = repeat
        self._cursor: Iterator[ScriptItem] = (
            itertools.cycle(self._script) if repeat else iter(self._script)
        )
        self._consumed = 0
        self._lock = threading.Lock()
        self._default_options = default_options
        self.chunk_delay = chunk_delay
        self.prompts: list[Prompt] = []
        self.events: list[str] = []

    @property
    def default_options(self) -> ChatOptions | None:
        return self._default_options

    @property
    def context_window(self) -> int | None:
        """Tokens per request, prompt and answer together (``None``: unknown)."""
        return self._context_window

    def add(self, *items: ScriptItem) -> None:
        """Append items to a non-repeating script."""
        if self._repeat:
            raise AdvisorStateError("cannot extend a repeating script")
        with self._lock:
            remaining = list(self._cursor)
            self._cursor = iter([*remaining, *items])
            self._script.extend(items)

    @property
    def remaining(self) -> int:
        """How many scripted items are left (``0`` for a repeating script that is empty)."""
        return len(self._script) - self._consumed if not self._repeat else len(self._script)

    def _ruled_item(self, prompt: Prompt) -> str | ChatResponse | None:
        """The answer the tool rules or ``after_tool`` give ``prompt``, or ``None``."""
        if not prompt.instructions:
            return None
        last = prompt.instructions[-1]
        if isinstance(last, ToolResponseMessage):
            if self._after_tool is None:
                return None
            return _fill(
                self._after_tool,
                {
                    "tool_result": "\n".join(r.response_data for r in last.responses),
                    "tool_name": ", ".join(dict.fromkeys(r.name for r in last.responses)),
                    "message": _last_user_text(prompt),
                },
            )
        if not isinstance(last, UserMessage) or not self._tool_rules:
            return None
        offered = _offered_tools(merge_options(self._default_options, prompt.options))
        for rule in self._tool_rules:
            if rule.tool not in offered:
                continue
            arguments = rule.arguments_for(last.text)
            if arguments is not None:
                call = ToolCall(f"call_{uuid.uuid4().hex[:24]}", rule.tool, arguments)
                return ChatResponse(
                    (
                        Generation(
                            AssistantMessage("", tool_calls=(call,)),
                            ChatGenerationMetadata("TOOL_CALLS"),
                        ),
                    )
                )
        return None

    async def _next_item(self, prompt: Prompt) -> Any:
        ruled = self._ruled_item(prompt)
        with self._lock:
            self.prompts.append(prompt)
            if ruled is not None:
                return ruled
            try:
                item = next(self._cursor)
            except StopIteration:
                raise AdvisorStateError(
                    f"ScriptedChatModel script is exhausted after {self._consumed} response(s)"
                ) from None
            self._consumed += 1
        while callable(item) and not isinstance(
            item, (str, ChatResponse, BaseException, list, tuple)
        ):
            item = item(prompt)
            if inspect.isawaitable(item):
                item = await item
        return item

    async def call(self, prompt: Prompt) -> ChatResponse:
        self.events.append("call")
        item = await self._next_item(prompt)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, str):
            return ChatResponse.of_text(item)
        if isinstance(item, ChatResponse):
            return item
        accumulator = ChatResponseAccumulator()
        for chunk in item:
            if isinstance(chunk, BaseException):
                raise chunk
            accumulator.add(_chunk_response(chunk))
        return accumulator.result()

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        self.events.append("stream")
        item = await self._next_item(prompt)
        chunks: Sequence[Chunk]
        if isinstance(item, str):
            chunks = [
                ChatResponse((Generation(AssistantMessage(item), ChatGenerationMetadata("STOP")),))
            ]
        elif isinstance(item, (ChatResponse, BaseException)):
            chunks = [item]
        else:
            chunks = item
        try:
            for chunk in chunks:
                if self.chunk_delay:
                    await asyncio.sleep(self.chunk_delay)
                if isinstance(chunk, BaseException):
                    raise chunk
                yield _chunk_response(chunk)
        except (GeneratorExit, asyncio.CancelledError):
            self.events.append("cancel")
            raise
        except BaseException:
            self.events.append("error")
            raise
        self.events.append("complete")
