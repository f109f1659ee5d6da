"""Advisor metadata on the class: default order, roles, stream safety; chain assembly reads it."""

from __future__ import annotations

import importlib
import inspect
import warnings

import pytest

from advisors_app.core import (
    DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
    DEFAULT_TOOL_CALLING_ORDER,
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    Advisor,
    AdvisorRole,
    AdvisorStateError,
    BaseAdvisor,
    CallAdvisor,
    ChatClient,
    MemoryAdvisor,
    RecordingAdvisor,
    ScriptedChatModel,
    ToolAdvisor,
    has_role,
)
from advisors_app.core.client import MemoryInsideToolLoopWarning

H, L = HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE
R = AdvisorRole

#: "module:Class" → (DEFAULT_ORDER, ROLES, AFTER_SIDE_EFFECTS) of every built-in core advisor.
BUILTIN = {
    "advisors.simple_logger:SimpleLoggerAdvisor": (0, {R.LOGGING}, False),
    "advisors.safe_guard:SafeGuardAdvisor": (0, {R.GUARD}, False),
    "advisors.budget_guard:BudgetGuardAdvisor": (H + 150, {R.GUARD}, False),
    "advisors.pii_masking:PiiMaskingAdvisor": (H + 150, {R.REWRITE}, False),
    "advisors.structured_output_validation:StructuredOutputValidationAdvisor": (
        L - 2000,
        set(),
        False,
    ),
    "advisors.message_chat_memory:MessageChatMemoryAdvisor": (H + 200, {R.MEMORY}, True),
    "advisors.prompt_chat_memory:PromptChatMemoryAdvisor": (H + 200, {R.MEMORY}, True),
    "advisors.vector_store_chat_memory:VectorStoreChatMemoryAdvisor": (H + 200, {R.MEMORY}, True),
    "advisors.question_answer:QuestionAnswerAdvisor": (0, {R.RAG, R.REWRITE}, False),
    "rag.advisor:RetrievalAugmentationAdvisor": (0, {R.RAG, R.REWRITE}, False),
    "advisors.tool_calling:ToolCallingAdvisor": (H + 300, {R.TOOL}, False),
    "advisors.tool_search:ToolSearchToolCallingAdvisor": (H + 300, {R.TOOL}, False),
    "advisors.semantic_cache:SemanticCacheAdvisor": (H + 250, {R.CACHE}, True),
    "advisors.audit:AuditAdvisor": (H + 100, {R.LOGGING}, True),
    "advisors.citation:CitationAdvisor": (L - 200, set(), False),
    "advisors.fallback:FallbackAdvisor": (L - 1000, set(), False),
    "advisors.timing:TimingAdvisor": (100, {R.LOGGING}, False),
}


def advisor_class(path: str) -> type[Advisor]:
    module, name = path.split(":")
    cls: type[Advisor] = getattr(importlib.import_module(f"advisors_app.core.{module}"), name)
    return cls


@pytest.mark.parametrize("path", sorted(BUILTIN))
def test_each_builtin_advisor_carries_its_metadata_on_the_class(path: str) -> None:
    cls = advisor_class(path)
    order, roles, side_effects = BUILTIN[path]
    assert (order, roles, side_effects) == (cls.DEFAULT_ORDER, cls.ROLES, cls.AFTER_SIDE_EFFECTS)
    assert cls.STREAM_SAFE  # every built-in's after-work runs once per stream
    # An advisor built without an order gets the class's.
    assert inspect.signature(cls).parameters["order"].default == cls.DEFAULT_ORDER


def test_the_memory_and_tool_defaults_are_the_seed_bands() -> None:
    memory = advisor_class("advisors.message_chat_memory:MessageChatMemoryAdvisor")
    tools = advisor_class("advisors.tool_calling:ToolCallingAdvisor")
    assert memory.DEFAULT_ORDER == DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER
    assert tools.DEFAULT_ORDER == DEFAULT_TOOL_CALLING_ORDER


def test_the_base_defaults() -> None:
    assert Advisor.DEFAULT_ORDER == 0 and not Advisor.ROLES
    assert Advisor.STREAM_SAFE and not Advisor.AFTER_SIDE_EFFECTS
    assert RecordingAdvisor("r").order == 0


def test_roles_are_strings_of_one_vocabulary() -> None:
    assert [r.value for r in AdvisorRole] == [
        "memory",
        "tool",
        "guard",
        "rag",
        "cache",
        "logging",
        "rewrite",
    ]
    assert AdvisorRole.REWRITE == "rewrite" and frozenset({"memory"}) == MemoryAdvisor.ROLES


def test_markers_give_their_role_and_subclasses_keep_their_bases_roles() -> None:
    class Memory(BaseAdvisor, MemoryAdvisor):
        pass

    class LoggingMemory(Memory):
        ROLES = frozenset({"logging"})  # plain strings are accepted and normalised

    assert has_role(Memory, R.MEMORY) and has_role(Memory(), R.MEMORY)
    assert {R.MEMORY, R.LOGGING} == LoggingMemory.ROLES
    assert all(isinstance(r, AdvisorRole) for r in LoggingMemory.ROLES)
    assert {R.TOOL} == ToolAdvisor.ROLES and not has_role(RecordingAdvisor("r"), R.TOOL)


def test_an_unknown_role_fails_when_the_class_is_defined() -> None:
    with pytest.raises(ValueError, match=r"Wizard\.ROLES: unknown role 'wizard'; known: memory"):

        class Wizard(BaseAdvisor):
            ROLES = frozenset({"wizard"})


def test_an_instance_without_an_order_has_its_class_default() -> None:
    class Late(BaseAdvisor):
        DEFAULT_ORDER = L - 5

    assert Late().order == L - 5
    late = Late()
    late.order = 3
    assert late.order == 3


class DeclaredLoop(BaseAdvisor):
    """A tool loop by role only: no ``ToolAdvisor`` marker."""

    ROLES = frozenset({AdvisorRole.TOOL})

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        return self._name


class DeclaredMemory(BaseAdvisor):
    """A memory advisor by role only: no ``MemoryAdvisor`` marker."""

    ROLES = frozenset({AdvisorRole.MEMORY})
    DEFAULT_ORDER = DEFAULT_TOOL_CALLING_ORDER + 1


def test_chain_assembly_counts_tool_advisors_by_role() -> None:
    client = ChatClient(ScriptedChatModel(["ok"]))
    spec = client.prompt("q").advisors(DeclaredLoop("one"), DeclaredLoop("two"))
    with pytest.raises(AdvisorStateError, match=r"At most one ToolAdvisor .* found 2: \[one"):
        spec.call().content()
    # One declared tool loop replaces the automatic one.
    chain = client.prompt("q").advisors(DeclaredLoop("mine"))._chain(CallAdvisor)
    assert [a.name for a in chain.call_advisors if has_role(a, R.TOOL)] == ["mine"]


def test_chain_assembly_finds_memory_inside_the_tool_loop_by_role() -> None:
    client = ChatClient(ScriptedChatModel(["ok"]), default_advisors=[DeclaredMemory()])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert client.prompt("q").call().content() == "ok"
        chain = client.prompt("q")._chain(CallAdvisor)
    assert [w.category for w in caught] == [MemoryInsideToolLoopWarning]
    [loop] = [a for a in chain.call_advisors if has_role(a, R.TOOL)]
    assert loop.conversation_history_enabled is False  # memory inside: the loop keeps none
