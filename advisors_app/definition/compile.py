"""Compile a chain snapshot into a core ``ChatClient``: every advisor built by its type's factory.

Reads only the snapshot (no query): factories resolve the slugs in their params through
:class:`BuildServices`, which answers from the snapshot's ``references``. Anything that cannot
be built — an unregistered type or tool, params the type refuses, a factory that raises, a
model configuration the provider registry refuses — is a :class:`ChainConfigurationError`
naming the advisor; :func:`advisors_app.definition.check` reports it as lint ``E113`` before
a version is published, so a user's turn never meets it first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from advisors_app.conf import app_settings
from advisors_app.core.advisor import Advisor
from advisors_app.core.advisors.base_chat_memory import BaseChatMemoryAdvisor
from advisors_app.core.advisors.guard import GuardAdvisor
from advisors_app.core.advisors.message_chat_memory import MessageChatMemoryAdvisor
from advisors_app.core.advisors.session_turn import SessionTurnAdvisor
from advisors_app.core.advisors.tool_calling import ToolCallingAdvisor
from advisors_app.core.attributes import TOOL_CALLING_AUTO_REGISTER
from advisors_app.core.client import ChatClient
from advisors_app.core.memory import DEFAULT_MAX_MESSAGES, ChatMemory, MessageWindowChatMemory
from advisors_app.core.model import ChatModel, EmbeddingModel
from advisors_app.core.prompt import ChatOptions, ToolCallingChatOptions
from advisors_app.core.providers.registry import (
    create_chat_model,
    create_embedding_model,
    default_embedding_model,
)
from advisors_app.core.templates import PromptTemplate as CorePromptTemplate
from advisors_app.core.tools import ToolCallingManager
from advisors_app.core.vectorstore import VectorStore
from advisors_app.costs.pricing import ModelRef
from advisors_app.definition.providers import chat_model_configs
from advisors_app.definition.registry import AdvisorType, advisor_types, reference_kinds
from advisors_app.definition.tools import tool_registry
from advisors_app.mcp import McpConfigurationError, mcp_tool_callbacks
from advisors_app.models import Collection
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.stores.scoped import UserScopedVectorStore
from advisors_app.stores.vectors import PgVectorStore
from advisors_app.validation import CHAT_OPTIONS_SCHEMA, REQUEST_OPTIONS, FieldErrors, schema_errors

from .lint import advisor_label
from .snapshot import snapshot_hash

__all__ = ["BuildServices", "ChainConfigurationError", "CompiledChain", "compile_snapshot"]


class ChainConfigurationError(RuntimeError):
    """Raised when a snapshot cannot be built: unknown type or tool, bad params, missing row."""


#: Stateless, so one repository serves every chain, request and thread.
_repository = DjangoChatMemoryRepository()


class BuildServices:
    """What factories resolve slugs through: one snapshot's references, no queries."""

    def __init__(
        self, snapshot: Mapping[str, Any], default_chat_model: Mapping[str, Any] | None = None
    ) -> None:
        self._references: Mapping[str, Any] = snapshot["references"]
        self._default_chat_model = default_chat_model
        self._published_default = snapshot.get("default_chat_model")
        self._chain_model: str | None = snapshot.get("chat_model")
        #: Every chat model built, by ``id()``: the configuration it came from (for pricing).
        self.model_refs: dict[int, ModelRef] = {}

    @property
    def chain_chat_model(self) -> str | None:
        """The slug of the chain's own chat model (``None``: the deployment's default)."""
        return self._chain_model

    def reference(self, kind: str, slug: str) -> Mapping[str, Any]:
        value = self._references.get(f"{kind}:{slug}")
        if value is None:
            label = getattr(reference_kinds.get(kind), "label", kind)
            raise ChainConfigurationError(f"no {label} with slug {slug!r}")
        return value  # type: ignore[no-any-return]

    def chat_model(self, slug: str | None) -> ChatModel:
        """The chat model ``slug`` names; ``None``: the deployment's default — the model-config
        row the snapshot kept for that alias, else the ``default_chat_model`` given, else
        ``ADVISORS["DEFAULT_CHAT_MODEL"]``'s settings."""
        config = self.chat_model_config(slug)
        try:
            model = create_chat_model(config)
        except ValueError as exc:
            raise ChainConfigurationError(f"chat model {slug or 'default'!r}: {exc}") from exc
        self.model_refs[id(model)] = ModelRef.of(slug or app_settings.DEFAULT_CHAT_MODEL, config)
        return model

    def chat_model_config(self, slug: str | None) -> Mapping[str, Any]:
        """The provider configuration :meth:`chat_model` builds from (JSON, no secret)."""
        if slug is None:
            alias = app_settings.DEFAULT_CHAT_MODEL
            # The row the version was published with, while the deployment's default is still
            # that alias; a deployment whose default is another alias runs on that one.
            config = (
                self._references.get(f"chat_model:{alias}")
                if alias == self._published_default
                else None
            )
            config = config or self._default_chat_model or chat_model_configs().get(alias)
            if config is None:
                raise ChainConfigurationError(f"no chat model alias {alias!r} in the settings")
        else:
            config = self.reference("chat_model", slug)
        return config  # type: ignore[no-any-return]

    def embedding_model(self, slug: str | None) -> EmbeddingModel:
        """The embedding model ``slug`` names; ``None``: the process-wide default (MiniLM)."""
        if slug is None:
            return default_embedding_model()
        try:
            return create_embedding_model(self.reference("embedding_model", slug), name=slug)
        except ValueError as exc:
            raise ChainConfigurationError(f"embedding model {slug!r}: {exc}") from exc

    def vector_store(self, collection: str, embedding_model: str | None = None) -> VectorStore:
        """The collection as each turn's user may see it (:class:`UserScopedVectorStore`).

        Raises ``EmbeddingDimensionError`` (a ``ValueError``) here, at build time, when the
        model's dimensions differ from the stored embeddings' (bug case B24).
        """
        self.reference("collection", collection)
        model = self.embedding_model(embedding_model)
        PgVectorStore(Collection(slug=collection), model)  # checks the dimensions, no query
        return UserScopedVectorStore(collection, model)

    def chat_memory(self, *, max_messages: int = DEFAULT_MAX_MESSAGES) -> ChatMemory:
        """A message-window memory over the conversations in the database."""
        return MessageWindowChatMemory(_repository, max_messages=max_messages)


