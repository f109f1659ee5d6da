"""Chat and embedding models for any OpenAI-compatible HTTP API, on the official ``openai`` SDK.

Works with OpenAI itself and with servers that speak its API: DeepSeek, Groq, Azure-style
gateways, vLLM, Ollama's ``/v1``, LM Studio, llama.cpp's server (the embedded default model runs
through this very class). Follows Spring AI's ``OpenAiChatModel`` / ``OpenAiEmbeddingModel``:
finish reasons are upper-case names (``STOP``, ``LENGTH``, ``TOOL_CALLS``, ``CONTENT_FILTER``),
token log-probabilities (when asked for) go into the generation metadata as ``"logprobs"``,
usage is mapped to :class:`~advisors_app.core.response.Usage` with cached prompt tokens and the
provider's own usage dict, tool definitions come from ``ToolCallingChatOptions.tool_callbacks``.

Divergences from Spring AI, each a fix:

* streams ask for usage by default (``stream_options.include_usage``; B11: Spring reported 0);
* provider faults raise the same typed errors with status and body in calls and streams
  (B32), listed in :func:`~._openai_client.map_openai_error`;
* a stream that ends without a finish reason (connection closed early) raises
  :class:`~advisors_app.core.exceptions.MalformedResponseError` instead of passing for a
  complete answer;
* streamed tool-call deltas are emitted as fragments keyed by ``index`` and merged by
  :class:`~advisors_app.core.aggregation.ChatResponseAccumulator` (Spring concatenated them
  into separate calls, defect 5.4.33);
* optional tool-call emulation for models without tool support (:mod:`.tool_emulation`).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, NoReturn

from ..context_window import validated_context_window
from ..exceptions import MalformedResponseError
from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from ..prompt import ChatOptions, Prompt, ToolCallingChatOptions, merge_options
from ..response import ChatGenerationMetadata, ChatResponse, ChatResponseMetadata, Generation, Usage
from ._openai_client import NO_KEY, ClientSettings, map_openai_error
from .echoed_secrets import SecretFilter, StreamFilter, reply_filter
from .openai_embedding import OpenAiCompatibleEmbeddingModel
from .tool_emulation import EmulatedOutput, ToolCallEmulation, plain_json, tool_spec

__all__ = ["OpenAiCompatibleChatModel", "OpenAiCompatibleEmbeddingModel", "usage_from_openai"]

_SCALAR_OPTIONS = (
    "temperature",
    "max_tokens",
    "top_p",
    "frequency_penalty",
    "presence_penalty",
    "seed",
)


def usage_from_openai(usage: Any) -> Usage | None:
    """Core :class:`Usage` from an SDK usage object: counts, cached prompt tokens, native dict."""
    if usage is None:
        return None
    native = usage.model_dump(exclude_none=True) if hasattr(usage, "model_dump") else dict(usage)
    details = native.get("prompt_tokens_details") or {}
    return Usage(
        int(native.get("prompt_tokens") or 0),
        int(native.get("completion_tokens") or 0),
        native.get("total_tokens"),
        details.get("cached_tokens"),
        native,
    )


def _finish_reason(reason: str | None) -> str | None:
    # Spring AI reports OpenAI's enum names: stop -> STOP, tool_calls -> TOOL_CALLS, ...
    return reason.upper() if reason else None


def _reasoning(message: Any) -> str:
    """The reasoning part of a message or stream delta: ``reasoning_content``, which
    OpenAI-compatible servers of reasoning models (DeepSeek, vLLM, llama.cpp) send beside
    ``content`` — an extra field the SDK keeps as an attribute."""
    reasoning = getattr(message, "reasoning_content", None) if message is not None else None
    return reasoning if isinstance(reasoning, str) else ""


def _logprobs(choice: Any) -> dict[str, Any]:
    """``{"logprobs": [...]}`` when the provider returned token log-probabilities (asked for
    with ``ChatOptions(extra={"logprobs": True, "top_logprobs": n})``): per answer token its
    ``token``, ``logprob`` and ``top_logprobs`` alternatives (``token``, ``logprob``), as
    :class:`~advisors_app.core.decision.ChatDecisionModel` reads them; else ``{}``."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return {}
    return {
        "logprobs": [
            {
                "token": entry.token,
                "logprob": entry.logprob,
                "top_logprobs": [
                    {"token": top.token, "logprob": top.logprob} for top in entry.top_logprobs or ()
                ],
            }
            for entry in content
        ]
    }


