"""``PiiMaskingAdvisor``: replaces personal data with placeholders before the model, restores after.

Recipe 5 of seed §6.15 ("PII 脱敏 advisor"), with the restore the recipe leaves out.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, ClassVar

from ..advisor import HIGHEST_PRECEDENCE, AdvisorRole, CallAdvisor, StreamAdvisor
from ..messages import AssistantMessage, Message, ToolCall, ToolResponse, ToolResponseMessage
from ..requests import ChatClientRequest, ChatClientResponse
from ..response import ChatResponse, Generation
from ..streams import closing_stream
from ._support import replace_texts

__all__ = ["DEFAULT_KINDS", "PII_MASKED", "PiiMaskingAdvisor"]

#: Context key: how many values of each kind were masked in the request, e.g. ``{"EMAIL": 2}``.
PII_MASKED = "pii_masked"
#: The kinds detected by default, in the order overlaps are settled.
DEFAULT_KINDS = ("EMAIL", "IBAN", "CREDIT_CARD", "CN_RIC", "IP_ADDRESS", "PHONE")

Span = tuple[int, int]
_EMAIL = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])"
)
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_CN_RIC = re.compile(r"(?<!\d)\d{17}[\dXx](?![\dXx])")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Fa-f:])")
_TOKEN = re.compile(r"<[A-Z][A-Z0-9_]*_[0-9a-f]{8}>")


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def _regex(pattern: re.Pattern[str], valid: Callable[[str], bool]) -> Callable[[str], list[Span]]:
    def detect(text: str) -> list[Span]:
        return [m.span() for m in pattern.finditer(text) if valid(m.group())]

    return detect


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _phones(regions: tuple[str, ...]) -> Callable[[str], list[Span]]:
    # Imported when an advisor is built: phonenumbers' metadata costs ~20 ms, which every
    # process that merely imports the class (the advisor-type registry) would pay otherwise.
    import phonenumbers

    def detect(text: str) -> list[Span]:
        return [
            (m.start, m.end)
            for region in regions
            for m in phonenumbers.PhoneNumberMatcher(text, region)
        ]

    return detect


def _detectors(regions: tuple[str, ...]) -> dict[str, Callable[[str], list[Span]]]:
    from stdnum import iban, luhn
    from stdnum.cn import ric

    ipv6 = _regex(_IPV6, lambda s: s.count(":") >= 2 and len(s) > 2 and _is_ip(s))
    ipv4 = _regex(_IPV4, _is_ip)
    return {
        "EMAIL": _regex(_EMAIL, lambda s: True),
        "IBAN": _regex(_IBAN, iban.is_valid),
        "CREDIT_CARD": _regex(_CARD, lambda s: len(_digits(s)) >= 13 and luhn.is_valid(_digits(s))),
        "CN_RIC": _regex(_CN_RIC, ric.is_valid),
        "IP_ADDRESS": lambda text: ipv4(text) + ipv6(text),
        "PHONE": _phones(regions),
    }


class PiiMaskingAdvisor(CallAdvisor, StreamAdvisor):
    """Masks emails, phone numbers, card numbers, IBANs, IPs and Chinese ID numbers.

    Before the rest of the chain, every detected value in the prompt's messages (text, tool-call
    arguments, tool results) becomes a placeholder ``<KIND_xxxxxxxx>``: ``KIND`` from
    :data:`DEFAULT_KINDS` or ``patterns`` (name → regex, checked first), ``xxxxxxxx`` an HMAC of
    the value under ``secret``, so one value keeps one placeholder across turns and two values
    never share one. The answer's placeholders of this request are replaced by the original
    values (text and tool-call arguments); placeholders the request did not contain are left
    as they are. The originals live only in local variables: nothing raw goes into the
    context (:data:`PII_MASKED` holds counts per kind), a trace or a log. Phones are found
    with Google's ``phonenumbers`` for ``phone_regions`` (numbers with a ``+`` country code in
    any region); cards must pass the Luhn check, IBANs and ID numbers their check digits
    (``python-stdnum``), IPs must parse. ``restore=False`` keeps placeholders in the answer.

    Streams: text is restored as it arrives; only a possible placeholder at the end of the text
    received so far (from its ``<``, at most one placeholder long) is held back, so a
    placeholder split across chunks is restored whole. Tool-call arguments are restored per
    streamed fragment only (a placeholder split across fragments stays masked).

    Ordering: the default ``HIGHEST_PRECEDENCE + 150`` puts it outside the memory advisors
    (``+ 200``), so memory stores the masked turn and never raw PII (history then holds
    placeholders, which stay masked in later answers unless the value recurs). It is also
    outside the tool loop (``+ 300``): tools receive placeholders; order it inside the loop
    (> ``+ 300``) for tools to get real values, at the price of memory then seeing them.
    ``secret`` (bytes) makes placeholders stable across processes (derive it from the Django
    ``SECRET_KEY``); the default is random per advisor instance.

    Divergences from the seed's recipe: it masks only Chinese mobile numbers, in
    ``getContents()`` pasted over the user message (losing the other messages' structure),
    keeps the originals in the context, and never restores; and its comment that H+150 masks
    memory's history is wrong (outer advisors run before memory adds history).
    """

    __slots__ = ("_detectors", "_kinds", "_order", "_restore", "_secret", "_token_length")

    DEFAULT_ORDER: ClassVar[int] = HIGHEST_PRECEDENCE + 150
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset({AdvisorRole.REWRITE})

    def __init__(
        self,
        kinds: Iterable[str] = DEFAULT_KINDS,
        *,
        patterns: Mapping[str, str | re.Pattern[str]] | None = None,
        phone_regions: Iterable[str] = ("US", "CN"),
        secret: bytes | None = None,
        restore: bool = True,
        order: int = DEFAULT_ORDER,
    ) -> None:
        known = _detectors(tuple(phone_regions))
        detectors: dict[str, Callable[[str], list[Span]]] = {}
        for name, pattern in (patterns or {}).items():
            if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
                raise ValueError(f"pattern names must be upper-case identifiers, got {name!r}")
            detectors[name] = _regex(re.compile(pattern), lambda s: True)
        for kind in kinds:
            if kind not in known:
                raise ValueError(f"unknown PII kind {kind!r}; known: {', '.join(known)}")
            detectors[kind] = known[kind]
        self._detectors = detectors
        self._kinds = tuple(detectors)
        self._token_length = max((len(k) for k in detectors), default=0) + 11
        self._secret = secret if secret is not None else secrets.token_bytes(32)
        self._restore = restore
        self._order = order

    def _token(self, kind: str, value: str) -> str:
        digest = hmac.new(self._secret, f"{kind}\x00{value}".encode(), hashlib.sha256)
        return f"<{kind}_{digest.hexdigest()[:8]}>"

    def mask(self, text: str, vault: dict[str, str], counts: dict[str, int]) -> str:
        """``text`` with its PII replaced; records token → value in ``vault`` and counts."""
        if not text:
            return text
        taken: list[tuple[int, int, str]] = []
        for kind, detect in self._detectors.items():
            for start, end in sorted(detect(text)):
                if all(end <= s or start >= e for s, e, _ in taken):
                    taken.append((start, end, kind))
        if not taken:
            return text
        parts: list[str] = []
        cursor = 0
        for start, end, kind in sorted(taken):
            value = text[start:end]
            token = self._token(kind, value)
            vault[token] = value
            counts[kind] = counts.get(kind, 0) + 1
            parts += [text[cursor:start], token]
            cursor = end
        parts.append(text[cursor:])
        return "".join(parts)

    def _mask_message(self, message: Message, vault: dict[str, str], counts: dict[str, int]) -> Any:
        if isinstance(message, ToolResponseMessage):
            responses = tuple(
                ToolResponse(r.id, r.name, self.mask(r.response_data, vault, counts))
                for r in message.responses
            )
            return message.mutate(responses=responses)
        masked = message.mutate(text=self.mask(message.text, vault, counts))
        if isinstance(message, AssistantMessage) and message.tool_calls:
            calls = tuple(
                _with_arguments(c, self.mask(c.arguments, vault, counts))
                for c in message.tool_calls
            )
            masked = masked.mutate(tool_calls=calls)
        return masked

    def _mask_request(self, request: ChatClientRequest) -> tuple[ChatClientRequest, dict[str, str]]:
        vault: dict[str, str] = {}
        counts: dict[str, int] = {}
        messages = [self._mask_message(m, vault, counts) for m in request.prompt.instructions]
        if not vault:
            return request, vault
        return (
            request.mutate(
                prompt=request.prompt.mutate(messages=messages), context={PII_MASKED: counts}
            ),
            vault,
        )

    def _restore_response(self, response: ChatResponse, vault: Mapping[str, str]) -> ChatResponse:
        generations = []
        for generation in response.generations:
            output = generation.output
            restored = output.mutate(text=_unmask(output.text, vault))
            if output.tool_calls:
                restored = restored.mutate(
                    tool_calls=tuple(
                        _with_arguments(c, _unmask(c.arguments, vault)) for c in output.tool_calls
                    )
                )
            generations.append(Generation(restored, generation.metadata))
        return response.mutate(generations=tuple(generations))

    async def advise_call(self, request: ChatClientRequest, chain: Any) -> ChatClientResponse:
        masked, vault = self._mask_request(request)
        response: ChatClientResponse = await chain.next_call(masked)
        if not (vault and self._restore) or response.chat_response is None:
            return response
        return response.mutate(chat_response=self._restore_response(response.chat_response, vault))

    async def advise_stream(
        self, request: ChatClientRequest, chain: Any
    ) -> AsyncIterator[ChatClientResponse]:
        masked, vault = self._mask_request(request)
        stream = chain.next_stream(masked)
        if not (vault and self._restore):
            async with closing_stream(stream) as chunks:
                async for chunk in chunks:
                    yield chunk
            return
        pending: dict[int, str] = {}
        context: Any = masked.context
        async with closing_stream(stream) as chunks:
            async for chunk in chunks:
                context = chunk.context
                response = chunk.chat_response
                if response is None or not response.generations:
                    yield chunk
                    continue
                texts: dict[int, str] = {}
                for index, generation in enumerate(response.generations):
                    buffered = pending.get(index, "") + generation.text
                    ready, pending[index] = self._split(buffered, bool(generation.finish_reason))
                    texts[index] = _unmask(ready, vault)
                restored = self._restore_response(replace_texts(response, texts), vault)
                yield ChatClientResponse(restored, chunk.context)
        rest = {i: _unmask(text, vault) for i, text in pending.items() if text}
        if rest:
            yield ChatClientResponse(replace_texts(ChatResponse(), rest), context)

    def _split(self, text: str, final: bool) -> tuple[str, str]:
        # Hold back from the last "<" when what follows could still grow into a placeholder.
        start = text.rfind("<")
        if final or start < 0 or ">" in text[start:] or len(text) - start >= self._token_length:
            return text, ""
        return text[:start], text[start:]


def _with_arguments(call: ToolCall, arguments: str) -> ToolCall:
    return ToolCall(call.id, call.name, arguments, call.type, call.index)


def _unmask(text: str, vault: Mapping[str, str]) -> str:
    if "<" not in text:
        return text
    return _TOKEN.sub(lambda m: vault.get(m.group(), m.group()), text)