@dataclass(frozen=True)
class CompiledChain:
    """A built chain: its client, advisors and what a request to it may carry.

    ``system_template`` is set when the system text has placeholders, filled per request from
    ``params["system_params"]``. ``params_schema`` is the JSON Schema of a request's params:
    ``options`` (the per-request subset of chat options), ``system_params``, and the context
    params the chain's advisor types declare. Shared by every version with the same
    ``snapshot_hash``.
    """

    slug: str
    snapshot_hash: str
    client: ChatClient
    advisors: tuple[Advisor, ...]
    params_schema: Mapping[str, Any]
    system_template: CorePromptTemplate | None = None
    snapshot: Mapping[str, Any] = field(default_factory=dict, repr=False)
    #: The chain's chat models by ``id()``: the configuration each was built from.
    model_refs: Mapping[int, ModelRef] = field(default_factory=dict, repr=False)

    @cached_property
    def empty_params_errors(self) -> FieldErrors:
        """What is wrong with a request that sends no params (most do): checked once."""
        return schema_errors(self.params_schema, {}, "params")

    @property
    def has_memory(self) -> bool:
        """Whether a chat-memory advisor stores the turns in the conversation itself.

        ``VectorStoreChatMemoryAdvisor`` is a memory advisor too, but it stores into a
        collection, so the turn service still writes the conversation's transcript. Session
        memory (``SessionTurnAdvisor``) stores the turns itself.
        """
        return any(isinstance(a, BaseChatMemoryAdvisor | SessionTurnAdvisor) for a in self.advisors)

    @property
    def memory_read(self) -> int | None:
        """How many of a conversation's newest messages the chain's memory advisors read first
        (the most any of them asks for; ``None``: no windowed memory — session memory reads its
        view itself, in one query of its own)."""
        reads = [
            read
            for advisor in self.advisors
            if isinstance(advisor, BaseChatMemoryAdvisor)
            and isinstance(read := getattr(advisor.chat_memory, "first_read", None), int)
        ]
        return max(reads, default=None)

    @property
    def has_tool_loop(self) -> bool:
        """Whether a tool-calling advisor runs tool rounds inside the turn."""
        return any(isinstance(a, ToolCallingAdvisor) for a in self.advisors)

    @property
    def tool_options(self) -> ToolCallingChatOptions:
        """The chain's tools (registered names, and MCP tools as callbacks), as the options a
        tool loop resolves them from."""
        tools = self.client.default_tools
        return ToolCallingChatOptions(
            tool_names=tuple(t for t in tools if isinstance(t, str)),
            tool_callbacks=tuple(t for t in tools if not isinstance(t, str)),
        )

    @property
    def tool_calling_manager(self) -> ToolCallingManager | None:
        """The manager of the chain's tool loop (its row's, or the one added for its tools);
        ``None``: the chain runs no tools."""
        loop = next((a for a in self.advisors if isinstance(a, ToolCallingAdvisor)), None)
        if loop is not None:
            return loop.tool_calling_manager
        manager = self.client.tool_calling_manager
        return manager if self.client.default_tools and manager is not None else None

    @cached_property
    def may_pause(self) -> bool:
        """Whether a reply may pause the turn for tool-call approval (worked out once per
        built chain: every turn asks)."""
        manager = self.tool_calling_manager
        if manager is None:
            return False
        # A guard that holds tool calls for a reviewer pauses the turn as approval does.
        holds = any(
            isinstance(a, GuardAdvisor) and a.may_hold("tool_arguments") for a in self.advisors
        )
        return holds or manager.may_pause(self.tool_options)

    @cached_property
    def approver_permission(self) -> str:
        """Who may decide the chain's paused calls: a permission, or ``""`` (the caller or a
        holder of ``advisors_app.decide_toolapproval``)."""
        for row in self.snapshot.get("advisors", ()):
            if row.get("enabled") and row.get("type") in ("tool_calling", "tool_search"):
                return str(row.get("params", {}).get("approvers", ""))
        return ""


