"""Spring's filter language: valid texts become expression trees, invalid texts clear errors."""

from __future__ import annotations

import pytest

from advisors_app.core.vectorstore import (
    And,
    Eq,
    FilterExpressionTextParser,
    Gte,
    In,
    IsNotNull,
    IsNull,
    Lte,
    Ne,
    Nin,
    Not,
    Or,
    resolve_filter,
)

parse = FilterExpressionTextParser().parse


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("country == 'BG'", Eq("country", "BG")),
        ("genre == 'drama' && year >= 2020", And(Eq("genre", "drama"), Gte("year", 2020))),
        ("genre == 'drama' AND year >= 2020", And(Eq("genre", "drama"), Gte("year", 2020))),
        (
            "genre in ['comedy', 'documentary', 'drama']",
            In("genre", ("comedy", "documentary", "drama")),
        ),
        (
            'year >= 2020 OR country == "BG" AND city != "Sofia"',
            Or(Gte("year", 2020), And(Eq("country", "BG"), Ne("city", "Sofia"))),
        ),
        (
            '(year >= 2020 OR country == "BG") AND city NIN ["Sofia", "Plovdiv"]',
            And(Or(Gte("year", 2020), Eq("country", "BG")), Nin("city", ("Sofia", "Plovdiv"))),
        ),
        (
            'isOpen == true AND year >= 2020 AND country IN ["BG", "NL", "US"]',
            And(Eq("isOpen", True), Gte("year", 2020), In("country", ("BG", "NL", "US"))),
        ),
        ("NOT country == 'BG' AND year >= 2020", And(Not(Eq("country", "BG")), Gte("year", 2020))),
        ("NOT country == 'BG' OR year >= 2020", Or(Not(Eq("country", "BG")), Gte("year", 2020))),
        (
            "NOT (country == 'BG' AND year >= 2020)",
            Not(And(Eq("country", "BG"), Gte("year", 2020))),
        ),
        ('NOT country NOT IN ["BG", "NL"]', Not(Nin("country", ("BG", "NL")))),
        (
            "temperature >= -15.6 && temperature <= +20.13",
            And(Gte("temperature", -15.6), Lte("temperature", 20.13)),
        ),
        ("biz_id == 3L", Eq("biz_id", 3)),
        ("'country.1' == 'BG'", Eq("country.1", "BG")),
        ("\"country 1 2 3\" == 'BG'", Eq("country 1 2 3", "BG")),
        ("file_name == 'medicaid-wa-faqs.pdf'", Eq("file_name", "medicaid-wa-faqs.pdf")),
        ("a.b == 1", Eq("a.b", 1)),
        ("notes == 'x' and orders != 2", And(Eq("notes", "x"), Ne("orders", 2))),
        ("a is null || b IS NOT NULL", Or(IsNull("a"), IsNotNull("b"))),
        ("WHERE x == 1", Eq("x", 1)),
    ],
)
def test_valid_texts_parse_to_the_expected_tree(text, expected):
    assert parse(text) == expected


def test_string_escapes_follow_springs_grammar():
    assert parse('stuff == "he\'d say \\"hello\\""').value == 'he\'d say "hello"'
    assert parse("stuff == 'he\\'d'").value == "he'd"
    assert parse("stuff == 'a single backslash: \\\\'").value == "a single backslash: \\"


def test_built_objects_equal_parsed_text_and_flatten():
    assert And(And(Eq("a", 1), Eq("b", 2)), Eq("c", 3)) == parse("a == 1 && b == 2 && c == 3")
    assert (Eq("a", 1) & Eq("b", 2)) == And(Eq("a", 1), Eq("b", 2))
    assert ~Eq("a", 1) == Not(Eq("a", 1))


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("tenant ==", "line 1, column 10"),
        ("a = 1", "line 1, column 3"),
        ("a == 'x' ; DROP TABLE documents", "line 1, column 10"),
        ("a == 1 b == 2", "line 1, column 8"),
        ("a in []", "line 1, column 7"),
        ("a == 1\n&& b ==", "line 2, column 8"),
    ],
)
def test_invalid_text_raises_value_error_naming_the_position(text, position):
    with pytest.raises(ValueError, match=f"Invalid filter expression at {position}"):
        parse(text)


@pytest.mark.parametrize(
    "text",
    [
        "tenant == 't1' OR 1 == 1",
        "tenant == 't1'; DELETE FROM advisors_app_document",
        "tenant == 't1' -- ",
        "tenant == 't1' /* x */",
        "tenant == 't1' UNION SELECT * FROM auth_user",
    ],
)
def test_injection_attempts_are_refused(text):
    with pytest.raises(ValueError, match=r"Invalid filter expression"):
        parse(text)


def test_sql_looking_strings_are_plain_values():
    expression = parse("name == \"x' OR '1'='1\"")
    assert expression == Eq("name", "x' OR '1'='1")
    # A quoted key is a metadata key, never SQL: '1' == '1' compares metadata["1"] with "1".
    assert parse("tenant == '' || '1' == '1'") == Or(Eq("tenant", ""), Eq("1", "1"))


def test_limits_and_non_text_input():
    with pytest.raises(ValueError, match=r"at most 4096"):
        parse("a == 1 || " * 500 + "a == 1")
    with pytest.raises(ValueError, match=r"cannot be null or empty"):
        parse("  ")
    deepest = "(" * 2045 + "a==1" + ")" * 2045
    assert parse(deepest) == Eq("a", 1)


def test_resolve_filter_takes_objects_text_and_blank():
    expression = And(Eq("tenant", "t1"), Gte("year", 2020))
    assert resolve_filter(expression) is expression
    assert resolve_filter("tenant == 't1' && year >= 2020") == expression
    assert resolve_filter("") is None
    assert resolve_filter(None) is None
    with pytest.raises(ValueError, match=r"^qa_filter_expression: Invalid filter expression"):
        resolve_filter("tenant ==", "qa_filter_expression")
    with pytest.raises(ValueError, match=r"qa_filter_expression must be a filter"):
        resolve_filter(42, "qa_filter_expression")
