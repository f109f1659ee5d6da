"""Build a core ``ChatClient`` from a stored chain, and cache it by configuration hash.

:func:`load_chain` reads the chain row (one query), and returns the :class:`CompiledChain`
cached under the row's ``config_hash``. On a miss it resolves the configuration snapshot
(:mod:`advisors_app.configuration`), builds every advisor through the registry from that
snapshot alone, and caches the result under the snapshot's own hash (storing it on the row
if the stored one was stale). Since every change to the chain or to anything it refers to
changes the stored hash (signals), each process picks up a change on its next request,
without any message between processes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.signals import setting_changed

from advisors_app.configuration import configuration_hash, resolve_configuration
from advisors_app.core.advisor import Advisor
from advisors_app.core.advisors.base_chat_memory import BaseChatMemoryAdvisor
from advisors_app.core.attributes import TOOL_CALLING_AUTO_REGISTER
from advisors_app.core.client import ChatClient
from advisors_app.core.memory import DEFAULT_MAX_MESSAGES, ChatMemory, MessageWindowChatMemory
from advisors_app.core.model import ChatModel, EmbeddingModel
from advisors_app.core.prompt import ChatOptions
from advisors_app.core.providers.registry import (
    create_chat_model,
    create_embedding_model,
    default_embedding_model,
)
from advisors_app.core.templates import PromptTemplate as CorePromptTemplate
from advisors_app.core.tools import ToolCallingManager
from advisors_app.core.vectorstore import VectorStore
from advisors_app.models import AdvisorChain, Collection
from advisors_app.registry import advisor_types, reference_kinds, references_in
from advisors_app.scoping import UserScopedVectorStore
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.stores.vectors import PgVectorStore
from advisors_app.tools import tool_registry
from advisors_app.validation import CHAT_OPTIONS_SCHEMA, REQUEST_OPTIONS

__all__ = [
    "CACHE_SIZE",
    "BuildServices",
    "ChainConfigurationError",
    "ChainNotFound",
    "CompiledChain",
    "build_chat_model",
    "clear_cache",
    "compile_configuration",
    "load_chain",
]

#: Built chains kept per process (least recently used dropped first).
CACHE_SIZE = 64


class ChainNotFound(LookupError):
    """Raised when no chain has the slug, or the chain is disabled."""


class ChainConfigurationError(RuntimeError):
    """Raised when a stored chain cannot be built: unknown type, bad params, missing row."""


def build_chat_model(config: Mapping[str, Any]) -> ChatModel:
    """The chat model a configuration mapping describes (``ModelConfig.to_config()``)."""
    try:
        return create_chat_model(config)
    except ValueError as exc:
        raise ChainConfigurationError(str(exc)) from exc


#: Stateless, so one repository serves every chain, request and thread.
_repository = DjangoChatMemoryRepository()


class BuildServices:
    """What factories resolve slugs through: one chain snapshot's references, no queries."""

    def __init__(self, configuration: Mapping[str, Any]) -> None:
        self._references: Mapping[str, Any] = configuration["references"]

    def reference(self, kind: str, slug: str) -> Mapping[str, Any]:
        value = self._references.get(f"{kind}:{slug}")
        if value is None:
            label = getattr(reference_kinds.get(kind), "label", kind)
            raise ChainConfigurationError(f"no {label} with slug {slug!r}")
        return value

    def chat_model(self, slug: str) -> ChatModel:
        return build_chat_model(self.reference("chat_model", slug))

    def embedding_model(self, slug: str | None) -> EmbeddingModel:
        """The embedding model ``slug`` names; ``None``: the process-wide default (MiniLM)."""
        if slug is None:
            return default_embedding_model()
        try:
            return create_embedding_model(self.reference("embedding_model", slug), name=slug)
        except ValueError as exc:
            raise ChainConfigurationError(str(exc)) from exc

    def vector_store(self, collection: str, embedding_model: str | None = None) -> VectorStore:
        """The collection as each turn's user may see it (:class:`UserScopedVectorStore`).

        Raises ``EmbeddingDimensionError`` (a ``ValueError``) here, at build time, when the
        model's dimensions differ from the stored embeddings' (bug case B24).
        """
        data = self.reference("collection", collection)
        row = Collection(
            id=data["id"], slug=collection, owner_id=data["owner_id"], tenant=data["tenant"]
        )
        model = self.embedding_model(embedding_model)
        PgVectorStore(row, model)  # checks the dimensions without a query
        return UserScopedVectorStore(row, model)

    def chat_memory(self, *, max_messages: int = DEFAULT_MAX_MESSAGES) -> ChatMemory:
        """A message-window memory over the conversations in the database."""
        return MessageWindowChatMemory(_repository, max_messages=max_messages)


@dataclass(frozen=True)
class CompiledChain:
    """A built chain: its client, advisors and what a request to it may carry.

    ``system_template`` is set when the system text has placeholders, filled per request from
    ``params["system_params"]``. ``params_schema`` is the JSON Schema of a request's params:
    ``options`` (the per-request subset of chat options), ``system_params``, and the context
    params the chain's advisor types declare.
    """

    slug: str
    chain_id: int
    config_hash: str
    client: ChatClient
    advisors: tuple[Advisor, ...]
    params_schema: Mapping[str, Any]
    system_template: CorePromptTemplate | None = None
    configuration: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def has_memory(self) -> bool:
        """Whether a chat-memory advisor stores the turns in the conversation itself.

        ``VectorStoreChatMemoryAdvisor`` is a memory advisor too, but it stores into a
        collection, so the turn service still writes the conversation's transcript.
        """
        return any(isinstance(a, BaseChatMemoryAdvisor) for a in self.advisors)