def _user_content(message: UserMessage) -> Any:
    if not message.media:
        return message.text
    parts: list[dict[str, Any]] = [{"type": "text", "text": message.text}] if message.text else []
    for media in message.media:
        data = media.data
        if isinstance(data, bytes):
            data = f"data:{media.mime_type};base64,{base64.b64encode(data).decode()}"
        parts.append({"type": "image_url", "image_url": {"url": data}})
    return parts


def _openai_messages(
    messages: Sequence[Message], emulation: ToolCallEmulation | None
) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            result.append({"role": "system", "content": message.text})
        elif isinstance(message, UserMessage):
            result.append({"role": "user", "content": _user_content(message)})
        elif isinstance(message, ToolResponseMessage):
            if emulation is not None:
                result.extend(emulation.history_messages(message))
                continue
            result.extend(
                {"role": "tool", "tool_call_id": r.id, "content": r.response_data}
                for r in message.responses
            )
        elif message.tool_calls and emulation is not None:
            result.extend(emulation.history_messages(message))
        else:
            entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in message.tool_calls
                ]
            result.append(entry)
    if emulation is not None:
        instructions = emulation.instructions()
        if result and result[0]["role"] == "system":
            result[0] = {"role": "system", "content": f"{result[0]['content']}\n\n{instructions}"}
        else:
            result.insert(0, {"role": "system", "content": instructions})
    return result


def _tool_rounds(messages: Sequence[Message]) -> int:
    """Tool results since the last user message: the tool rounds of the current turn."""
    rounds = 0
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            break
        rounds += isinstance(message, ToolResponseMessage)
    return rounds


class _StreamState:
    """Per-stream bookkeeping: emulation decoders and secret filters per choice, and whether
    the model finished."""

    __slots__ = ("decoders", "filters", "finished", "secrets")

    def __init__(self, secrets: SecretFilter) -> None:
        self.decoders: dict[int, EmulatedOutput] = {}
        self.secrets = secrets
        #: ``(choice, None)``: the choice's text; ``(choice, tool index)``: a call's arguments.
        self.filters: dict[tuple[int, int | None], StreamFilter] = {}
        self.finished = False


