"""A chain draft's snapshot: what it holds, and a hash that changes exactly when behaviour can."""

from __future__ import annotations

import pytest

from advisors_app.definition import canonical_json, references_of, resolve_draft, snapshot_hash
from advisors_app.models import AdvisorChain, AdvisorConfig, PromptTemplate, SensitiveWordList
from tests.factories import make_chain

pytestmark = pytest.mark.django_db


def stored_hash(chain: AdvisorChain) -> str:
    """The hash of the chain's draft as stored now."""
    return snapshot_hash(resolve_draft(AdvisorChain.objects.get(pk=chain.pk)))


def test_the_snapshot_holds_the_chain_its_advisors_and_what_they_refer_to() -> None:
    SensitiveWordList.objects.create(slug="bad", words=["bomb"])
    chain = make_chain(
        advisors=(("append", {"text": " B"}, 5), ("append", {"text": " A", "note": "bad"}, 1)),
        system_prompt="Be brief.",
        default_options={"temperature": 0.1},
    )
    AdvisorConfig.objects.create(
        chain=chain, advisor_type="append", params={"text": "x"}, enabled=False
    )
    snapshot = resolve_draft(chain)
    assert {k: v for k, v in snapshot.items() if k not in ("advisors", "references")} == {
        "format": 2,
        "slug": "support",
        "chat_model": "support-model",
        "default_chat_model": None,
        "system_prompt": "Be brief.",
        "system_template": None,
        "default_options": {"temperature": 0.1},
        "tools": [],
    }
    enabled = [(a["order"], a["params"]["text"]) for a in snapshot["advisors"] if a["enabled"]]
    assert enabled == [(1, " A"), (5, " B")]
    assert [a["params"]["text"] for a in snapshot["advisors"] if not a["enabled"]] == ["x"]
    assert snapshot["references"]["word_list:bad"] == {"words": ["bomb"]}
    assert snapshot["references"]["chat_model:support-model"]["provider"] == "scripted"
    assert references_of(snapshot) == ["chat_model:support-model", "word_list:bad"]
    # Canonical: sorted keys, no primary keys, the same hash from the same rows.
    assert canonical_json(snapshot) == canonical_json(dict(reversed(snapshot.items())))
    assert all(set(a) == {"type", "order", "enabled", "params"} for a in snapshot["advisors"])
    assert stored_hash(chain) == snapshot_hash(snapshot)


def test_every_change_to_the_chain_or_its_rows_changes_the_hash() -> None:
    chain = make_chain(advisors=(("append", {"text": "!"}),))
    seen = {stored_hash(chain)}
    row = chain.advisors.get()

    def changed() -> bool:
        digest = stored_hash(chain)
        fresh = digest not in seen
        seen.add(digest)
        return fresh

    row.order = 3
    row.save()
    assert changed()
    row.params = {"text": "?"}
    row.save()
    assert changed()
    row.enabled = False
    row.save()
    assert changed()
    chain.refresh_from_db()
    chain.system_prompt = "New system"
    chain.save()
    assert changed()
    chain.name = "Only a label"
    chain.save()
    assert not changed()  # the name does not affect behaviour
    before_add = stored_hash(chain)
    added = AdvisorConfig.objects.create(chain=chain, advisor_type="append", params={"text": "+"})
    assert changed()
    added.delete()
    assert stored_hash(chain) == before_add


def test_referenced_rows_change_the_hash_of_the_chains_that_use_them() -> None:
    words = SensitiveWordList.objects.create(slug="bad", words=["bomb"])
    other = SensitiveWordList.objects.create(slug="other", words=["x"])
    template = PromptTemplate.objects.create(
        slug="sys", text="You help {name}.", placeholders=["name"]
    )
    chain = make_chain(
        advisors=(("append", {"text": "!", "note": "bad"}),), system_template=template
    )
    bystander = make_chain("bystander")
    before, bystander_before = stored_hash(chain), stored_hash(bystander)

    words.words = ["bomb", "gun"]
    words.save()
    after_words = stored_hash(chain)
    assert after_words != before

    other.words = ["y"]
    other.save()
    assert stored_hash(chain) == after_words

    template.text = "You assist {name}."
    template.save()
    after_template = stored_hash(chain)
    assert after_template != after_words

    model = chain.chat_model
    model.settings = {"responses": ["changed"]}
    model.save()
    assert stored_hash(chain) != after_template
    assert stored_hash(bystander) == bystander_before


def test_a_renamed_referenced_row_resolves_to_none() -> None:
    words = SensitiveWordList.objects.create(slug="bad", words=["bomb"])
    chain = make_chain(advisors=(("append", {"text": "!", "note": "bad"}),), publish=False)
    before = stored_hash(chain)
    words.slug = "renamed"
    words.save()
    assert stored_hash(chain) != before
    assert resolve_draft(chain)["references"]["word_list:bad"] is None
    words.slug = "bad"
    words.save()
    assert stored_hash(chain) == before


def test_a_bulk_update_changes_the_draft_without_any_signal() -> None:
    chain = make_chain(advisors=(("append", {"text": "!"}),))
    before = stored_hash(chain)
    AdvisorConfig.objects.filter(chain=chain).update(order=42)
    assert stored_hash(chain) != before