def _params_schema(types: list[Any], template: CorePromptTemplate | None) -> dict[str, Any]:
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
    for advisor_type in types:
        properties.update(advisor_type.request_params)
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if template is not None:
        schema["required"] = ["system_params"]
    return schema


def compile_configuration(configuration: Mapping[str, Any], chain_id: int) -> CompiledChain:
    """Build the client a configuration snapshot describes; raises ChainConfigurationError."""
    chain = configuration["chain"]
    services = BuildServices(configuration)
    advisors: list[Advisor] = []
    types = []
    for row in configuration["advisors"]:
        advisor_type = advisor_types.get(row["type"])
        if advisor_type is None:
            raise ChainConfigurationError(
                f"chain {chain['slug']!r}: advisor {row['id']} has the unregistered type "
                f"{row['type']!r}"
            )
        where = f"chain {chain['slug']!r}, advisor {row['id']} ({row['type']})"
        for param, kind, slug in references_in(advisor_type, row["params"]):
            if configuration["references"].get(f"{kind}:{slug}") is None:
                label = getattr(reference_kinds.get(kind), "label", kind)
                raise ChainConfigurationError(
                    f"{where}: params.{param}: no {label} with slug {slug!r}"
                )
        try:
            advisors.append(
                advisor_type.build(row["params"], row["order"], chain["slug"], services)
            )
        except Exception as exc:
            # Whatever a factory raises (a project's own included), the chain cannot be built:
            # say which row and why, rather than fail the request as an unexplained error.
            raise ChainConfigurationError(f"{where}: {type(exc).__name__}: {exc}") from exc
        types.append(advisor_type)
    system: str | None = chain["system_prompt"] or None
    template = None
    if chain["system_template"]:
        text = services.reference("prompt_template", chain["system_template"])["text"]
        template = CorePromptTemplate(text)
        if template.placeholders:
            system = None
        else:
            system, template = template.render({}), None
    try:
        options = ChatOptions.from_dict(chain["default_options"] or {})
    except (TypeError, ValueError) as exc:
        raise ChainConfigurationError(f"chain {chain['slug']!r}: default_options: {exc}") from exc
    tools = tuple(chain["tools"])
    unknown = [name for name in tools if name not in tool_registry]
    if unknown:
        raise ChainConfigurationError(
            f"chain {chain['slug']!r}: unknown tool(s) {', '.join(unknown)}; registered: "
            + (", ".join(tool_registry.names) or "none")
        )
    client = ChatClient(
        services.chat_model(chain["chat_model"]),
        default_system=system,
        default_advisors=advisors,
        # Divergence from ChatClient's default: the tool loop is added only to chains that
        # enable tools (a tool_calling row adds it explicitly), so other chains do not pay for it.
        default_advisor_params={} if tools else {TOOL_CALLING_AUTO_REGISTER: False},
        default_options=options,
        default_tools=tools,
        tool_calling_manager=ToolCallingManager(tool_registry=tool_registry),
    )
    return CompiledChain(
        slug=chain["slug"],
        chain_id=chain_id,
        config_hash=configuration_hash(dict(configuration)),
        client=client,
        advisors=tuple(advisors),
        params_schema=_params_schema(types, template),
        system_template=template,
        configuration=configuration,
    )


_cache: OrderedDict[str, CompiledChain] = OrderedDict()
_lock = threading.RLock()


def _cached(digest: str) -> CompiledChain | None:
    with _lock:
        found = _cache.get(digest)
        if found is not None:
            _cache.move_to_end(digest)
        return found


def load_chain(slug: str) -> CompiledChain:
    """The built, enabled chain with ``slug`` (blocking: runs queries; call from a thread).

    Raises :class:`ChainNotFound` for an unknown or disabled slug and
    :class:`ChainConfigurationError` when the stored chain cannot be built.
    """
    row = AdvisorChain.objects.filter(slug=slug).only("id", "enabled", "config_hash").first()
    if row is None or not row.enabled:
        raise ChainNotFound(slug)
    found = _cached(row.config_hash) if row.config_hash else None
    if found is not None and found.chain_id == row.pk:
        return found
    full = (
        AdvisorChain.objects.select_related("chat_model", "system_template")
        .prefetch_related("advisors")
        .get(pk=row.pk)
    )
    configuration = resolve_configuration(full)
    digest = configuration_hash(configuration)
    if digest != row.config_hash:
        AdvisorChain.objects.filter(pk=row.pk).update(config_hash=digest)
    with _lock:
        found = _cached(digest)
        if found is None or found.chain_id != row.pk:
            found = compile_configuration(configuration, row.pk)
            _cache[digest] = found
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return found


def clear_cache() -> None:
    """Drop every built chain of this process (they are rebuilt on their next request)."""
    with _lock:
        _cache.clear()


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "ADVISORS":
        clear_cache()


setting_changed.connect(_settings_changed, dispatch_uid="advisors_runtime_settings")
