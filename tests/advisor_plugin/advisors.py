"""Advisors of the test plugin: they change the prompt visibly, so order is observable."""

from __future__ import annotations

from typing import Any

from advisors_app.core import BaseAdvisor, ChatClientRequest


class AppendAdvisor(BaseAdvisor):
    """Appends ``text`` to the last user message; two of them show which ran first."""

    def __init__(self, text: str, order: int = 0) -> None:
        self._text = text
        self._order = order

    @property
    def order(self) -> int:
        return self._order

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        prompt = request.prompt.augment_user_message(lambda m: m.text + self._text)
        return request.mutate(prompt=prompt)
