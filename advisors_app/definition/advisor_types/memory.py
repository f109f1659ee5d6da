"""Built-in chat-memory types: conversation history as messages or in the system text, and
session memory (Spring AI 2.1) with compaction.

``session_memory`` is **one** row that installs both session advisors (the simplest for the
admin, and they only work as a pair): its order is the ``SessionTurnAdvisor``'s, outside the
tool loop (default ``HIGHEST_PRECEDENCE + 200``), and ``memory_order`` places its
``SessionMemoryAdvisor`` inside the loop (default ``HIGHEST_PRECEDENCE + 301``). The chain lint
checks both places (``advisors_app.E116``) and refuses it next to a 2.0 memory type
(``advisors_app.E117``). The 2.0 types (``message_chat_memory``, ``prompt_chat_memory``) are the
compatibility layer.
"""

from __future__ import annotations

from typing import Any

from advisors_app.core.advisor import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE
from advisors_app.core.advisors.message_chat_memory import MessageChatMemoryAdvisor
from advisors_app.core.advisors.prompt_chat_memory import PromptChatMemoryAdvisor
from advisors_app.core.advisors.session_memory import SessionMemoryAdvisor
from advisors_app.core.advisors.session_turn import SessionTurnAdvisor, session_advisors
from advisors_app.definition.registry import AdvisorSpec, AdvisorType
from advisors_app.memory.compaction import build_policy, enqueue_compaction, policy_json
from advisors_app.orders import parse_order
from advisors_app.stores.sessions import DjangoSessionRepository
from advisors_app.validation import ADVISOR_ORDER_FORMAT

from ._schema import BuiltinTypes, object_schema

__all__ = ["TYPES"]


def _message_chat_memory(spec: AdvisorSpec) -> Any:
    memory = spec.chat_memory(max_messages=spec.params["max_messages"])
    return MessageChatMemoryAdvisor(memory, order=spec.order)


def _prompt_chat_memory(spec: AdvisorSpec) -> Any:
    memory = spec.chat_memory(max_messages=spec.params["max_messages"])
    slug = spec.params.get("system_prompt_template")
    template = spec.template(slug) if slug else None
    return PromptChatMemoryAdvisor(memory, system_prompt_template=template, order=spec.order)


def _session_memory(spec: AdvisorSpec) -> Any:
    params = spec.params
    services = spec.services
    chain_model = getattr(services, "chain_chat_model", None)
    context_window = getattr(services.chat_model(chain_model), "context_window", None)
    summary_model = prompt = slug = None
    if params["strategy"] == "summarize":
        slug = params.get("summary_model") or chain_model
        summary_model = services.chat_model_config(slug)  # type: ignore[attr-defined]
        template = params.get("summary_prompt_template")
        prompt = spec.template(template) if template else None
    policy = policy_json(
        params,
        summary_model=summary_model,
        summary_prompt=prompt,
        context_window=context_window if isinstance(context_window, int) else None,
        summary_model_slug=slug,
    )
    turn, _ = session_advisors(
        DjangoSessionRepository(policy, enqueue=enqueue_compaction),
        build_policy(policy),
        turn_order=spec.order,
        memory_order=parse_order(params["memory_order"]),
        summary_placement=params["summary_placement"],
        context_window=policy["context_window"],
        prompt_headroom=params["prompt_headroom"],
    )
    return turn


_SHARE_IS_FOR_TOKENS = (
    'Only a "tokens" trigger takes a share; "turns" and "messages" count to threshold.'
)
_THRESHOLD_OR_SHARE = "Give a tokens trigger a threshold or a share, not both."
_MODEL_IS_FOR_SUMMARIZE = (
    'Only the "summarize" strategy uses a summary model and prompt; "window" and "key_facts" '
    "call no model."
)


def _refused(message: str) -> dict[str, Any]:
    """A property schema no value matches, whose error is ``message`` (``x-error``)."""
    return {"not": {}, "x-error": message}


