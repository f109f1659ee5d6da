"""Evaluation datasets (issue 22): versioned items read as of a time, and the JSON files of
``dataset_import`` / ``dataset_export``."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from advisors_app.evaluation.datasets import import_items, input_key, parse_items
from advisors_app.models import Dataset, DatasetItem, items_as_of

pytestmark = pytest.mark.django_db

ITEMS: list[dict[str, Any]] = [
    {
        "key": "refunds",
        "input": {"message": "How long do refunds take?"},
        "expected": {"output": "5 days", "documents": {"topic": ["refunds"]}},
        "tags": ["billing"],
    },
    {
        "input": {
            "message": "And for a bank transfer?",
            "history": [
                {"role": "user", "content": "Refunds?"},
                {"role": "assistant", "content": "5 days."},
            ],
            "params": {"options": {"temperature": 0}},
        },
        "expected": {"tool_calls": [{"name": "lookup", "arguments": {"q": "transfer"}}]},
    },
]


def write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_an_edit_is_a_new_version_and_the_old_one_is_still_there_as_of_before() -> None:
    dataset = Dataset.objects.create(slug="faq")
    start = timezone.now() - timedelta(hours=3)
    import_items(dataset, parse_items(ITEMS), at=start)
    edited = json.loads(json.dumps(ITEMS))
    edited[0]["expected"]["output"] = "five days"
    report = import_items(dataset, parse_items(edited), at=start + timedelta(hours=1))
    assert (report.changed, report.created, len(report.unchanged)) == (["refunds"], [], 1)
    removal = import_items(
        dataset, parse_items(edited[:1]), prune=True, at=start + timedelta(hours=2)
    )
    assert removal.closed == [input_key(ITEMS[1]["input"])] and removal.unchanged == ["refunds"]

    def expected_output(at: Any) -> list[Any]:
        items = items_as_of(dataset, at)
        return sorted((item.expected.get("output") or "-" for item in items), reverse=True)

    assert expected_output(start - timedelta(seconds=1)) == []
    assert expected_output(start) == ["5 days", "-"]
    assert expected_output(start + timedelta(minutes=59)) == ["5 days", "-"]
    assert expected_output(start + timedelta(hours=1)) == ["five days", "-"]
    assert expected_output(start + timedelta(hours=2)) == ["five days"]
    assert expected_output(None) == ["five days"]
    assert [i.expected.get("output") for i in dataset.current_items()] == ["five days"]
    assert DatasetItem.objects.filter(dataset=dataset).count() == 3  # nothing was overwritten


def test_a_key_has_one_current_version_only() -> None:
    from django.db import IntegrityError, transaction

    dataset = Dataset.objects.create(slug="faq")
    DatasetItem.objects.create(dataset=dataset, key="a", input={"message": "x"})
    with pytest.raises(IntegrityError), transaction.atomic():
        DatasetItem.objects.create(dataset=dataset, key="a", input={"message": "y"})


def test_items_without_a_key_get_a_stable_one_from_their_input() -> None:
    first = parse_items(ITEMS)[1]["key"]
    assert first == parse_items(list(reversed(ITEMS)))[0]["key"] == input_key(ITEMS[1]["input"])
    assert len(first) == 16


def test_import_then_export_gives_the_file_back(tmp_path: Path) -> None:
    out = StringIO()
    call_command("dataset_import", str(write(tmp_path, "faq-set.json", ITEMS)), stdout=out)
    assert "Dataset 'faq-set' (new dataset): 2 added" in out.getvalue()
    exported = StringIO()
    call_command("dataset_export", "faq-set", stdout=exported)
    data = json.loads(exported.getvalue())
    assert data == sorted(
        ({**item, "key": item.get("key") or input_key(item["input"])} for item in ITEMS),
        key=lambda item: item["key"],
    )
    # Importing the export again changes nothing; --slug names another dataset.
    again = StringIO()
    call_command(
        "dataset_import", str(write(tmp_path, "x.json", data)), "--slug", "faq-set", stdout=again
    )
    assert "0 added, 0 changed, 2 unchanged" in again.getvalue()
    assert DatasetItem.objects.count() == 2


def test_export_as_of_a_time(tmp_path: Path) -> None:
    dataset = Dataset.objects.create(slug="faq")
    import_items(dataset, parse_items(ITEMS[:1]), at=timezone.now() - timedelta(days=2))
    import_items(dataset, parse_items(ITEMS))
    out = StringIO()
    as_of = (timezone.now() - timedelta(days=1)).isoformat()
    call_command("dataset_export", "faq", "--as-of", as_of, stdout=out)
    assert [item["key"] for item in json.loads(out.getvalue())] == ["refunds"]
    with pytest.raises(CommandError, match="not a date"):
        call_command("dataset_export", "faq", "--as-of", "yesterday")
    with pytest.raises(CommandError, match="No dataset 'nope'"):
        call_command("dataset_export", "nope")


def test_every_problem_of_a_file_is_reported_and_nothing_is_stored(tmp_path: Path) -> None:
    bad = [
        {"key": "a", "input": {"message": ""}, "expected": {"output": 3}},
        {"input": {"message": "ok", "history": [{"role": "system", "content": "x"}]}},
        {"key": "c", "input": {"message": "x"}, "expected": {"documents": {"topic": "x"}}},
        {"key": "c", "input": {"message": "y"}, "colour": "red"},
        "nope",
    ]
    with pytest.raises(CommandError) as caught:
        call_command("dataset_import", str(write(tmp_path, "bad.json", bad)))
    text = str(caught.value)
    for line in (
        "item 0 (key 'a'): input.message: expected a non-blank string",
        "item 0 (key 'a'): expected.output: expected a string",
        "item 1: input.history",
        "item 2 (key 'c'): expected.documents",
        "item 3 (key 'c'): unknown field 'colour'",
        "item 4: expected an object",
    ):
        assert line in text
    assert not Dataset.objects.exists()
    (tmp_path / "broken.json").write_text("[", encoding="utf-8")
    with pytest.raises(CommandError, match="is not JSON"):
        call_command("dataset_import", str(tmp_path / "broken.json"))
    twice = '[{"key": "a", "key": "b", "input": {"message": "hi"}}]'
    (tmp_path / "twice.json").write_text(twice, encoding="utf-8")
    with pytest.raises(CommandError, match="the key 'key' appears twice"):
        call_command("dataset_import", str(tmp_path / "twice.json"))
    good = write(tmp_path, "good.json", [{"key": "a", "input": {"message": "hi"}}])
    with pytest.raises(CommandError, match="--slug 'Bad Slug!'"):
        call_command("dataset_import", str(good), "--slug", "Bad Slug!")
    assert not Dataset.objects.exists()


def test_import_takes_the_files_name_and_description(tmp_path: Path) -> None:
    """Issue 40: ``dataset_import`` used to ignore the file's ``"name"``."""
    data = {"name": "Refund questions", "description": "What support is asked.", "items": ITEMS}
    out = StringIO()
    call_command("dataset_import", str(write(tmp_path, "refunds.json", data)), stdout=out)
    assert "Dataset 'refunds' (new dataset): 2 added" in out.getvalue()
    dataset = Dataset.objects.get(slug="refunds")
    assert (dataset.name, dataset.description) == ("Refund questions", "What support is asked.")
    # A new name in the file renames it; the same file again changes nothing; --name wins.
    data["name"] = "Refunds"
    out = StringIO()
    call_command("dataset_import", str(write(tmp_path, "refunds.json", data)), stdout=out)
    assert "Dataset 'refunds' (name updated): 0 added, 0 changed, 2 unchanged" in out.getvalue()
    out = StringIO()
    call_command("dataset_import", str(tmp_path / "refunds.json"), stdout=out)
    assert out.getvalue() == "Dataset 'refunds': 0 added, 0 changed, 2 unchanged, 0 removed.\n"
    call_command(
        "dataset_import", str(tmp_path / "refunds.json"), "--name", "Mine", stdout=StringIO()
    )
    assert Dataset.objects.get(slug="refunds").name == "Mine"
    # A list has no name: a new dataset is named by its slug.
    call_command("dataset_import", str(write(tmp_path, "faq.json", ITEMS)), stdout=StringIO())
    assert Dataset.objects.get(slug="faq").name == "faq"


def test_a_name_or_description_that_is_no_text_is_reported(tmp_path: Path) -> None:
    data = {"name": ["x"], "description": 3, "items": [{"key": "a", "input": {"message": ""}}]}
    with pytest.raises(CommandError) as caught:
        call_command("dataset_import", str(write(tmp_path, "odd.json", data)))
    text = str(caught.value)
    for line in (
        "name: expected a string of at most 200 characters",
        "description: expected a string",
        "item 0 (key 'a'): input.message: expected a non-blank string",
    ):
        assert line in text
    assert not Dataset.objects.exists()
