"""JSON Schema validation: field paths, and filter-expression text parsed while validating."""

from __future__ import annotations

from advisors_app.definition.registry import params_errors
from advisors_app.validation import FILTER_EXPRESSION_FORMAT, json_value_errors, schema_errors

SCHEMA = {
    "type": "object",
    "properties": {"filter": {"type": "string", "format": FILTER_EXPRESSION_FORMAT}},
}


def test_a_filter_expression_is_parsed_and_its_error_names_the_position() -> None:
    assert schema_errors(SCHEMA, {"filter": "genre == 'drama' && year >= 2020"}) == {}
    assert schema_errors(SCHEMA, {"filter": "  "}) == {}  # blank: no filter
    assert schema_errors(SCHEMA, {"filter": "genre = 'drama'"}, "params") == {
        "params.filter": [
            "Invalid filter expression at line 1, column 7: unexpected character '=' in "
            "\"genre = 'drama'\""
        ]
    }


def test_advisor_params_with_a_bad_filter_are_refused_where_they_are_saved() -> None:
    errors = params_errors("question_answer", {"collection": "kb", "filter_expression": "a >"})
    [message] = errors["params.filter_expression"]
    assert message.startswith("Invalid filter expression at line 1, column 4")


def test_what_postgresql_cannot_store_is_refused_by_field_path() -> None:
    value = {
        "a\x00": "x",
        "b": ["ok", "\x00"],
        "c": {"d": "\x00\x00", "e": "lone \ud800"},
        "f": [1.5, float("nan"), float("inf")],
        "g": "a pair 😀 is fine",
    }
    assert json_value_errors(value, "params") == {
        "params.a\x00": ["Null characters are not allowed."],
        "params.b.1": ["Null characters are not allowed."],
        "params.c.d": ["Null characters are not allowed."],
        "params.c.e": ["Unpaired surrogate characters are not allowed."],
        "params.f.1": ["Enter a finite number."],
        "params.f.2": ["Enter a finite number."],
    }
    assert json_value_errors({"text": "no NUL here", "n": None}) == {}
    assert schema_errors({"type": "object"}, {"x": "\x00"}) == {
        "x": ["Null characters are not allowed."]
    }


def test_any_depth_the_json_parser_accepts_is_walked() -> None:
    deep: list = ["\x00"]
    for _ in range(50_000):
        deep = [deep]
    [(path, messages)] = json_value_errors(deep).items()
    assert path.count(".") == 50_000 and messages == ["Null characters are not allowed."]
