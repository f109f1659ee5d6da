"""What changed between two chain snapshots: texts, templates, word lists, advisors."""

from __future__ import annotations

import pytest

from advisors_app.definition import diff_snapshots, resolve_draft
from advisors_app.models import AdvisorChain, PromptTemplate, SensitiveWordList
from tests.factories import make_chain

pytestmark = pytest.mark.django_db


def draft(chain: AdvisorChain) -> dict:
    return resolve_draft(AdvisorChain.objects.get(pk=chain.pk))


def test_the_diff_names_every_kind_of_change() -> None:
    template = PromptTemplate.objects.create(slug="qa", text="Answer {query} from {context}.")
    SensitiveWordList.objects.create(slug="bad", words=["bomb"])
    chain = make_chain(
        advisors=(("append", {"text": "!", "note": "bad"}), ("simple_logger", {})),
        system_prompt="Be brief.",
        system_template=None,
    )
    chain.advisors.create(advisor_type="question_answer", params={"collection": "kb"})
    before = draft(chain)
    chain.system_prompt = "Be thorough."
    chain.save()
    template.text = "Use {context} to answer {query}."
    template.save()
    SensitiveWordList.objects.filter(slug="bad").update(words=["bomb", "gun"])
    chain.advisors.filter(advisor_type="append").update(params={"text": "?", "note": "bad"})
    chain.advisors.filter(advisor_type="simple_logger").delete()
    after = draft(chain)
    diff = diff_snapshots(before, after)
    assert diff["changed"] and diff["from_hash"] != diff["to_hash"]
    assert diff["chain"] == ["system_prompt"]
    assert "-Be brief.\n+Be thorough." in diff["system_prompt"]
    assert diff["word_lists"] == [{"slug": "bad", "added": ["gun"], "removed": []}]
    assert diff["advisors"]["removed"] == [{"type": "simple_logger", "occurrence": 1}]
    assert diff["advisors"]["changed"] == [
        {"type": "append", "occurrence": 1, "params": ["text"], "fields": []}
    ]
    assert '"text": "?"' in diff["text"]


def test_an_unchanged_snapshot_has_an_empty_diff() -> None:
    chain = make_chain(system_prompt="Same.")
    diff = diff_snapshots(draft(chain), draft(chain))
    assert not diff["changed"] and diff["text"] == "" and diff["system_prompt"] == ""
