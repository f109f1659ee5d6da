"""Test helpers shipped with the product: a recording advisor for asserting the onion order.

``ScriptedChatModel`` (``advisors_app.core.providers.scripted``) is the matching fake model.
"""

from __future__ import annotations

from typing import Any

from .advisor import BaseAdvisor
from .requests import ChatClientRequest, ChatClientResponse

__all__ = ["RecordingAdvisor"]


class RecordingAdvisor(BaseAdvisor):
    """Appends ``"<name>:before"`` and ``"<name>:after"`` to ``log`` and changes nothing.

    Several advisors sharing one ``log`` list record the onion order in one place::

        log = []
        advisors = [RecordingAdvisor("a", 1, log), RecordingAdvisor("b", 2, log)]
        ...
        assert log == ["a:before", "b:before", "b:after", "a:after"]
    """

    def __init__(self, name: str, order: int = 0, log: list[str] | None = None) -> None:
        self._name = name
        self._order = order
        self.log: list[str] = [] if log is None else log

    @property
    def name(self) -> str:
        return self._name

    @property
    def order(self) -> int:
        return self._order

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        self.log.append(f"{self._name}:before")
        return request

    def after(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        self.log.append(f"{self._name}:after")
        return response
