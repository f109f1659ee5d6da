"""One id per problem: each check id is raised from one place, at one level, and listed once
in docs/checks.md (django-cors-headers keeps its ids this way: silencing one silences one)."""

from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "advisors_app"
CHECK_ID = re.compile(r"advisors_app\.[EW]\d{3}")
#: A table row of docs/checks.md: | `advisors_app.E001` | error | problem | hint |
DOC_ROW = re.compile(r"^\| `(advisors_app\.[EW]\d{3})` \| (error|warning) \| (.+?) \| (.+) \|$")

#: Calls that raise a finding, and the level each gives it (LintMessage takes it as argument).
LEVEL_OF_CALL = {"Error": "error", "_error": "error", "Warning": "warning", "_warning": "warning"}


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


@functools.cache
def raised_ids() -> dict[str, list[tuple[str, int, str]]]:
    """Every check id written as a literal in the app, with where and at which level.

    A finding's id is the string constant ``"advisors_app.E001"`` given to the call that makes
    it; docstrings and help texts only mention ids inside longer strings, so they do not count.
    """
    found: dict[str, list[tuple[str, int, str]]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            arguments = [*call.args, *(k.value for k in call.keywords)]
            for argument in arguments:
                if not (
                    isinstance(argument, ast.Constant)
                    and isinstance(argument.value, str)
                    and CHECK_ID.fullmatch(argument.value)
                ):
                    continue
                level = LEVEL_OF_CALL.get(_call_name(call), "")
                if _call_name(call) == "LintMessage":
                    level = str(ast.literal_eval(call.args[1]))
                where = str(path.relative_to(ROOT))
                found[argument.value].append((where, call.lineno, level))
    return dict(found)


def documented_ids() -> list[tuple[str, str]]:
    """``(id, level)`` of each table row of docs/checks.md, in page order."""
    rows = []
    for line in (ROOT / "docs" / "checks.md").read_text().splitlines():
        match = DOC_ROW.match(line)
        if match:
            rows.append((match.group(1), match.group(2)))
    return rows


def test_the_scan_finds_the_checks_and_the_lint() -> None:
    found = raised_ids()
    assert {"advisors_app.E001", "advisors_app.W016", "advisors_app.E101"} <= set(found)
    assert {"advisors_app.E113", "advisors_app.E123"} <= set(found)  # lint ids outside lint.py
    assert len(found) > 35


def test_each_id_is_raised_from_one_place() -> None:
    """An id raised from two calls is two messages, so (most likely) two problems; a problem
    with variants builds its message first and raises it from one call."""
    reused = {id_: places for id_, places in raised_ids().items() if len(places) > 1}
    assert reused == {}


def test_each_id_has_the_level_its_letter_says() -> None:
    for id_, places in raised_ids().items():
        levels = {level for _, _, level in places}
        expected = "error" if id_.split(".")[1].startswith("E") else "warning"
        assert levels == {expected}, (id_, places)


def test_each_id_is_listed_once_in_docs_checks_md_with_its_level() -> None:
    rows = documented_ids()
    listed = [id_ for id_, _ in rows]
    assert len(listed) == len(set(listed)), sorted({i for i in listed if listed.count(i) > 1})
    raised = raised_ids()
    assert set(listed) == set(raised)
    for id_, level in rows:
        assert {lvl for _, _, lvl in raised[id_]} == {level}, id_
