"""Context keys the engine itself reads (Spring AI ``ChatClientAttributes`` / ``AdvisorParams``),
and the message-metadata key under which a stored reply keeps the turn's trace id."""

from __future__ import annotations

__all__ = [
    "CHAT_MODEL_OVERRIDE",
    "CONVERSATION_ID",
    "OUTPUT_FORMAT",
    "OWNER",
    "PRINCIPAL",
    "STRUCTURED_OUTPUT_NATIVE",
    "STRUCTURED_OUTPUT_SCHEMA",
    "TOOL_APPROVAL_GRANTS",
    "TOOL_CALLING_AUTO_REGISTER",
    "TOOL_CALL_DECISIONS",
    "TRACE_ID",
    "TRACE_ID_METADATA",
    "TURN_MEMORY",
]

#: The conversation a memory advisor reads and writes (Spring AI ``ChatMemory.CONVERSATION_ID``).
CONVERSATION_ID = "chat_memory_conversation_id"

#: Format instructions appended to the last user message by the model advisor.
OUTPUT_FORMAT = "chat_client.output_format"

#: JSON Schema of the expected output, used for native structured output.
STRUCTURED_OUTPUT_SCHEMA = "chat_client.structured_output_schema"

#: ``True`` asks the model advisor to send the schema as ``response_format`` instead of text.
STRUCTURED_OUTPUT_NATIVE = "chat_client.structured_output_native"

#: ``False`` stops ``ChatClient`` from adding a ``ToolCallingAdvisor`` to the chain.
TOOL_CALLING_AUTO_REGISTER = "advisors.tool_calling.auto_register"

#: A ``ChatModel`` the model advisors use instead of the client's (set by ``FallbackAdvisor``).
CHAT_MODEL_OVERRIDE = "chat_client.chat_model_override"

#: Who a request acts for (a user or tenant id, as a string): caches and stores scope data by it.
OWNER = "advisors.owner"

#: Who a request acts for, as the application's stores understand it (in advisors_app: the
#: Django user; :data:`OWNER` is its string form). A store that keeps data per principal reads
#: it through ``VectorStore.for_context`` — the request context is its only carrier. The tool
#: loop hands it (and :data:`CONVERSATION_ID`) to tools too, in their ``ToolContext``.
PRINCIPAL = "advisors.principal"

#: The id of the turn's trace (a call log's ``trace_id``), put in the context before the chain
#: runs: whoever stores the turn's reply (a memory advisor, or the caller) writes it into that
#: reply's metadata under :data:`TRACE_ID_METADATA`, so the stored reply names its turn.
TRACE_ID = "advisors.trace_id"

#: The message-metadata key of a stored reply's trace id (the context's :data:`TRACE_ID`).
TRACE_ID_METADATA = "trace_id"

#: Resume a paused turn: the decisions (``ToolCallDecision`` objects or their dicts
#: ``{"approval_id", "decision", "arguments"?, "reason"?}``), one per pending call of the
#: assistant message that ends the prompt's messages. The ``ToolCallingAdvisor`` runs that
#: message's calls as decided before it calls the model (Spring AI passes its decisions the same
#: way, with the request).
TOOL_CALL_DECISIONS = "advisors.tool_calling.decisions"

#: Tool names whose calls need no approval in this request (an "allow for this conversation"
#: grant): the ``ToolCallingAdvisor`` passes them to the manager's confirmation check.
TOOL_APPROVAL_GRANTS = "advisors.tool_calling.approval_grants"

#: The turn's :class:`~advisors_app.core.memory.turn.TurnMemory`, put in the context by a host
#: that reads a conversation before the chain runs and stores the turn itself (the Django app's
#: turn): the memory advisors read that conversation through it and hand it what they would store.
TURN_MEMORY = "advisors.memory.turn"
