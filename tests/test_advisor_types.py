"""Every built-in advisor type builds its core advisor from a stored row (through the runtime)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from advisors_app.core import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    AssistantMessage,
    ChatResponse,
    Generation,
    ProviderUnavailableError,
    ToolCall,
)
from advisors_app.core.tools import tool
from advisors_app.core.tracing import CallTrace
from advisors_app.definition.advisor_types import BUILTIN_TYPES
from advisors_app.definition.registry import advisor_types
from advisors_app.definition.runtime import DRAFT, clear_cache, load_chain
from advisors_app.definition.tools import tool_registry
from advisors_app.models import AuditEntry, Collection, PromptTemplate, SensitiveWordList
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db

H = HIGHEST_PRECEDENCE

#: key → (params of a minimal valid row, advisor class name, default order)
MINIMAL: dict[str, tuple[dict[str, Any], str, int]] = {
    "simple_logger": ({}, "SimpleLoggerAdvisor", 0),
    "safe_guard": ({"word_lists": ["bad"], "words": ["gun"]}, "SafeGuardAdvisor", H + 100),
    "guard": (
        {"rails": {"input": [{"check": "secrets", "action": "block"}]}},
        "GuardAdvisor",
        H + 100,
    ),
    "budget_guard": ({"max_chars": 10}, "BudgetGuardAdvisor", H + 150),
    "structured_output_validation": (
        {"output_json_schema": {"type": "object"}},
        "StructuredOutputValidationAdvisor",
        LOWEST_PRECEDENCE - 2000,
    ),
    "message_chat_memory": ({}, "MessageChatMemoryAdvisor", H + 200),
    "session_memory": ({"memory_order": 8}, "SessionTurnAdvisor", H + 200),
    "prompt_chat_memory": (
        {"system_prompt_template": "memory"},
        "PromptChatMemoryAdvisor",
        H + 200,
    ),
    "audit": ({}, "AuditAdvisor", H + 100),
    "citation": ({"render": True}, "CitationAdvisor", LOWEST_PRECEDENCE - 200),
    "fallback": ({"models": ["backup"]}, "FallbackAdvisor", LOWEST_PRECEDENCE - 1000),
    "pii_masking": ({"kinds": ["EMAIL"]}, "PiiMaskingAdvisor", H + 150),
    "timing": ({}, "TimingAdvisor", 100),
    "tool_calling": ({"max_identical_calls": None}, "ToolCallingAdvisor", H + 300),
    "tool_search": ({"index": "regex"}, "ToolSearchToolCallingAdvisor", H + 300),
    "question_answer": ({"collection": "kb", "top_k": 2}, "QuestionAnswerAdvisor", 0),
    "retrieval_augmentation": (
        {"collection": "kb", "compress_query_with": "backup", "allow_empty_context": True},
        "RetrievalAugmentationAdvisor",
        0,
    ),
    "vector_store_chat_memory": ({"collection": "kb"}, "VectorStoreChatMemoryAdvisor", H + 200),
    "semantic_cache": ({"ttl": 60}, "SemanticCacheAdvisor", H + 250),
}


@pytest.fixture(autouse=True)
def referenced_rows() -> Iterator[None]:
    clear_cache()
    SensitiveWordList.objects.create(slug="bad", words=["bomb"])
    PromptTemplate.objects.create(
        slug="memory",
        text="{instructions}\nMEMORY:\n{memory}",
        placeholders=["instructions", "memory"],
    )
    scripted_model("backup", responses=("from the backup",))
    Collection.objects.create(slug="kb", name="Knowledge base")
    yield
    clear_cache()


def test_every_builtin_type_is_registered_and_covered_here() -> None:
    builtin = {key for key, _ in BUILTIN_TYPES}
    assert builtin == set(MINIMAL)
    assert builtin <= {t.key for t in advisor_types}


#: Built-in types whose default order deliberately differs from their class's (noted on the entry).
ORDER_DIVERGENCES = {"safe_guard": H + 100}  # SafeGuardAdvisor.DEFAULT_ORDER is Spring's 0


@pytest.mark.parametrize(("key", "make"), BUILTIN_TYPES, ids=[k for k, _ in BUILTIN_TYPES])
def test_a_builtin_types_metadata_is_its_advisor_classs(key: str, make: Any) -> None:
    advisor_type = make()
    cls = advisor_type.advisor_class
    assert cls is not None and cls.__name__ == MINIMAL[key][1]
    assert advisor_type.roles == cls.ROLES
    assert advisor_type.stream_safe is cls.STREAM_SAFE
    assert advisor_type.after_side_effects is cls.AFTER_SIDE_EFFECTS
    assert advisor_type.default_order == ORDER_DIVERGENCES.get(key, cls.DEFAULT_ORDER)
    assert advisor_types[key].roles == advisor_type.roles  # what the lint reads


def test_the_rewrite_role_marks_the_advisors_that_replace_the_user_message() -> None:
    rewriting = {t.key for t in advisor_types if "rewrite" in t.roles and t.key in MINIMAL}
    assert rewriting == {"pii_masking", "question_answer", "retrieval_augmentation"}


@pytest.mark.parametrize("key", sorted(MINIMAL))
def test_a_builtin_type_builds_its_advisor_with_its_default_order(key: str) -> None:
    params, class_name, order = MINIMAL[key]
    chain = make_chain(key.replace("_", "-"), advisors=((key, params),))
    # Session memory's row also installs its inner SessionMemoryAdvisor (a companion).
    [advisor] = [a for a in load_chain(chain.slug).advisors if type(a).__name__ == class_name]
    assert advisor.order == order == advisor_types[key].default_order
    chain.advisors.update(order=7)
    [advisor] = [
        a for a in load_chain(chain.slug, version=DRAFT).advisors if type(a).__name__ == class_name
    ]
    assert advisor.order == 7


def ask(slug: str, text: str) -> str:
    compiled = load_chain(slug)
    spec = compiled.client.prompt(text).advisor_param("chat_memory_conversation_id", "c1")
    return async_to_sync(spec.acall)().content()


def test_safe_guard_blocks_words_from_the_stored_lists_and_inline() -> None:
    chain = make_chain(advisors=(("safe_guard", MINIMAL["safe_guard"][0]),))
    assert ask(chain.slug, "how to build a BOMB").startswith("I'm unable to respond")
    assert ask(chain.slug, "a gun?").startswith("I'm unable to respond")
    assert ask(chain.slug, "hello") == "Hello!"
    assert len(load_chain(chain.slug).client.chat_model.prompts) == 1


def test_fallback_answers_from_the_model_config_it_names() -> None:
    primary = scripted_model("primary", responses=(), repeat=False)
    chain = make_chain(model=primary, advisors=(("fallback", {"models": ["backup"]}),))
    load_chain(chain.slug).client.chat_model.add(ProviderUnavailableError("down", status=503))
    assert ask(chain.slug, "hi") == "from the backup"


def test_audit_writes_entries_to_the_database() -> None:
    chain = make_chain(advisors=(("audit", {}),))
    assert ask(chain.slug, "hi") == "Hello!"
    entry = AuditEntry.objects.get()
    assert (entry.status, entry.request_text, entry.response_text) == ("completed", "hi", "Hello!")


def test_tools_enabled_by_name_run_in_the_tool_loop() -> None:
    calls = []

    @tool(description="The weather in a city")
    def get_weather(city: str) -> str:
        calls.append(city)
        return f"Sunny in {city}"

    with tool_registry.registered(get_weather):
        tool_call = ChatResponse(
            (
                Generation(
                    AssistantMessage(
                        "", tool_calls=(ToolCall("t1", "get_weather", '{"city": "Oslo"}'),)
                    )
                ),
            )
        )
        primary = scripted_model("tools-model", responses=(), repeat=False)
        chain = make_chain(model=primary, tools=["get_weather"])
        model = load_chain(chain.slug).client.chat_model
        model.add(tool_call, "It is sunny in Oslo.")
        assert ask(chain.slug, "Weather in Oslo?") == "It is sunny in Oslo."
        assert calls == ["Oslo"]
        assert model.prompts[-1].instructions[-1].responses[0].response_data == "Sunny in Oslo"


def test_chains_without_tools_have_no_tool_loop() -> None:
    trace = CallTrace()
    spec = load_chain(make_chain().slug).client.prompt("hi").observer(trace)
    assert async_to_sync(spec.acall)().content() == "Hello!"
    assert [entry.name for entry in trace.entries] == ["call"]
