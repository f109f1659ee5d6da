"""Advisor params as forms: the JSON Schema → django-jsonform mapping, where errors go, and
what of the form's filled-in values is stored."""

from __future__ import annotations

import pytest

from advisors_app.admin.param_forms import error_map, form_spec, form_specs, prune_untouched
from advisors_app.definition.registry import AdvisorType, advisor_types
from advisors_app.models import Collection, PromptTemplate, SensitiveWordList
from advisors_app.validation import object_schema

pytestmark = pytest.mark.django_db


def test_enums_are_selects_with_their_default_and_description() -> None:
    spec = form_spec(advisor_types["safe_guard"])
    scope = spec["schema"]["properties"]["scope"]
    assert scope["type"] == "string" and scope["choices"] == ["user", "prompt"]
    assert scope["default"] == "user"
    assert scope["help_text"].endswith('Default: "user".')
    assert scope["title"] == "scope"
    assert spec["default_order"] == advisor_types["safe_guard"].default_order
    assert spec["raw"] == [] and spec["nullable"] == []


def test_references_pick_existing_rows_by_slug() -> None:
    SensitiveWordList.objects.create(slug="weapons", name="Weapons", words=["bomb"])
    SensitiveWordList.objects.create(slug="slurs", words=["x"])
    Collection.objects.create(slug="handbook", name="Handbook")
    PromptTemplate.objects.create(slug="qa", text="{query} {question_answer_context}")
    lists = form_spec(advisor_types["safe_guard"])["schema"]["properties"]["word_lists"]
    assert lists["type"] == "array"
    assert lists["items"]["widget"] == "multiselect"
    assert lists["items"]["choices"] == [
        {"value": "slurs", "title": "slurs"},
        {"value": "weapons", "title": "weapons (Weapons)"},
    ]
    qa = form_specs(advisor_types)["question_answer"]["schema"]["properties"]
    assert qa["collection"]["choices"] == [{"value": "handbook", "title": "handbook (Handbook)"}]
    assert qa["collection"]["title"] == "collection *"  # required
    assert qa["prompt_template"]["choices"] == [{"value": "qa", "title": "qa"}]
    assert "Needs placeholders: {query}" in qa["prompt_template"]["help_text"]


def test_a_reference_kind_with_no_rows_or_unknown_offers_nothing() -> None:
    shout = AdvisorType(
        key="shout",
        label="Shout",
        factory=lambda spec: None,  # type: ignore[arg-type, return-value]
        params_schema=object_schema(
            {
                "collection": {"type": "string", "x-reference": "collection"},
                "gadget": {"type": "string", "x-reference": "gadget"},
            }
        ),
    )
    properties = form_spec(shout)["schema"]["properties"]
    assert properties["collection"]["choices"] == []
    assert properties["gadget"]["choices"] == []


def test_what_the_editor_cannot_draw_is_a_json_box_for_that_param() -> None:
    tool_loop = form_spec(advisor_types["tool_calling"])
    # A map of oneOf values, by tool name: JSON text; the plain params stay fields.
    assert tool_loop["raw"] == ["approval"]
    approval = tool_loop["schema"]["properties"]["approval"]
    assert approval["type"] == "string" and approval["widget"] == "textarea"
    assert approval["help_text"].startswith("JSON. Tool calls that wait")
    assert tool_loop["schema"]["properties"]["max_calls_per_tool"]["type"] == "integer"
    # ["integer", "null"]: an integer field whose clearing sends null.
    assert tool_loop["nullable"] == ["max_identical_calls"]
    identical = tool_loop["schema"]["properties"]["max_identical_calls"]
    assert identical["type"] == "integer" and identical["minimum"] == 1
    structured = form_spec(advisor_types["structured_output_validation"])
    assert structured["raw"] == ["output_json_schema"]  # a free-form object


def test_errors_go_on_their_field() -> None:
    tool_loop = advisor_types["tool_calling"]
    errors = {
        "params.max_calls_per_tool": ["0 is less than the minimum of 1"],
        "params.approval.search": ["'sometimes' is not valid"],
        "params": ["Enter a JSON object."],
    }
    assert error_map(tool_loop, errors) == {
        "max_calls_per_tool": ["0 is less than the minimum of 1"],
        "approval": ["search: 'sometimes' is not valid"],  # inside a JSON box: on the box
    }
    words = {"params.words.1": ["'' is too short"]}
    assert error_map(advisor_types["safe_guard"], words) == {"words§1": ["'' is too short"]}


def test_what_the_form_filled_in_by_itself_is_not_stored() -> None:
    guard = advisor_types["safe_guard"]
    submitted = {
        "words": ["bomb"],
        "word_lists": [],
        "failure_response": "",
        "scope": "user",  # the default, shown by the form
        "whole_words": True,  # changed
        "normalize": True,  # the default
    }
    assert prune_untouched(guard, submitted, {}) == {"words": ["bomb"], "whole_words": True}
    # A param the row had stays, even at its default or blank.
    before = {"scope": "user", "failure_response": ""}
    kept = prune_untouched(guard, submitted, before)
    assert kept["scope"] == "user" and kept["failure_response"] == ""
    # A nullable param cleared to null where the default is not null says "no limit".
    tool_loop = advisor_types["tool_calling"]
    assert prune_untouched(tool_loop, {"max_identical_calls": None}, {}) == {
        "max_identical_calls": None
    }
    assert prune_untouched(tool_loop, {"max_identical_calls": 3}, {}) == {}


def test_reference_params_are_listed_for_the_missing_choice() -> None:
    """The editor adds a stored slug whose row is gone as a "slug (missing)" choice of these."""
    assert form_spec(advisor_types["safe_guard"])["references"] == {"word_lists": "word_list"}
    qa = form_spec(advisor_types["question_answer"])["references"]
    assert qa["collection"] == "collection" and qa["prompt_template"] == "prompt_template"
