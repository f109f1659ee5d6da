"""``StructuredOutputValidationAdvisor``: validates JSON output against a schema and retries.

Spring AI ``StructuredOutputValidationAdvisor`` (seed §6.6, reference §3.10).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

import jsonschema
from jsonschema import Draft202012Validator

from ..advisor import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE, CallAdvisor, StreamAdvisor
from ..aggregation import ChatClientResponseAccumulator
from ..exceptions import OutputValidationError
from ..requests import ChatClientRequest, ChatClientResponse
from ..streams import closing_stream
from ..structured import json_schema_for, parse_json_output
from ..usage import UsageAccumulator
from ._support import metadata_chunk

__all__ = [
    "STRUCTURED_OUTPUT_ATTEMPTS",
    "STRUCTURED_OUTPUT_ERROR",
    "STRUCTURED_OUTPUT_VALID",
    "StructuredOutputValidationAdvisor",
]

logger = logging.getLogger(__name__)

#: Context and metadata key: ``True`` when the returned output is valid, ``False`` when
#: every attempt failed.
STRUCTURED_OUTPUT_VALID = "structured_output_valid"
#: Context and metadata key: how many model answers were validated for this response.
STRUCTURED_OUTPUT_ATTEMPTS = "structured_output_attempts"
#: Context and metadata key: the last validation error (only when the output is invalid).
STRUCTURED_OUTPUT_ERROR = "structured_output_error"

_RETRY_PREFIX = "Output JSON validation failed because of: "


class StructuredOutputValidationAdvisor(CallAdvisor, StreamAdvisor):
    """Checks the answer against a JSON Schema (draft 2020-12); on failure asks again.

    Exactly one of ``output_type`` (a type :func:`~advisors_app.core.structured.json_schema_for`
    understands) and ``output_json_schema`` (a dict or JSON text) must be given, else
    ``ValueError`` with Spring's messages ("Only outputType or outputJsonSchema can be set, not
    both." / "Either outputType or outputJsonSchema must be set." / "Failed to parse JSON
    schema"). ``max_repeat_attempts`` (≥ 0, default 3) retries follow the first answer; ``order``
    must lie strictly between the precedence bounds. Name "Structured Output Validation Advisor".

    Each failed answer is followed by a retry whose last user message is the **original** user
    text + ``"\\n"`` + ``"Output JSON validation failed because of: <error>"`` (only the latest
    error). Errors: "Missing required json output for validation.", "Empty JSON output for
    validation.", "Invalid JSON: <parser message>", or the schema violations as
    ``"$.path: message"`` joined with ``"; "``. The usage of every attempt is summed on the
    returned response. The result carries :data:`STRUCTURED_OUTPUT_VALID`,
    :data:`STRUCTURED_OUTPUT_ATTEMPTS` and, when invalid, :data:`STRUCTURED_OUTPUT_ERROR` in its
    context and metadata; with ``raise_on_failure=True`` running out of attempts raises
    :class:`~advisors_app.core.exceptions.OutputValidationError` instead.

    Streams (Spring AI has none: it fails with UnsupportedOperationException): each attempt is
    aggregated and validated; the client receives only the chunks of the attempt that is
    returned (the valid one, or the last one), after it was validated, so a consumer never
    has to discard text. The price is that text appears when the attempt is complete, not
    token by token. When several attempts ran, the usage is removed from the emitted chunks
    and one trailing chunk carries the summed usage and the flags.

    Divergences, each a fix: a response with tool calls is returned at once, unvalidated and
    without using an attempt, so the tool loop can run the tools (Spring re-sends the same
    request up to ``max_repeat_attempts`` times and may never run the tool, defect 5.4.24);
    running out of attempts is flagged or raises (Spring returns the invalid answer silently,
    defect 5.4.25); a Markdown code fence around the JSON is accepted, as
    ``ChatClient.entity()`` accepts it.
    """

    __slots__ = ("_max_repeat_attempts", "_order", "_raise_on_failure", "_schema", "_validator")

    DEFAULT_ORDER: ClassVar[int] = LOWEST_PRECEDENCE - 2000

    def __init__(
        self,
        output_type: Any = None,
        output_json_schema: str | Mapping[str, Any] | None = None,
        max_repeat_attempts: int = 3,
        order: int = DEFAULT_ORDER,
        *,
        raise_on_failure: bool = False,
    ) -> None:
        if output_type is not None and output_json_schema is not None:
            raise ValueError("Only outputType or outputJsonSchema can be set, not both.")
        if output_type is None and output_json_schema is None:
            raise ValueError("Either outputType or outputJsonSchema must be set.")
        if not HIGHEST_PRECEDENCE < order < LOWEST_PRECEDENCE:
            raise ValueError(
                "advisorOrder must be between HIGHEST_PRECEDENCE and LOWEST_PRECEDENCE"
            )
        if max_repeat_attempts < 0:
            raise ValueError("repeatAttempts must be greater than or equal to 0")
        target = output_json_schema if output_json_schema is not None else output_type
        schema = json_schema_for(target)
        try:
            Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"Failed to parse JSON schema: {exc.message}") from exc
        self._schema = schema
        self._validator = Draft202012Validator(schema)
        self._max_repeat_attempts = max_repeat_attempts
        self._order = order
        self._raise_on_failure = raise_on_failure

    @property
    def name(self) -> str:
        return "Structured Output Validation Advisor"

    @property
    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema answers are validated against."""
        return dict(self._schema)

    def validate(self, text: str | None) -> str | None:
        """The validation error for ``text``, or ``None`` when it is valid JSON for the schema."""
        if text is None:
            return "Missing required json output for validation."
        if not text.strip():
            return "Empty JSON output for validation."
        try:
            data = parse_json_output(text)
        except json.JSONDecodeError as exc:
            return f"Invalid JSON: {exc}"
        errors = sorted(self._validator.iter_errors(data), key=lambda e: e.json_path)
        if not errors:
            return None
        return "; ".join(f"{e.json_path}: {e.message}" for e in errors)

    def _error_of(self, response: ChatClientResponse) -> str | None:
        chat_response = response.chat_response
        if chat_response is None or chat_response.result is None:
            return self.validate(None)
        return self.validate(chat_response.result.output.text)

    def _retry(self, request: ChatClientRequest, original: str, error: str) -> ChatClientRequest:
        logger.warning("JSON validation failed: %s", error)
        text = original + "\n" + _RETRY_PREFIX + error
        return request.mutate(prompt=request.prompt.augment_user_message(text))

    def _flags(self, attempts: int, error: str | None) -> dict[str, Any]:
        flags: dict[str, Any] = {
            STRUCTURED_OUTPUT_VALID: error is None,
            STRUCTURED_OUTPUT_ATTEMPTS: attempts,
        }
        if error is not None:
            flags[STRUCTURED_OUTPUT_ERROR] = error
        return flags

    def _exhausted(self, attempts: int, error: str, output: str | None) -> None:
        if self._raise_on_failure:
            raise OutputValidationError(
                f"Output JSON validation failed after {attempts} attempt(s): {error}",
                output=output,
                attempts=attempts,
            )

    async def advise_call(self, request: ChatClientRequest, chain: Any) -> ChatClientResponse:
        if request is None:
            raise ValueError("chatClientRequest must not be null")
        original = request.prompt.user_message.text
        usage = UsageAccumulator()
        processed = request
        attempts = 0
        while True:
            response: ChatClientResponse = await chain.next_call(processed)
            usage.add_round_response(response)
            if response.chat_response is not None and response.chat_response.has_tool_calls():
                return usage.apply_accumulated_usage(response)
            attempts += 1
            error = self._error_of(response)
            if error is None or attempts > self._max_repeat_attempts:
                break
            processed = self._retry(request, original, error)
        if error is not None:
            self._exhausted(attempts, error, _text(response))
        flags = self._flags(attempts, error)
        response = usage.apply_accumulated_usage(response)
        chat_response = response.chat_response
        return response.mutate(
            chat_response=chat_response.with_metadata(**flags) if chat_response else None,
            context=flags,
        )

    async def advise_stream(
        self, request: ChatClientRequest, chain: Any
    ) -> AsyncIterator[ChatClientResponse]:
        original = request.prompt.user_message.text
        usage = UsageAccumulator()
        processed = request
        attempts = rounds = 0
        while True:
            chunks: list[ChatClientResponse] = []
            accumulator = ChatClientResponseAccumulator()
            async with closing_stream(chain.next_stream(processed)) as stream:
                async for chunk in stream:
                    chunks.append(chunk)
                    accumulator.add(chunk)
            aggregated = accumulator.result()
            usage.add_round_response(aggregated)
            rounds += 1
            if aggregated.chat_response is not None and aggregated.chat_response.has_tool_calls():
                flags: dict[str, Any] | None = None
                break
            attempts += 1
            error = self._error_of(aggregated)
            if error is None or attempts > self._max_repeat_attempts:
                if error is not None:
                    self._exhausted(attempts, error, _text(aggregated))
                flags = self._flags(attempts, error)
                break
            processed = self._retry(request, original, error)
        if rounds == 1 and flags is None:
            for chunk in chunks:
                yield chunk
            return
        for chunk in chunks:
            yield _without_usage(chunk) if rounds > 1 else chunk
        total = usage.accumulated_usage if rounds > 1 else None
        yield metadata_chunk(aggregated.context, flags or {}, total)


def _text(response: ChatClientResponse) -> str | None:
    result = response.chat_response.result if response.chat_response is not None else None
    return result.output.text if result is not None else None


def _without_usage(chunk: ChatClientResponse) -> ChatClientResponse:
    chat_response = chunk.chat_response
    if chat_response is None or chat_response.metadata.usage is None:
        return chunk
    return chunk.mutate(chat_response=chat_response.with_usage(None))