def _params_schema(
    types: list[tuple[AdvisorType, Mapping[str, Any]]], template: CorePromptTemplate | None
) -> dict[str, Any]:
    options = {k: v for k, v in CHAT_OPTIONS_SCHEMA["properties"].items() if k in REQUEST_OPTIONS}
    properties: dict[str, Any] = {
        "options": {"type": "object", "properties": options, "additionalProperties": False}
    }
    if template is not None:
        properties["system_params"] = {
            "type": "object",
            "properties": {name: {"type": ["string", "number"]} for name in template.placeholders},
            "required": list(template.placeholders),
            "additionalProperties": False,
        }
    for advisor_type, params in types:
        # Only what this row enables (a caller's filter needs the row's allow_request_filter).
        properties.update(advisor_type.request_params_for(params))
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if template is not None:
        schema["required"] = ["system_params"]
    return schema


def _advisors(
    snapshot: Mapping[str, Any], services: BuildServices
) -> tuple[list[Advisor], list[tuple[AdvisorType, Mapping[str, Any]]]]:
    advisors: list[Advisor] = []
    types: list[tuple[AdvisorType, Mapping[str, Any]]] = []
    for index, row in enumerate(snapshot["advisors"]):
        if not row["enabled"]:
            continue
        where = advisor_label(index, row)
        advisor_type = advisor_types.get(row["type"])
        if advisor_type is None:
            raise ChainConfigurationError(f"{where}: the advisor type is not registered")
        try:
            advisor = advisor_type.build(row["params"], row["order"], snapshot["slug"], services)
            advisors.append(advisor)
            # Advisors a configuration installs with it (session memory's inner advisor).
            advisors.extend(getattr(advisor, "companions", ()))
        except Exception as exc:
            # Whatever a factory raises (a project's own included), the chain cannot be built:
            # say which advisor and why, rather than fail a request as an unexplained error.
            raise ChainConfigurationError(f"{where}: {type(exc).__name__}: {exc}") from exc
        types.append((advisor_type, row["params"]))
    # Rows come sorted by order; companions join at their own order (a stable sort).
    advisors.sort(key=lambda advisor: advisor.order)
    return advisors, types


