"""Refused input: checked before anything runs (``turn.input``, then the ``open`` stage's
checks that need the chain), refused with every field's errors, nothing stored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from advisors_app.definition.runtime import clear_cache
from advisors_app.models import CallLog, Conversation
from advisors_app.turn import call_turn, stream_turn
from advisors_app.turn.events import TurnError, error_event
from tests.turn_helpers import script, script_chain

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def chain() -> Any:
    return script_chain()


@pytest.mark.parametrize(
    ("kwargs", "code", "status", "errors"),
    [
        ({"message": "   "}, "invalid", 400, {"message": ["This field may not be blank."]}),
        ({"message": 5}, "invalid", 400, {"message": ["Not a valid string."]}),
        (
            {"message": "x" * 11},
            "invalid",
            400,
            {"message": ["Ensure this field has no more than 10 characters (it has 11)."]},
        ),
        ({"chain": "nope"}, "chain_not_found", 404, {"chain": ["No enabled chain 'nope'."]}),
        (
            {"conversation_id": "../etc"},
            "invalid",
            400,
            {
                "conversation_id": [
                    "Use at most 128 letters, digits and ._:- (starting with a letter or digit)."
                ]
            },
        ),
        (
            {"params": {"colour": "red"}},
            "invalid",
            400,
            {"params.colour": ["Unknown field. Known fields: append_flag, options."]},
        ),
        (
            {"params": {"options": {"temperature": "hot"}}},
            "invalid",
            400,
            {"params.options.temperature": ["'hot' is not of type 'number'"]},
        ),
        (
            {"params": {"append_flag": "yes"}},
            "invalid",
            400,
            {"params.append_flag": ["'yes' is not of type 'boolean'"]},
        ),
        ({"params": ["not", "an", "object"]}, "invalid", 400, {"params": ["Enter a JSON object."]}),
    ],
)
@override_settings(ADVISORS={"MAX_MESSAGE_CHARS": 10})
async def test_invalid_input_is_refused_before_anything_is_stored(
    chain: Any, user: Any, kwargs: dict, code: str, status: int, errors: dict
) -> None:
    model = await script(chain.slug, "never")
    call = {"chain": chain.slug, "user": user, "message": "hi", **kwargs}
    for run in (call_turn, stream_turn):
        with pytest.raises(TurnError) as caught:
            await run(**call)
        assert (caught.value.code, caught.value.http_status) == (code, status)
        assert caught.value.errors == errors
        payload = error_event(caught.value).to_dict()
        assert payload["type"] == "error" and payload["code"] == code
        assert payload["errors"] == errors
    assert model.prompts == []
    assert not await Conversation.objects.aexists()
    assert not await CallLog.objects.aexists()


async def test_anonymous_users_and_disabled_chains_are_refused(chain: Any, user: Any) -> None:
    with pytest.raises(TurnError) as caught:
        await call_turn(chain.slug, AnonymousUser(), "hi")
    assert (caught.value.code, caught.value.http_status) == ("not_authenticated", 401)
    chain.enabled = False
    await chain.asave()
    with pytest.raises(TurnError) as caught:
        await call_turn(chain.slug, user, "hi")
    assert caught.value.code == "chain_not_found"
