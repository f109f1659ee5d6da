"""The chat-memory models: importable from advisors_app.models, constraints in the database."""

from __future__ import annotations

import pytest
from django.db import IntegrityError

from advisors_app import models
from advisors_app.models import ChatMessage, Conversation


def test_models_are_exported_from_the_models_package():
    assert {"Conversation", "ChatMessage"} <= set(models.__all__)


@pytest.mark.django_db
def test_a_sequence_number_is_unique_within_a_conversation():
    first = Conversation.objects.create(conversation_id="a" * 255)
    other = Conversation.objects.create(conversation_id="b")
    ChatMessage.objects.create(conversation=first, sequence=1, message_type="user", text="x")
    ChatMessage.objects.create(conversation=other, sequence=1, message_type="user", text="y")
    with pytest.raises(IntegrityError):
        ChatMessage.objects.create(conversation=first, sequence=1, message_type="user", text="z")


@pytest.mark.django_db
def test_conversation_ids_are_unique():
    Conversation.objects.create(conversation_id="c1")
    with pytest.raises(IntegrityError):
        Conversation.objects.create(conversation_id="c1")