def compile_snapshot(
    snapshot: Mapping[str, Any], *, default_chat_model: Mapping[str, Any] | None = None
) -> CompiledChain:
    """Build the client ``snapshot`` describes; raises :class:`ChainConfigurationError`.

    ``default_chat_model`` is the configuration of the deployment's default chat model, for a
    snapshot without a model of its own (default: the settings' ``DEFAULT_CHAT_MODEL``).
    """
    services = BuildServices(snapshot, default_chat_model)
    advisors, types = _advisors(snapshot, services)
    system: str | None = snapshot["system_prompt"] or None
    template = None
    if snapshot["system_template"]:
        text = services.reference("prompt_template", snapshot["system_template"])["text"]
        try:
            template = CorePromptTemplate(text)
        except ValueError as exc:
            raise ChainConfigurationError(f"system template: {exc}") from exc
        if template.placeholders:
            system = None
        else:
            system, template = template.render({}), None
    try:
        options = ChatOptions.from_dict(snapshot["default_options"] or {})
    except (TypeError, ValueError) as exc:
        raise ChainConfigurationError(f"default_options: {exc}") from exc
    tools = tuple(tool["name"] for tool in snapshot["tools"])
    unknown = [name for name in tools if name not in tool_registry]
    if unknown:
        raise ChainConfigurationError(
            f"unknown tool(s) {', '.join(unknown)}; registered: "
            + (", ".join(tool_registry.names) or "none")
        )
    try:
        mcp_tools = mcp_tool_callbacks(snapshot)
    except McpConfigurationError as exc:
        raise ChainConfigurationError(str(exc)) from exc
    client = ChatClient(
        services.chat_model(snapshot["chat_model"]),
        default_system=system,
        default_advisors=advisors,
        # Divergence from ChatClient's default: the tool loop is added only to chains that
        # enable tools (a tool_calling row adds it explicitly), so other chains do not pay for it.
        default_advisor_params={} if tools or mcp_tools else {TOOL_CALLING_AUTO_REGISTER: False},
        default_options=options,
        # MCP tools go as callbacks: they are the snapshot's, not the process registry's.
        default_tools=(*tools, *mcp_tools),
        tool_calling_manager=ToolCallingManager(tool_registry=tool_registry),
    )
    compiled = CompiledChain(
        slug=snapshot["slug"],
        snapshot_hash=snapshot_hash(snapshot),
        client=client,
        advisors=tuple(advisors),
        params_schema=_params_schema(types, template),
        system_template=template,
        snapshot=snapshot,
        model_refs=services.model_refs,
    )
    _check_resumable(compiled)
    return compiled


def _check_resumable(compiled: CompiledChain) -> None:
    """A chain whose tool calls may wait for approval resumes a paused turn from the
    conversation's stored messages: it needs a ``MessageChatMemoryAdvisor`` outside the loop."""
    if not compiled.may_pause:
        return
    loop_order = next(
        (a.order for a in compiled.advisors if isinstance(a, ToolCallingAdvisor)),
        ToolCallingAdvisor.DEFAULT_ORDER,
    )
    if not any(
        isinstance(a, MessageChatMemoryAdvisor) and a.order < loop_order for a in compiled.advisors
    ):
        raise ChainConfigurationError(
            "tool calls of this chain may need approval (a tool's approval, or a guard that "
            "holds tool arguments), and a paused turn resumes from the conversation's memory: "
            "add a message_chat_memory advisor ordered before the tool loop (or set the tools' "
            'approval to "never")'
        )
