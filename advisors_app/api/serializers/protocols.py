"""The request bodies of the stream-protocol endpoints, for the OpenAPI schema (documentation:
:mod:`advisors_app.protocols` validates)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema_serializer
from rest_framework import serializers

from advisors_app.api.serializers.chat import VersionField

__all__ = ["AgUiRunSerializer", "AiSdkChatSerializer"]


class _ResumeEntrySerializer(serializers.Serializer):
    interruptId = serializers.CharField(help_text="The interrupt's id (the waiting call's id).")
    status = serializers.ChoiceField(["resolved", "cancelled"], help_text="cancelled: reject.")
    payload = serializers.JSONField(
        required=False,
        help_text='{"approved": true|false, "editedArgs"?: {...}, "reason"?, "grant"?}',
    )

    class Meta:
        ref_name = "AgUiResumeEntry"


class _ForwardedPropsSerializer(serializers.Serializer):
    params = serializers.DictField(required=False, help_text="The turn's params.")
    label = serializers.CharField(required=False, help_text="Run this label's version.")
    version = VersionField(required=False, help_text='A version number or "draft".')

    class Meta:
        ref_name = "AgUiForwardedProps"


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "A message",
            value={
                "threadId": "support-42",
                "runId": "run-1",
                "messages": [{"id": "m1", "role": "user", "content": "How do refunds work?"}],
            },
            request_only=True,
        ),
        OpenApiExample(
            "Resume an interrupted run",
            value={
                "threadId": "support-42",
                "runId": "run-2",
                "messages": [],
                "resume": [
                    {"interruptId": "call_1", "status": "resolved", "payload": {"approved": True}}
                ],
            },
            request_only=True,
        ),
    ]
)
class AgUiRunSerializer(serializers.Serializer):
    """AG-UI's ``RunAgentInput``: the last message (the user's) is the turn's message."""

    threadId = serializers.CharField(
        max_length=128, help_text="The conversation (a new id starts one)."
    )
    runId = serializers.CharField(max_length=255, help_text="Echoed in RUN_STARTED/FINISHED.")
    messages = serializers.ListField(
        child=serializers.DictField(),
        help_text="AG-UI messages; the last, role user, is the new message.",
    )
    resume = _ResumeEntrySerializer(
        many=True, required=False, help_text="Answers to the interrupts of the paused run."
    )
    forwardedProps = _ForwardedPropsSerializer(required=False)
    tools = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="Not read."
    )
    context = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="Not read."
    )
    state = serializers.JSONField(required=False, help_text="Not read.")

    class Meta:
        ref_name = "AgUiRunAgentInput"


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "A message",
            value={
                "id": "chat-42",
                "trigger": "submit-message",
                "messages": [
                    {
                        "id": "m1",
                        "role": "user",
                        "parts": [{"type": "text", "text": "How do refunds work?"}],
                    }
                ],
            },
            request_only=True,
        )
    ]
)
class AiSdkChatSerializer(serializers.Serializer):
    """The body ``useChat`` (``DefaultChatTransport``) sends."""

    id = serializers.CharField(max_length=128, help_text="The chat: the conversation.")
    messages = serializers.ListField(
        child=serializers.DictField(),
        help_text="UIMessages; the last user message's text parts are the turn's message.",
    )
    trigger = serializers.ChoiceField(["submit-message"], required=False)
    messageId = serializers.CharField(required=False, help_text="Not read.")
    params = serializers.DictField(required=False, help_text="The turn's params.")
    label = serializers.CharField(required=False, help_text="Run this label's version.")
    version = VersionField(required=False, help_text='A version number or "draft".')

    class Meta:
        ref_name = "AiSdkChat"
