"""Serializers of the API, one module per module of :mod:`advisors_app.api.views`: request
validation for CRUD, and the documented response shapes.

``fields`` holds the field classes they share. Component names in the OpenAPI schema come from
each serializer's ``Meta.ref_name`` (or its class name), never from its module.
"""

# views/chat.py still imports these two from here; once it imports them from
# advisors_app.api.serializers.chat, this re-export goes.
from advisors_app.api.serializers.chat import ChatRequestSerializer, ChatResultSerializer

__all__ = ["ChatRequestSerializer", "ChatResultSerializer"]