_SESSION_SCHEMA = object_schema(
    {
        "trigger": {
            "type": "object",
            "description": "When to compact, checked after each turn: more than threshold "
            'turns ("turns", default 20) or messages ("messages", default 40) in the view, or '
            'its tokens ("tokens") over threshold or over share of the chat model\'s context '
            "window (default 0.6; threshold or share, not both).",
            "properties": {
                "kind": {"enum": ["turns", "messages", "tokens"]},
                "threshold": {"type": "integer", "minimum": 1},
                "share": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            },
            "required": ["kind"],
            "additionalProperties": False,
            # A part the trigger would ignore is refused, not silently dropped.
            "allOf": [
                {
                    "if": {"properties": {"kind": {"const": "tokens"}}, "required": ["kind"]},
                    "then": {
                        "if": {"required": ["threshold"]},
                        "then": {"properties": {"share": _refused(_THRESHOLD_OR_SHARE)}},
                    },
                    "else": {"properties": {"share": _refused(_SHARE_IS_FOR_TOKENS)}},
                }
            ],
            "default": {"kind": "turns", "threshold": 20},
        },
        "strategy": {
            "enum": ["window", "summarize", "key_facts"],
            "default": "window",
            "description": "window: older turns leave the prompt; summarize: a model's summary "
            "of them (and of the previous summary) replaces them; key_facts: the sentences in "
            "which the user stated something (not questions) replace them, picked by rules, "
            "no model: for small local models.",
        },
        "keep_last_turns": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000,
            "default": 10,
            "description": "Turns kept verbatim after a compaction.",
        },
        "summary_model": {
            "type": "string",
            "x-reference": "chat_model",
            "description": "Chat model writing summaries (blank: the chain's).",
        },
        "summary_prompt_template": {
            "type": "string",
            "x-reference": "prompt_template",
            "x-required-placeholders": ["conversation"],
            "description": "Summary prompt with {conversation} and optionally {summary}.",
        },
        "summary_max_tokens": {
            "type": "integer",
            "minimum": 16,
            "maximum": 4096,
            "default": 256,
            "description": "Bound of the summary, in tokens: what the model may write "
            "(summarize), or the size of the facts list (key_facts: the facts the user asked "
            "to remember first, then the earliest).",
        },
        "summary_placement": {
            "enum": ["system", "user"],
            "default": "system",
            "description": "Where each prompt carries the summary: at the end of the system "
            "message, or in front of the user's message (small models such as SmolLM2-135M "
            "use a fact there and ignore it in the system message).",
        },
        "memory_order": {
            # As the order column takes it: "HIGHEST+301" reads better than -2147483347.
            "type": ["integer", "string"],
            "format": ADVISOR_ORDER_FORMAT,
            "minimum": HIGHEST_PRECEDENCE,
            "maximum": LOWEST_PRECEDENCE,
            "default": SessionMemoryAdvisor.DEFAULT_ORDER,
            "description": "Order of the inner SessionMemoryAdvisor (inside the tool loop): "
            'an integer, "HIGHEST+N" or "LOWEST-N".',
        },
        "prompt_headroom": {
            "type": "number",
            "minimum": 0,
            "exclusiveMaximum": 1,
            "default": 0.25,
            "description": "Share of the context window kept for what inner advisors add "
            "(retrieved excerpts, tools); a turn whose prompt would not fit in the rest is "
            "compacted first, inline.",
        },
    }
)


# A summary model or prompt the strategy would not use is refused, not silently dropped.
_SESSION_SCHEMA["allOf"] = [
    {
        "if": {"properties": {"strategy": {"const": "summarize"}}, "required": ["strategy"]},
        "else": {
            "properties": {
                "summary_model": _refused(_MODEL_IS_FOR_SUMMARIZE),
                "summary_prompt_template": _refused(_MODEL_IS_FOR_SUMMARIZE),
            }
        },
    }
]


_MAX_MESSAGES = {
    "type": "integer",
    "minimum": 1,
    "maximum": 1000,
    "default": 20,
    "description": "Newest messages sent as history (whole turns).",
}


TYPES: BuiltinTypes = (
    (
        "session_memory",
        lambda: AdvisorType(
            key="session_memory",
            label="Session memory (compaction)",
            factory=_session_memory,
            advisor_class=SessionTurnAdvisor,
            description="Keeps the conversation as an append-only log and sends its view: the "
            "newest summary and the turns after it; compacts by turns, messages or tokens, "
            "with a window, a model's summary or the facts the user stated "
            "(SessionTurnAdvisor + SessionMemoryAdvisor).",
            params_schema=_SESSION_SCHEMA,
        ),
    ),
    (
        "message_chat_memory",
        lambda: AdvisorType(
            key="message_chat_memory",
            label="Chat memory (messages)",
            factory=_message_chat_memory,
            advisor_class=MessageChatMemoryAdvisor,
            description="Adds the conversation's history to the prompt as messages and "
            "stores each turn (MessageChatMemoryAdvisor).",
            params_schema=object_schema({"max_messages": _MAX_MESSAGES}),
        ),
    ),
    (
        "prompt_chat_memory",
        lambda: AdvisorType(
            key="prompt_chat_memory",
            label="Chat memory (in the system text)",
            factory=_prompt_chat_memory,
            advisor_class=PromptChatMemoryAdvisor,
            description="Renders the conversation's history into the system text and stores "
            "each turn (PromptChatMemoryAdvisor).",
            params_schema=object_schema(
                {
                    "max_messages": _MAX_MESSAGES,
                    "system_prompt_template": {
                        "type": "string",
                        "x-reference": "prompt_template",
                        "x-required-placeholders": ["instructions", "memory"],
                    },
                }
            ),
        ),
    ),
)
