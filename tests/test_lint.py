"""Chain lint rules, each by its stable id, and the system check that runs them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.checks import run_checks

from advisors_app.core import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE, RecordingAdvisor
from advisors_app.lint import format_order, lint_chain
from advisors_app.models import AdvisorChain, AdvisorConfig, PromptTemplate, SensitiveWordList
from advisors_app.registry import AdvisorType, advisor_types
from tests.factories import make_chain

pytestmark = pytest.mark.django_db

H = HIGHEST_PRECEDENCE


@pytest.fixture(autouse=True)
def role_types() -> Iterator[None]:
    """Types with each role the lint knows, registered for the test only."""

    def make(key: str, order: int, **kwargs: object) -> AdvisorType:
        return AdvisorType(
            key=key,
            label=key,
            factory=lambda spec: RecordingAdvisor(key, spec.order),
            default_order=order,
            **kwargs,  # type: ignore[arg-type]
        )

    types = [
        make("t_memory", H + 200, roles=frozenset({"memory"})),
        make("t_tool", H + 300, roles=frozenset({"tool"})),
        make("t_guard", 0, roles=frozenset({"guard"})),
        make("t_rag", 0, roles=frozenset({"rag"})),
        make("t_audit", 0, after_side_effects=True, stream_safe=False),
        make("t_safe_audit", 0, after_side_effects=True),
        make(
            "t_template",
            0,
            params_schema={
                "type": "object",
                "properties": {
                    "template": {
                        "type": "string",
                        "x-reference": "prompt_template",
                        "x-required-placeholders": ["query", "context"],
                    }
                },
            },
        ),
    ]
    for advisor_type in types:
        advisor_types.register(advisor_type, replace=True)
    yield
    for advisor_type in types:
        advisor_types.unregister(advisor_type.key)


def rows(*specs: tuple) -> list[AdvisorConfig]:
    """Unsaved rows ``(type, order[, params[, enabled]])``, as the admin formset has them."""
    made = []
    for key, order, *rest in specs:
        params = rest[0] if rest else {}
        enabled = rest[1] if len(rest) > 1 else True
        made.append(AdvisorConfig(advisor_type=key, order=order, params=params, enabled=enabled))
    return made


def ids(chain_rows: list[AdvisorConfig]) -> list[str]:
    return [m.id for m in lint_chain(chain_rows)]


def test_a_well_ordered_chain_is_clean() -> None:
    assert ids(rows(("t_guard", H + 100), ("t_memory", None), ("t_tool", None), ("t_rag", 0))) == []


def test_e101_more_than_one_tool_advisor() -> None:
    messages = lint_chain(rows(("t_tool", None), ("t_tool", H + 400)))
    assert [m.id for m in messages] == ["advisors_app.E101"]
    assert messages[0].message.startswith("At most one ToolAdvisor is allowed in the advisor chain")
    assert messages[0].is_error
    assert ids(rows(("t_tool", None), ("t_tool", H + 400, {}, False))) == []


def test_e102_memory_inside_the_tool_loop() -> None:
    messages = lint_chain(rows(("t_tool", None), ("t_memory", H + 400)))
    assert [m.id for m in messages] == ["advisors_app.E102"]
    assert "order HIGHEST+400 runs inside the tool loop" in messages[0].message
    # Equal orders keep the rows' order: the first row is outer.
    assert ids(rows(("t_memory", H + 300), ("t_tool", None))) == []
    assert ids(rows(("t_tool", None), ("t_memory", H + 300))) == ["advisors_app.E102"]


def test_w103_guard_inside_memory() -> None:
    messages = lint_chain(rows(("t_memory", None), ("t_guard", 0)))
    assert [(m.id, m.level) for m in messages] == [("advisors_app.W103", "warning")]
    assert "blocked input would be remembered" in messages[0].message


def test_w104_retrieval_outside_memory() -> None:
    messages = lint_chain(rows(("t_rag", H), ("t_memory", None)))
    assert [(m.id, m.level) for m in messages] == [("advisors_app.W104", "warning")]
    assert "stores the whole augmented prompt (the user's message plus every retrieved " in (
        messages[0].message
    )
    assert "Give the memory advisor a smaller order" in messages[0].hint


def test_e105_side_effects_in_after_must_be_stream_safe() -> None:
    assert ids(rows(("t_audit", None))) == ["advisors_app.E105"]
    assert ids(rows(("t_safe_audit", None))) == []


def test_e106_template_lacks_required_placeholders_or_pairs_no_brace() -> None:
    PromptTemplate.objects.create(slug="qa", text="Answer {query}.", placeholders=["query"])
    messages = lint_chain(rows(("t_template", 0, {"template": "qa"})))
    assert [m.id for m in messages] == ["advisors_app.E106"]
    assert "must be present in the prompt template: context" in messages[0].message
    # A template saved before the admin refused unpaired braces (or by code).
    PromptTemplate.objects.create(slug="typo", text="{query}\n{context} {oops")
    [message] = lint_chain(rows(("t_template", 0, {"template": "typo"})))
    assert message.id == "advisors_app.E106"
    assert "template 'typo': Unbalanced \"{\" at line 2, column 11 ('{oops')" in message.message


def test_e107_order_out_of_range() -> None:
    assert ids(rows(("t_guard", LOWEST_PRECEDENCE + 1))) == ["advisors_app.E107"]
    assert ids(rows(("t_guard", LOWEST_PRECEDENCE))) == []


def test_e108_unknown_type_and_e109_bad_params() -> None:
    messages = lint_chain(rows(("gone", 0), ("append", 0, {"text": 3})))
    assert [m.id for m in messages] == ["advisors_app.E108", "advisors_app.E109"]
    assert "advisor #1 (gone): unknown advisor type 'gone'" in messages[0].message
    assert "params.text: 3 is not of type 'string'" in messages[1].message


def test_e110_missing_reference() -> None:
    messages = lint_chain(rows(("append", 0, {"text": "!", "note": "nope"})))
    assert [m.id for m in messages] == ["advisors_app.E110"]
    assert "params.note: no sensitive-word list with slug 'nope'" in messages[0].message


def test_w112_a_guard_with_no_word_blocks_nothing() -> None:
    SensitiveWordList.objects.create(slug="emptied", words=[])  # by code: the admin refuses
    SensitiveWordList.objects.create(slug="bad", words=["bomb"])
    messages = lint_chain(rows(("safe_guard", None, {"word_lists": ["emptied"]})))
    assert [(m.id, m.level) for m in messages] == [("advisors_app.W112", "warning")]
    assert "no word to block (word lists: 'emptied'; no inline words)" in messages[0].message
    assert ids(rows(("safe_guard", None, {}))) == ["advisors_app.W112"]
    assert ids(rows(("safe_guard", None, {"word_lists": ["emptied"], "words": ["gun"]}))) == []
    assert ids(rows(("safe_guard", None, {"word_lists": ["emptied", "bad"]}))) == []
    assert ids(rows(("safe_guard", None, {}, False))) == []  # disabled: blocks nothing anyway
    assert ids(rows(("safe_guard", None, {"word_lists": ["gone"]}))) == ["advisors_app.E110"]
    assert ids(rows(("t_guard", None))) == []  # a guard that takes no word lists


def test_orders_read_relative_to_the_ends() -> None:
    assert format_order(H + 200) == "HIGHEST+200"
    assert format_order(H) == "HIGHEST"
    assert format_order(LOWEST_PRECEDENCE - 2000) == "LOWEST-2000"
    assert format_order(0) == "0"
    assert format_order(None) == "default"


def test_manage_py_check_reports_every_stored_chain() -> None:
    chain = make_chain("bad-chain")
    AdvisorConfig.objects.create(chain=chain, advisor_type="t_tool", params={})
    AdvisorConfig.objects.create(chain=chain, advisor_type="t_tool", params={}, order=H + 301)
    AdvisorConfig.objects.create(chain=chain, advisor_type="t_guard", params={})
    AdvisorConfig.objects.create(chain=chain, advisor_type="t_memory", params={})
    found = [m for m in run_checks(databases=["default"]) if m.id.startswith("advisors_app.")]
    assert sorted(m.id for m in found) == ["advisors_app.E101", "advisors_app.W103"]
    assert all(m.obj == chain and m.msg.startswith("Chain 'bad-chain': ") for m in found)
    assert not [m for m in run_checks() if m.id in {"advisors_app.E101", "advisors_app.W103"}]


def test_manage_py_check_reports_a_tool_that_is_no_longer_registered() -> None:
    chain = make_chain("tooled")
    AdvisorChain.objects.filter(pk=chain.pk).update(tools=["retired_tool"])  # as after an upgrade
    [found] = [m for m in run_checks(databases=["default"]) if m.id == "advisors_app.E111"]
    assert found.msg.startswith("Chain 'tooled': Unknown tool(s): retired_tool.")
