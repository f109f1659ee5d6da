"""Chain lint rules over snapshots, each by its stable id, and the system check that runs them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.checks import WARNING, run_checks
from django.db import connection
from django.test.utils import CaptureQueriesContext

from advisors_app.core import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE, RecordingAdvisor
from advisors_app.definition import LintMessage, check, lint, resolve_draft
from advisors_app.definition.registry import AdvisorType, advisor_types
from advisors_app.models import AdvisorChain, AdvisorConfig, PromptTemplate, SensitiveWordList
from advisors_app.orders import format_order
from tests.factories import make_chain

pytestmark = pytest.mark.django_db

H = HIGHEST_PRECEDENCE


@pytest.fixture(autouse=True)
def role_types() -> Iterator[None]:
    """Types with each role the lint knows, registered for the test only."""

    def broken(spec: object) -> RecordingAdvisor:
        raise RuntimeError("the factory refuses")

    def make(key: str, order: int, factory_error: bool = False, **kwargs: object) -> AdvisorType:
        return AdvisorType(
            key=key,
            label=key,
            factory=broken if factory_error else lambda spec: RecordingAdvisor(key, spec.order),
            default_order=order,
            **kwargs,  # type: ignore[arg-type]
        )

    types = [
        make("t_memory", H + 200, roles=frozenset({"memory"})),
        make("t_tool", H + 300, roles=frozenset({"tool"})),
        make("t_guard", 0, roles=frozenset({"guard"})),
        make("t_rag", 0, roles=frozenset({"rag"})),
        make("t_rewrite", 0, roles=frozenset({"rewrite"})),
        make("t_broken", 0, factory_error=True),
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
    with advisor_types.registered(*types, replace=True):
        yield


def rows(*specs: tuple) -> list[AdvisorConfig]:
    """Unsaved rows ``(type, order[, params[, enabled]])``, as the admin formset has them."""
    made = []
    for key, order, *rest in specs:
        params = rest[0] if rest else {}
        enabled = rest[1] if len(rest) > 1 else True
        made.append(AdvisorConfig(advisor_type=key, order=order, params=params, enabled=enabled))
    return made


def lint_chain(chain_rows: list[AdvisorConfig]) -> list[LintMessage]:
    """Lint unsaved rows as the admin does: resolve the draft's snapshot, then lint it."""
    return lint(resolve_draft(AdvisorChain(slug="linted"), chain_rows))


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


def test_e106_template_lacks_required_placeholders() -> None:
    PromptTemplate.objects.create(slug="qa", text="Answer {query}.", placeholders=["query"])
    messages = lint_chain(rows(("t_template", 0, {"template": "qa"})))
    assert [m.id for m in messages] == ["advisors_app.E106"]
    assert "must be present in the prompt template: context" in messages[0].message


def test_e123_template_pairs_no_brace() -> None:
    # A template saved before the admin refused unpaired braces (or by code).
    PromptTemplate.objects.create(slug="typo", text="{query}\n{context} {oops")
    [message] = lint_chain(rows(("t_template", 0, {"template": "typo"})))
    assert message.id == "advisors_app.E123" and message.is_error
    assert "template 'typo': Unbalanced \"{\" at line 2, column 11 ('{oops')" in message.message
    assert "write {{ and }} for literal braces" in message.hint


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
    snapshot = resolve_draft(AdvisorChain(slug="linted"), [])
    [message] = lint({**snapshot, "chat_model": "gone"})
    assert message.id == "advisors_app.E110"
    assert message.message == "chat_model: no chat model with slug 'gone'."


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
    assert all(m.obj == chain and m.msg.startswith("Chain 'bad-chain' (draft): ") for m in found)
    # A draft serves nobody: its errors warn, so they never block `migrate` or a deploy.
    assert {m.level for m in found} == {WARNING}
    assert not [m for m in run_checks() if m.id in {"advisors_app.E101", "advisors_app.W103"}]


def test_manage_py_check_reports_a_tool_that_is_no_longer_registered() -> None:
    chain = make_chain("tooled")
    AdvisorChain.objects.filter(pk=chain.pk).update(tools=["retired_tool"])  # as after an upgrade
    [found] = [m for m in run_checks(databases=["default"]) if m.id == "advisors_app.E111"]
    assert found.msg.startswith("Chain 'tooled' (draft): unknown tool(s): retired_tool.")


def test_manage_py_check_reports_a_labelled_version_that_no_longer_builds() -> None:
    chain = make_chain("uses-a-plugin", advisors=(("t_guard", {}),))
    advisor_types.unregister("t_guard")  # as after removing an app that registered the type
    found = [m for m in run_checks(databases=["default"]) if m.id == "advisors_app.E108"]
    assert {m.msg.split(":")[0] for m in found} == {
        "Chain 'uses-a-plugin' (draft)",
        "Chain 'uses-a-plugin' v1 (production)",
    }
    assert chain.versions.count() == 1


def test_lint_and_compile_read_no_database() -> None:
    PromptTemplate.objects.create(slug="qa", text="{query} {context}")
    SensitiveWordList.objects.create(slug="bad", words=["bomb"])
    snapshot = resolve_draft(
        AdvisorChain(slug="linted"),
        rows(("safe_guard", None, {"word_lists": ["bad"]}), ("t_template", 0, {"template": "qa"})),
    )
    with CaptureQueriesContext(connection) as queries:
        checked = check(snapshot)
    assert checked.messages == () and checked.compiled is not None
    assert len(queries) == 0, [q["sql"] for q in queries]


def test_e113_a_factory_that_fails_is_a_lint_error_naming_the_advisor() -> None:
    snapshot = resolve_draft(AdvisorChain(slug="linted"), rows(("t_guard", 0), ("t_broken", 0)))
    assert lint(snapshot) == []
    checked = check(snapshot)
    [error] = checked.errors
    assert error.id == "advisors_app.E113" and checked.compiled is None
    assert "advisor #2 (t_broken): RuntimeError: the factory refuses" in error.message


def test_w114_a_rewriter_inside_retrieval_resends_the_context() -> None:
    messages = lint_chain(rows(("t_rag", 0), ("t_rewrite", 10)))
    assert [(m.id, m.level) for m in messages] == [("advisors_app.W114", "warning")]
    assert "rewrites and sends again the whole retrieved context" in messages[0].message
    assert "smaller order than advisor #1 (t_rag)" in messages[0].hint
    assert ids(rows(("t_rewrite", -10), ("t_rag", 0))) == []


def test_e115_default_options_the_chat_options_refuse() -> None:
    snapshot = resolve_draft(
        AdvisorChain(slug="linted", default_options={"temperature": "hot"}), []
    )
    [message] = lint(snapshot)
    assert message.id == "advisors_app.E115" and "temperature" in message.message
