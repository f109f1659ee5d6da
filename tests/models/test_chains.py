"""Chain and advisor-row validation: registered types only, params against the type's schema."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from advisors_app.core import HIGHEST_PRECEDENCE
from advisors_app.models import AdvisorChain, AdvisorConfig, PromptTemplate
from tests.factories import make_chain

pytestmark = pytest.mark.django_db


def errors_of(instance: object) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        instance.full_clean()  # type: ignore[attr-defined]
    return caught.value.message_dict


def test_a_valid_advisor_row_passes() -> None:
    chain = make_chain()
    AdvisorConfig(chain=chain, advisor_type="append", params={"text": "!"}).full_clean()


def test_an_unknown_type_is_refused() -> None:
    row = AdvisorConfig(chain=make_chain(), advisor_type="os.system", params={})
    errors = errors_of(row)
    assert list(errors) == ["advisor_type"]
    assert "Unknown advisor type 'os.system'" in errors["advisor_type"][0]


def test_bad_params_name_the_field() -> None:
    row = AdvisorConfig(chain=make_chain(), advisor_type="append", params={"text": 5})
    assert errors_of(row) == {"params": ["text: 5 is not of type 'string'"]}
    row.params = {}
    assert errors_of(row) == {"params": ["text: This field is required."]}


def test_order_must_be_within_the_precedence_range() -> None:
    row = AdvisorConfig(
        chain=make_chain(),
        advisor_type="append",
        params={"text": "!"},
        order=HIGHEST_PRECEDENCE - 1,
    )
    assert list(errors_of(row)) == ["order"]


def test_blank_order_means_the_type_default() -> None:
    row = AdvisorConfig(advisor_type="append", params={"text": "!"})
    assert row.effective_order == 100
    row.order = -5
    assert row.effective_order == -5
    assert AdvisorConfig(advisor_type="gone").effective_order is None


def test_chain_options_are_checked_against_chat_options() -> None:
    chain = make_chain()
    chain.default_options = {"temperature": "hot", "colour": 1}
    errors = errors_of(chain)["default_options"]
    assert "colour: Unknown field. Known fields: extra, frequency_penalty" in errors[0]
    assert "temperature: 'hot' is not of type 'number'" in errors[1]
    chain.default_options = {"temperature": 0.2, "max_tokens": 64, "stop": ["\n"]}
    chain.full_clean()


def test_system_text_and_template_are_exclusive() -> None:
    template = PromptTemplate.objects.create(slug="sys", text="Be brief.")
    chain = make_chain(system_prompt="Be kind.")
    chain.system_template = template
    assert errors_of(chain) == {"system_template": ["Set the system text or a template, not both."]}


def test_slug_is_unique() -> None:
    make_chain("dup")
    with pytest.raises(ValidationError, match="slug"):
        AdvisorChain(slug="dup", name="Again").full_clean()
