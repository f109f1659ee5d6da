"""Small helpers for the advisor tests: run a client in call and stream mode."""

from __future__ import annotations

from typing import Any

from advisors_app.core import ChatClient, ChatClientResponse, ChatClientResponseAccumulator


async def call(client: ChatClient, text: str | None = None, **params: Any) -> ChatClientResponse:
    spec = client.prompt(text)
    if params:
        spec.advisor_params(params)
    return await spec.call().achat_client_response()


async def stream(
    client: ChatClient, text: str | None = None, **params: Any
) -> list[ChatClientResponse]:
    spec = client.prompt(text)
    if params:
        spec.advisor_params(params)
    return [chunk async for chunk in spec.stream().chat_client_responses()]


def aggregate(chunks: list[ChatClientResponse]) -> ChatClientResponse:
    accumulator = ChatClientResponseAccumulator()
    for chunk in chunks:
        accumulator.add(chunk)
    return accumulator.result()


def texts(chunks: list[ChatClientResponse]) -> list[str]:
    return [c.chat_response.text for c in chunks if c.chat_response and c.chat_response.generations]


async def run(
    mode: str, client: ChatClient, text: str | None = None, **params: Any
) -> ChatClientResponse:
    """The response of one call, or the aggregate of one stream."""
    if mode == "call":
        return await call(client, text, **params)
    return aggregate(await stream(client, text, **params))
