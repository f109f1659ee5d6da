"""The app's models, one submodule per area (memory, documents, chains, ...).

Django looks for models in ``advisors_app.models``: each submodule's models are imported here so
that they register, and so that ``from advisors_app.models import X`` works for every model.
"""

from advisors_app.models.audit import AuditEntry
from advisors_app.models.cache import SemanticCacheEntry
from advisors_app.models.documents import Collection, Document
from advisors_app.models.memory import ChatMessage, Conversation

__all__ = [
    "AuditEntry",
    "ChatMessage",
    "Collection",
    "Conversation",
    "Document",
    "SemanticCacheEntry",
]