class OpenAiCompatibleChatModel:
    """``ChatModel`` over an OpenAI-compatible ``/chat/completions`` endpoint.

    ``model`` is sent unless the prompt's options name another; ``base_url`` is the API root
    (``.../v1``; ``None`` = OpenAI); ``api_key`` or ``api_key_env`` (the name of an environment
    variable read at each call; never stored or logged) gives the key — with neither, servers
    that need none get a placeholder. ``default_options`` are merged under each prompt's
    options. ``timeout`` (seconds) bounds connecting and each read, so a stream may run longer
    while chunks keep coming; ``max_retries`` is the SDK's retry count for connection errors,
    408, 409, 429 and 5xx (honouring ``Retry-After``). ``include_usage`` asks streams for a
    final usage chunk. ``tool_call_emulation=True`` replaces the ``tools`` parameter with
    constrained decoding (:mod:`.tool_emulation`) for models that cannot call tools;
    ``emulated_tool_rounds`` then caps the tool rounds of a turn (``None``: no cap), after which
    the model may only answer. ``context_window`` is the tokens one request holds, prompt and
    answer (``None``: unknown, prompts are not checked; see
    :mod:`advisors_app.core.context_window`).

    Known secret values in a reply — the key itself, echoed by the provider or a proxy, and
    whatever the process declared (:mod:`.echoed_secrets`) — are replaced with
    ``[REDACTED]`` in the text and tool-call arguments of ``call`` and ``stream`` (a key split
    across chunks too), before any advisor sees the reply.

    ``ChatOptions.extra`` entries are sent in the request body as given (``top_k`` too, as
    llama.cpp and vLLM read it). Errors: the provider errors of
    :mod:`advisors_app.core.exceptions`, raised alike by ``call`` and while iterating
    ``stream``. Closing a stream early closes its HTTP response (the server stops generating).
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        default_options: ChatOptions | None = None,
        timeout: float | None = 60.0,
        max_retries: int = 2,
        include_usage: bool = True,
        tool_call_emulation: bool = False,
        emulated_tool_rounds: int | None = None,
        provider: str = "openai",
        headers: Mapping[str, str] | None = None,
        context_window: int | None = None,
    ) -> None:
        if not model:
            raise ValueError("model cannot be null or empty")
        self._context_window = validated_context_window(context_window)
        self.model = model
        self.include_usage = include_usage
        self.tool_call_emulation = tool_call_emulation
        if emulated_tool_rounds is not None and emulated_tool_rounds < 0:
            raise ValueError(f"emulated_tool_rounds must be >= 0, got {emulated_tool_rounds!r}")
        self.emulated_tool_rounds = emulated_tool_rounds
        self._default_options = default_options
        self._settings = ClientSettings(
            base_url=base_url,
            api_key=api_key,
            api_key_env=api_key_env,
            timeout=timeout,
            max_retries=max_retries,
            provider=provider,
            headers=headers,
        )

    @property
    def default_options(self) -> ChatOptions | None:
        return self._default_options

    @property
    def context_window(self) -> int | None:
        """Tokens per request, prompt and answer together (``None``: unknown)."""
        return self._context_window

    @property
    def provider(self) -> str:
        return self._settings.provider

    @property
    def base_url(self) -> str | None:
        return self._settings.base_url

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r}, "
            f"provider={self.provider!r})"
        )

    async def _endpoint(self) -> tuple[str | None, str | None]:
        """``(base_url, api_key)`` overrides for this call; subclasses start servers here."""
        return None, None

    async def _client(self) -> Any:
        base_url, api_key = await self._endpoint()
        return await self._settings.client(base_url, api_key)

    def _secrets(self) -> SecretFilter:
        """What to redact from this call's reply: the known secrets and the key it sent."""
        try:
            own: str | None = self._settings.api_key()
        except Exception:  # its variable is unset: the request did not send one
            own = None
        return reply_filter(own if own != NO_KEY else None)

    def _request(
        self, prompt: Prompt, stream: bool
    ) -> tuple[dict[str, Any], ToolCallEmulation | None]:
        options = merge_options(self._default_options, prompt.options) or ChatOptions()
        tools: list[dict[str, Any]] = []
        if isinstance(options, ToolCallingChatOptions):
            tools = [tool_spec(c) for c in options.tool_callbacks]
            unresolved = sorted(set(options.tool_names) - {t["name"] for t in tools})
            if unresolved:
                # Spring's model resolves names itself; here ToolCallingAdvisor does it first.
                raise ValueError(
                    f"tool name(s) {', '.join(unresolved)} reached the model unresolved; "
                    "pass ToolCallbacks, or let ToolCallingAdvisor resolve names"
                )
        emulation = None
        if tools and self.tool_call_emulation:
            limit = self.emulated_tool_rounds
            allow_calls = limit is None or _tool_rounds(prompt.instructions) < limit
            emulation = ToolCallEmulation(tools, options.response_format, allow_calls=allow_calls)
        request: dict[str, Any] = {
            "model": options.model or self.model,
            "messages": _openai_messages(prompt.instructions, emulation),
        }
        for name in _SCALAR_OPTIONS:
            value = getattr(options, name)
            if value is not None:
                request[name] = value
        if options.stop:
            request["stop"] = list(options.stop)
        if emulation is not None:
            request["response_format"] = emulation.response_format()
        elif options.response_format:
            request["response_format"] = plain_json(options.response_format)
        if tools and emulation is None:
            request["tools"] = [{"type": "function", "function": tool} for tool in tools]
        extra: dict[str, Any] = plain_json(options.extra)
        if options.top_k is not None:
            extra.setdefault("top_k", options.top_k)
        if extra:
            request["extra_body"] = extra
        if stream:
            request["stream"] = True
            if self.include_usage:
                request["stream_options"] = {"include_usage": True}
        return request, emulation

    def _raise(self, exc: BaseException, *, streaming: bool = False) -> NoReturn:
        mapped = map_openai_error(exc, self.provider, streaming=streaming)
        if mapped is exc:
            raise exc
        raise mapped from exc

    async def call(self, prompt: Prompt) -> ChatResponse:
        """One completion; raises the provider errors described on the class."""
        request, emulation = self._request(prompt, stream=False)
        try:
            client = await self._client()
            completion = await client.chat.completions.create(**request)
        except Exception as exc:
            self._raise(exc)
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise MalformedResponseError(
                "the provider's answer has no choices",
                body=str(completion)[:2000],
                provider=self.provider,
            )
        secrets = self._secrets()
        generations = []
        for choice in sorted(choices, key=lambda c: c.index or 0):
            message = choice.message
            text = message.content or ""
            calls = tuple(
                ToolCall(tc.id, tc.function.name, secrets.text(tc.function.arguments or "{}"))
                for tc in message.tool_calls or ()
                if getattr(tc, "function", None) is not None
            )
            finish = _finish_reason(choice.finish_reason)
            if emulation is not None:
                output = emulation.output()
                head = output.feed(text)
                rest, calls, finish = output.finish(finish)
                text = head + rest
            text = secrets.text(text)
            refusal = getattr(message, "refusal", None)
            metadata = {"refusal": refusal} if refusal else {}
            generation_metadata = ChatGenerationMetadata(finish, _logprobs(choice))
            reasoning = secrets.text(_reasoning(message))
            generations.append(
                Generation(AssistantMessage(text, metadata, calls, reasoning), generation_metadata)
            )
        return ChatResponse(
            tuple(generations),
            self._response_metadata(completion, usage_from_openai(completion.usage)),
        )

    def _response_metadata(self, payload: Any, usage: Usage | None) -> ChatResponseMetadata:
        extra = {}
        if getattr(payload, "system_fingerprint", None):
            extra["system_fingerprint"] = payload.system_fingerprint
        if getattr(payload, "created", None):
            extra["created"] = payload.created
        return ChatResponseMetadata(payload.id or "", payload.model or "", usage, None, extra)

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Chunks as they arrive: text deltas, tool-call fragments, a finish reason, usage.

        The last chunk carries the usage (no generations) when the server sends it.
        """
        request, emulation = self._request(prompt, stream=True)
        try:
            client = await self._client()
            sdk_stream = await client.chat.completions.create(**request)
        except Exception as exc:
            self._raise(exc)
        state = _StreamState(self._secrets())
        try:
            chunks = sdk_stream.__aiter__()
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    self._raise(exc, streaming=True)
                response = self._chunk_response(chunk, emulation, state)
                if response is not None:
                    yield response
        finally:
            await sdk_stream.close()
        if not state.finished:
            raise MalformedResponseError(
                "the stream ended before the model finished (no finish reason was sent)",
                provider=self.provider,
            )

    @staticmethod
    def _redacted(
        state: _StreamState,
        choice: int,
        text: str,
        calls: tuple[ToolCall, ...],
        finish: str | None,
    ) -> tuple[str, tuple[ToolCall, ...]]:
        """A choice's chunk with known secrets held back or redacted: its text, and each tool
        call's argument fragments (one filter per streamed call); at the choice's finish, what
        was held back goes out redacted — a call's as one more fragment of that call."""
        filters = state.filters
        stream = filters.get((choice, None))
        if stream is None:
            stream = filters[(choice, None)] = state.secrets.stream()
        text = stream.feed(text)
        redacted = []
        for call in calls:
            if call.index is None:  # a whole call (tool emulation decodes them at the end)
                redacted.append(replace(call, arguments=state.secrets.text(call.arguments)))
                continue
            arguments = filters.get((choice, call.index))
            if arguments is None:
                arguments = filters[(choice, call.index)] = state.secrets.stream()
            redacted.append(replace(call, arguments=arguments.feed(call.arguments)))
        if finish is not None:
            text += stream.flush()
            for (owner, index), held in filters.items():
                rest = held.flush() if owner == choice and index is not None else ""
                if rest:
                    redacted.append(ToolCall("", "", rest, index=index))
        return text, tuple(redacted)

    def _chunk_response(
        self, chunk: Any, emulation: ToolCallEmulation | None, state: _StreamState
    ) -> ChatResponse | None:
        choices = chunk.choices or []
        size = max((c.index or 0 for c in choices), default=-1) + 1
        # Generations are positioned by choice index so the accumulator merges them right.
        generations = [Generation(AssistantMessage(""))] * size
        meaningful = False
        for choice in choices:
            delta = choice.delta
            text = (delta.content or "") if delta is not None else ""
            calls = tuple(
                ToolCall(
                    tc.id or "",
                    (tc.function.name if tc.function else None) or "",
                    (tc.function.arguments if tc.function else None) or "",
                    index=tc.index,
                )
                for tc in (delta.tool_calls if delta is not None else None) or ()
            )
            finish = _finish_reason(choice.finish_reason)
            if emulation is not None:
                output = state.decoders.get(choice.index or 0)
                if output is None:
                    output = state.decoders[choice.index or 0] = emulation.output()
                text = output.feed(text)
                if finish is not None:
                    rest, calls, finish = output.finish(finish)
                    text += rest
            text, calls = self._redacted(state, choice.index or 0, text, calls, finish)
            reasoning = state.secrets.text(_reasoning(delta))
            if finish is not None:
                state.finished = True
            if text or calls or finish or reasoning:
                meaningful = True
                generations[choice.index or 0] = Generation(
                    AssistantMessage(text, tool_calls=calls, reasoning=reasoning),
                    ChatGenerationMetadata(finish),
                )
        usage = usage_from_openai(getattr(chunk, "usage", None))
        if not meaningful and usage is None:
            return None
        return ChatResponse(
            tuple(generations) if meaningful else (), self._response_metadata(chunk, usage)
        )
