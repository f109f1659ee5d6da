"""The demo chains' descriptions say what the chains do: no promise of tools they lack."""

from __future__ import annotations

import re

import pytest

from advisors_app.demo.loader import _STALE_DESCRIPTIONS, MAIN_CHAIN, ensure_demo_rows
from advisors_app.models import AdvisorChain

pytestmark = pytest.mark.django_db

TOOL_NAMES = re.compile(r"\btools?\b|calculator|clock|python_version|save_note|list_notes", re.I)


def test_a_description_names_tools_only_when_the_chain_has_them() -> None:
    ensure_demo_rows()
    for chain in AdvisorChain.objects.all():
        if not chain.tools:
            assert not TOOL_NAMES.search(chain.description), (chain.slug, chain.description)


def test_a_stale_shipped_description_is_brought_up_to_date_an_edited_one_kept() -> None:
    ensure_demo_rows()
    chain = AdvisorChain.objects.get(slug=MAIN_CHAIN)
    current = chain.description
    (stale,) = _STALE_DESCRIPTIONS[MAIN_CHAIN]
    AdvisorChain.objects.filter(pk=chain.pk).update(description=stale)
    ensure_demo_rows()
    chain.refresh_from_db()
    assert chain.description == current and "tools" not in current
    AdvisorChain.objects.filter(pk=chain.pk).update(description="Our own words about tools.")
    ensure_demo_rows()
    chain.refresh_from_db()
    assert chain.description == "Our own words about tools."
