"""The LangChain 1.x side of ``chain_overhead.py``: the same logical chain as ``create_agent``.

Kept apart so the benchmark reads as ours-then-peer; LangChain comes from
``requirements-bench.txt`` and :func:`langchain_side` returns ``None`` without it.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any


def langchain_side(
    *,
    window: int,
    words: list[str],
    schema: dict[str, Any],
    retry_prefix: str,
    weather: Callable[[str], str],
) -> dict[str, Any] | None:
    """The LangChain pieces, or ``None`` when LangChain is not installed.

    ``window`` messages of memory, the guard's ``words``, the answer's JSON ``schema``, the
    validation retry's ``retry_prefix`` and the ``weather`` tool: the same as our chain's.
    Returns ``model(answer)`` (the fake model, scripted with a tool call then ``answer``),
    ``agent(answer, checkpointer=True)``, ``HumanMessage`` and ``versions``.
    """
    try:
        from langchain.agents import create_agent
        from langchain.agents.middleware import AgentMiddleware, hook_config
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import (
            AIMessage,
            AIMessageChunk,
            HumanMessage,
            RemoveMessage,
        )
        from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
        from langchain_core.tools import tool as lc_tool
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph.message import REMOVE_ALL_MESSAGES
    except ImportError:
        return None
    import logging

    from jsonschema import Draft202012Validator

    log = logging.getLogger("benchmarks.langchain")
    validator = Draft202012Validator(schema)

    class FakeToolModel(GenericFakeChatModel):
        """``GenericFakeChatModel`` that accepts tools, streams tool calls, and is async-native.

        Script items: an ``AIMessage`` (a tool call) or a list of text chunks (the answer).
        """

        def bind_tools(self, tools, **kwargs):
            return self

        def _message(self) -> Any:
            # A new message every time, as a real model sends: the agent's state assigns ids to
            # messages, and a message seen twice would replace itself instead of appending.
            item = next(self.messages)
            if isinstance(item, AIMessage):
                return AIMessage(content=item.content, tool_calls=item.tool_calls)
            return AIMessage(content="".join(item))

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            return ChatResult(generations=[ChatGeneration(message=self._message())])

        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            return ChatResult(generations=[ChatGeneration(message=self._message())])

        async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
            item = next(self.messages)
            if isinstance(item, AIMessage):
                calls = [
                    {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                    for i, c in enumerate(item.tool_calls)
                ]
                message = AIMessageChunk(content="", tool_call_chunks=calls, chunk_position="last")
                yield ChatGenerationChunk(message=message)
                return
            for i, text in enumerate(item):
                last = "last" if i == len(item) - 1 else None
                chunk = ChatGenerationChunk(
                    message=AIMessageChunk(content=text, chunk_position=last)
                )
                if run_manager:
                    await run_manager.on_llm_new_token(text, chunk=chunk)
                yield chunk

    class Logging(AgentMiddleware):
        async def awrap_model_call(self, request, handler):
            if log.isEnabledFor(logging.DEBUG):
                log.debug("request: %r", request)
            response = await handler(request)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("response: %r", response)
            return response

    class Guard(AgentMiddleware):
        @hook_config(can_jump_to=["end"])
        async def abefore_agent(self, state, runtime):
            last = next(
                (m for m in reversed(state["messages"]) if isinstance(m, HumanMessage)), None
            )
            text = (last.text if last is not None else "").lower()
            if any(word in text for word in words):
                return {"messages": [AIMessage("I'm unable to respond to that.")], "jump_to": "end"}
            return None

    class Trim(AgentMiddleware):
        async def abefore_model(self, state, runtime):
            messages = state["messages"]
            if len(messages) <= window:
                return None
            tail = messages[-window:]
            start = next((i for i, m in enumerate(tail) if isinstance(m, HumanMessage)), 0)
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *tail[start:]]}

    class PassThroughMiddleware(AgentMiddleware):
        async def awrap_model_call(self, request, handler):
            return await handler(request)

    class Validation(AgentMiddleware):
        @hook_config(can_jump_to=["model"])
        async def aafter_model(self, state, runtime):
            last = state["messages"][-1]
            if getattr(last, "tool_calls", None):
                return None
            try:
                errors = list(validator.iter_errors(json.loads(last.text)))
                error = "; ".join(f"{e.json_path}: {e.message}" for e in errors)
            except json.JSONDecodeError as exc:
                error = f"Invalid JSON: {exc}"
            if not error:
                return None
            retries = 0  # retry requests since the user's own message
            for m in reversed(state["messages"]):
                if isinstance(m, HumanMessage):
                    if not m.text.startswith(retry_prefix):
                        break
                    retries += 1
            if retries >= 3:
                return None
            return {"messages": [HumanMessage(retry_prefix + error)], "jump_to": "model"}

    weather_tool = lc_tool(weather)

    def tool_message() -> Any:
        return AIMessage(
            content="", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}]
        )

    def model(answer: Any) -> Any:
        return FakeToolModel(messages=itertools.cycle([tool_message(), answer]))

    def agent(answer: Any, *, checkpointer: bool = True) -> Any:
        return create_agent(
            model(answer),
            [weather_tool],
            middleware=[Guard(), Trim(), Logging(), PassThroughMiddleware(), Validation()],
            checkpointer=InMemorySaver() if checkpointer else None,
        )

    from importlib.metadata import version

    return {
        "model": model,
        "agent": agent,
        "HumanMessage": HumanMessage,
        "versions": {name: version(name) for name in ("langchain", "langchain-core", "langgraph")},
    }
