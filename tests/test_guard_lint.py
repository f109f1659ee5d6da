"""Lint W124 (issue 38): a guard whose documents or tool rails run inside the advisor that
screens their texts never sees them."""

from __future__ import annotations

import pytest

from advisors_app.definition import check_draft
from advisors_app.models import Collection
from tests.factories import make_chain

pytestmark = pytest.mark.django_db

DROP = [{"check": "prompt_injection", "action": "drop"}]


def ids(chain) -> list[str]:
    return [m.id for m in check_draft(chain).messages]


def test_a_guard_inside_retrieval_or_the_tool_loop_is_warned_about() -> None:
    Collection.objects.create(slug="kb", name="KB")
    rag = ("question_answer", {"collection": "kb"}, 0)
    inside = make_chain("inside", advisors=(rag, ("guard", {"rails": {"documents": DROP}}, 10)))
    [message] = [m for m in check_draft(inside).messages if m.id == "advisors_app.W124"]
    assert "documents rail but runs inside advisor #1 (question_answer)" in message.message
    outside = make_chain("outside", advisors=(rag, ("guard", {"rails": {"documents": DROP}})))
    assert "advisors_app.W124" not in ids(outside)
    looped = make_chain(
        "looped",
        advisors=(("tool_calling", {}), ("guard", {"rails": {"tool_results": DROP}}, 1000)),
    )
    assert "advisors_app.W124" in ids(looped)
    # Input and output rails run in the guard itself: anywhere is fine.
    plain = make_chain(
        "plain",
        advisors=(rag, ("guard", {"rails": {"input": [DROP[0] | {"action": "block"}]}}, 10)),
    )
    assert "advisors_app.W124" not in ids(plain)
