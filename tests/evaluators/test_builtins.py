"""Every deterministic built-in evaluator on scripted outputs (no model, no database)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from advisors_app.evaluation.evaluators import MAX_COMMENT_CHARS, NOT_APPLICABLE, UNKNOWN, EvalScore

from .helpers import case, judge

# --- exact ---------------------------------------------------------------------------------


async def test_exact_strips_surrounding_whitespace_by_default() -> None:
    assert await judge("exact", case("  Paris\n", {"output": "Paris"})) == EvalScore(
        "exact", True, True, "the answer equals the expected output"
    )
    failed = await judge("exact", case("paris", {"output": "Paris"}))
    assert (failed.value, failed.passed) == (False, False)
    assert failed.comment == "expected 'Paris', the answer was 'paris'"


@pytest.mark.parametrize(
    ("params", "answer", "passed"),
    [
        ({"whitespace": "exact"}, " New York", False),
        ({"whitespace": "strip"}, "New  York", False),
        ({"whitespace": "collapse"}, " New \n York ", True),
        ({"ignore_case": True}, "NEW YORK", True),
        ({"ignore_case": True, "whitespace": "collapse"}, "new\tyork", True),
    ],
)
async def test_exact_options(params: dict[str, Any], answer: str, passed: bool) -> None:
    score = await judge("exact", case(answer, {"output": "New York"}), **params)
    assert score.value is passed and score.passed is passed


async def test_exact_params_text_wins_and_a_case_without_expectation_is_not_judged() -> None:
    assert (await judge("exact", case("yes", {"output": "no"}), expected="yes")).passed is True
    score = await judge("exact", case("yes"))
    assert score == EvalScore("exact", NOT_APPLICABLE, None, "no expected.output to compare with")


async def test_the_score_key_defaults_to_the_registry_key_and_params_may_rename_it() -> None:
    same = case("a", {"output": "a"})
    assert (await judge("exact", same)).key == "exact"
    assert (await judge("exact", same, key="exact-fr")).key == "exact-fr"


# --- contains ------------------------------------------------------------------------------


async def test_contains_defaults_to_the_expected_output() -> None:
    answer = "The capital of France is Paris."
    assert (await judge("contains", case(answer, {"output": "Paris"}))).passed is True
    assert (await judge("contains", case(answer, {"output": "Lyon"}))).passed is False
    assert (await judge("contains", case(answer))).value == NOT_APPLICABLE


async def test_token_f1_grades_the_word_overlap_with_a_whole_reference_answer() -> None:
    reference = {"output": "The with statement wraps a block in a context manager."}
    answer = "A with statement runs its block inside a context manager."
    close = await judge("token_f1", case(answer, reference))
    assert (close.value, close.passed) == (0.7, True)  # 7 of 10 words each way
    assert close.comment.startswith("word overlap F1 ")
    worse = await judge("token_f1", case("I do not know.", reference))
    assert (worse.value, worse.passed) == (0.0, False)
    strict = await judge("token_f1", case("with statement", reference), threshold=0.9)
    assert strict.passed is False
    assert (await judge("token_f1", case("anything"))).value == NOT_APPLICABLE


async def test_contains_all_or_any_of_the_strings() -> None:
    answer = case("Refunds take 14 days by bank transfer.")
    all_of = await judge("contains", answer, strings=["14 days", "card", "cheque"])
    assert all_of.passed is False and all_of.comment == "missing 'card', 'cheque'"
    any_of = await judge("contains", answer, strings=["card", "bank"], mode="any")
    assert any_of.passed is True and any_of.comment == "found 'bank'"
    none_of = await judge("contains", answer, strings=["card", "cash"], mode="any")
    assert none_of.passed is False and none_of.comment == "none of 'card', 'cash'"


async def test_contains_ignore_case_casefolds_both_sides() -> None:
    shouted = case("WELCOME TO THE STRASSE")
    assert (await judge("contains", shouted, strings=["straße"])).passed is False
    assert (await judge("contains", shouted, strings=["straße"], ignore_case=True)).passed


# --- regex ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "answer", "passed"),
    [
        ({"pattern": r"\b14 days\b"}, "It takes 14 days.", True),
        ({"pattern": r"\d+ days", "full_match": True}, "It takes 14 days.", False),
        ({"pattern": r"\d+ days", "full_match": True}, "14 days", True),
        ({"pattern": r"sorry", "negate": True}, "Here you are.", True),
        ({"pattern": r"sorry", "negate": True, "ignore_case": True}, "Sorry!", False),
        ({"pattern": r"^b$", "multiline": True}, "a\nb\nc", True),
        ({"pattern": r"^b$"}, "a\nb\nc", False),
        ({"pattern": r"a.c", "dotall": True}, "a\nc", True),
        ({"pattern": r"a.c"}, "a\nc", False),
    ],
)
async def test_regex(params: dict[str, Any], answer: str, passed: bool) -> None:
    score = await judge("regex", case(answer), **params)
    assert (score.value, score.passed) == (passed, passed)


async def test_regex_comment_says_what_matched() -> None:
    assert (
        await judge("regex", case("Paid 42 EUR"), pattern=r"\d+")
    ).comment == "matched '42' at 5"
    missed = await judge("regex", case("Paid"), pattern=r"\d+")
    assert missed.comment == r"/\d+/ does not match the answer"


# --- json_schema ---------------------------------------------------------------------------

ORDER = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "total": {"type": "number", "minimum": 0}},
    "required": ["id", "total"],
}


async def test_json_schema_validates_against_the_params_schema() -> None:
    assert (await judge("json_schema", case('{"id": 1, "total": 9.5}'), schema=ORDER)).passed
    fenced = '```json\n{"id": 1, "total": 0}\n```'
    assert (await judge("json_schema", case(fenced), schema=ORDER)).passed is True
    wrong = await judge("json_schema", case('{"id": 1, "total": "x"}'), schema=ORDER)
    assert wrong.passed is False and wrong.comment == "total: 'x' is not of type 'number'"
    missing = await judge("json_schema", case('{"id": 1}'), schema=ORDER)
    assert missing.comment == "total: This field is required."


async def test_json_schema_refuses_text_and_nan() -> None:
    prose = await judge("json_schema", case("Sure! Here it is."), schema=ORDER)
    assert prose.passed is False and prose.comment.startswith("the answer is not JSON: ")
    nan = await judge("json_schema", case('{"id": 1, "total": NaN}'), schema=ORDER)
    assert nan.passed is False and nan.comment.startswith(
        "the answer is not JSON: NaN is not JSON (RFC 8259)"
    )


async def test_json_schema_reads_expected_json_as_a_schema_or_as_a_value() -> None:
    answer = '{"ok": true}'
    schema = {"type": "object", "required": ["ok"]}
    assert (await judge("json_schema", case(answer, {"json": schema}))).passed is True
    assert (await judge("json_schema", case("[]", {"json": schema}))).passed is False
    as_value = {"expected_json_as": "value"}
    assert (await judge("json_schema", case(answer, {"json": {"ok": True}}), **as_value)).passed
    # true is not 1 in JSON, though Python says True == 1.
    one = await judge("json_schema", case(answer, {"json": {"ok": 1}}), **as_value)
    assert one.passed is False


async def test_json_schema_without_a_usable_schema_is_not_judged() -> None:
    assert (await judge("json_schema", case("{}"))).value == NOT_APPLICABLE
    broken = await judge("json_schema", case("{}", {"json": {"type": "nonsense"}}))
    assert broken.value == NOT_APPLICABLE and broken.passed is None
    assert broken.comment.startswith("expected.json is no JSON Schema: ")


# --- retrieval_hit_at_k and mrr ------------------------------------------------------------


def retrieved(*metadata: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    return tuple(
        {"id": str(i), "metadata": m, "score": 0.9 - i / 10} for i, m in enumerate(metadata)
    )


TOPICS = retrieved(
    *({"topic": t} for t in ("lexical", "datamodel", "expressions", "compound_stmts", "import"))
)


def about(*accepted: str, documents: tuple[dict[str, Any], ...] = TOPICS) -> Any:
    return case("answer", {"documents": {"topic": list(accepted)}}, documents=documents)


async def test_hit_at_k_counts_only_the_first_k_documents() -> None:
    hit = await judge("retrieval_hit_at_k", about("expressions", "simple_stmts"), k=3)
    assert hit == EvalScore("retrieval_hit_at_k", True, True, "first accepted document at rank 3")
    miss = await judge("retrieval_hit_at_k", about("expressions"), k=2)
    assert miss.passed is False
    assert miss.comment == "no accepted document in the top 2 (2 considered)"
    # Rank 5, and k defaults to 4 (retrieval's default top_k).
    assert (await judge("retrieval_hit_at_k", about("import"))).passed is False
    assert (await judge("retrieval_hit_at_k", about("import", documents=()))).passed is False


async def test_hit_at_k_matches_every_listed_key_or_any() -> None:
    documents = retrieved(
        {"source": "faq.md", "section": "shipping"}, {"source": "faq.md", "section": "refunds"}
    )
    expected = {"documents": {"source": ["faq.md"], "section": ["refunds"]}}
    both = await judge("retrieval_hit_at_k", case("a", expected, documents=documents))
    assert both.comment == "first accepted document at rank 2"
    either = await judge("retrieval_hit_at_k", case("a", expected, documents=documents), keys="any")
    assert either.comment == "first accepted document at rank 1"


async def test_metadata_values_compare_as_json_and_lists_match_by_element() -> None:
    documents = retrieved({"page": "3"}, {"page": True}, {"page": 3.0}, {"tags": ["a", "b"]})
    page = await judge("mrr", case("a", {"documents": {"page": [3]}}, documents=documents))
    assert page.value == pytest.approx(1 / 3)  # "3" and true are not 3; 3.0 is
    tags = await judge("mrr", case("a", {"documents": {"tags": ["b"]}}, documents=documents))
    assert tags.value == 0.25


async def test_mrr_is_the_reciprocal_rank_with_an_optional_threshold() -> None:
    assert await judge("mrr", about("datamodel")) == EvalScore(
        "mrr", 0.5, None, "first accepted document at rank 2"
    )
    assert (await judge("mrr", about("nothing"))).value == 0.0
    assert (await judge("mrr", about("import"), k=4)).value == 0.0
    assert (await judge("mrr", about("import"))).value == 0.2
    passed = await judge("mrr", about("datamodel"), threshold=0.5)
    failed = await judge("mrr", about("expressions"), threshold=0.5)
    assert (passed.passed, failed.passed) == (True, False)


@pytest.mark.parametrize("key", ["retrieval_hit_at_k", "mrr"])
async def test_retrieval_without_expected_documents_is_not_judged(key: str) -> None:
    assert (await judge(key, case("a", documents=TOPICS))).value == NOT_APPLICABLE
    malformed = await judge(key, case("a", {"documents": {"topic": "lexical"}}, documents=TOPICS))
    assert malformed.value == NOT_APPLICABLE and malformed.passed is None


# --- tool_call_match -----------------------------------------------------------------------

WEATHER = {"name": "weather", "arguments": '{"city": "Paris", "unit": "C"}'}
TIME = {"name": "time", "arguments": {"zone": "Europe/Paris"}}


def calls(expected: list[dict[str, Any]], *made: dict[str, Any]) -> Any:
    return case("done", {"tool_calls": expected}, tool_calls=made)


async def test_tool_calls_by_name_and_by_a_subset_of_arguments() -> None:
    assert (await judge("tool_call_match", calls([{"name": "weather"}], WEATHER))).passed
    city = [{"name": "weather", "arguments": {"city": "Paris"}}]
    assert (await judge("tool_call_match", calls(city, WEATHER))).passed is True
    exact = await judge("tool_call_match", calls(city, WEATHER), arguments="exact")
    assert exact.passed is False and exact.comment == 'not called: weather({"city": "Paris"})'
    lyon = [{"name": "weather", "arguments": '{"city": "Lyon"}'}]
    assert (await judge("tool_call_match", calls(lyon, WEATHER))).passed is False


async def test_tool_call_arguments_that_are_not_json_never_match() -> None:
    broken = {"name": "weather", "arguments": '{"city": "Par'}
    expected = [{"name": "weather", "arguments": {"city": "Paris"}}]
    assert (await judge("tool_call_match", calls(expected, broken))).passed is False
    assert (await judge("tool_call_match", calls([{"name": "weather"}], broken))).passed is True


async def test_tool_call_order_and_extra_calls() -> None:
    expected = [{"name": "time"}, {"name": "weather"}]
    assert (await judge("tool_call_match", calls(expected, WEATHER, TIME))).passed is True
    ordered = await judge("tool_call_match", calls(expected, WEATHER, TIME), ordered=True)
    assert ordered.passed is False and ordered.comment == "not called in that order: weather"
    between = calls(expected, TIME, {"name": "search"}, WEATHER)
    assert (await judge("tool_call_match", between, ordered=True)).passed is True
    strict = await judge("tool_call_match", between, allow_extra=False)
    assert strict.passed is False and strict.comment == "unexpected: search"


async def test_each_expected_call_needs_its_own_call() -> None:
    # The loose expectation must not take the only call the strict one can use.
    expected = [{"name": "weather"}, {"name": "weather", "arguments": {"city": "Paris"}}]
    other = {"name": "weather", "arguments": {"city": "Lyon"}}
    assert (await judge("tool_call_match", calls(expected, WEATHER, other))).passed is True
    assert (await judge("tool_call_match", calls(expected, WEATHER))).passed is False


async def test_an_empty_expected_list_means_no_tool_and_none_means_not_judged() -> None:
    assert (await judge("tool_call_match", calls([]))).comment == "no tool was called, as expected"
    assert (await judge("tool_call_match", calls([], TIME))).passed is True  # extras allowed
    assert (await judge("tool_call_match", calls([], TIME), allow_extra=False)).passed is False
    assert (await judge("tool_call_match", case("a", tool_calls=[TIME]))).value == NOT_APPLICABLE


# --- latency_under and cost_under ----------------------------------------------------------


async def test_latency_under_is_strict_and_unknown_latency_is_not_judged() -> None:
    assert await judge("latency_under", case(latency_ms=499.5), threshold_ms=500) == EvalScore(
        "latency_under", True, True, "499.5 ms < 500 ms"
    )
    assert (await judge("latency_under", case(latency_ms=500), threshold_ms=500)).passed is False
    unknown = await judge("latency_under", case(), threshold_ms=500)
    assert (unknown.value, unknown.passed) == (UNKNOWN, None)


async def test_cost_under_compares_decimals_and_does_not_take_unknown_for_zero() -> None:
    cheap = await judge("cost_under", case(cost=Decimal("0.0012000")), threshold="0.002")
    assert cheap == EvalScore("cost_under", True, True, "0.0012 USD < 0.002 USD")
    dear = await judge("cost_under", case(cost=Decimal("0.5")), threshold=0.1, currency="EUR")
    assert dear.passed is False and dear.comment == "0.5 EUR ≥ 0.1 EUR"
    unknown = await judge("cost_under", case(), threshold="0.002")
    assert (unknown.value, unknown.passed) == (UNKNOWN, None)
    assert unknown.comment.startswith("cost unknown")


# --- comments ------------------------------------------------------------------------------


async def test_comments_quoting_the_answer_are_storable() -> None:
    score = await judge("exact", case("a\x00b" + "x" * 5000, {"output": "\ud800" * 3000}))
    assert "\x00" not in score.comment and "\ud800" not in score.comment
    assert len(score.comment) <= MAX_COMMENT_CHARS
    score.comment.encode("utf-8")
