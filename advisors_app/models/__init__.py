"""The app's models, one submodule per area (memory, documents, chains, ...).

Django looks for models in ``advisors_app.models``: each submodule's models are imported here so
that they register, and so that ``from advisors_app.models import X`` works for every model.
"""

from .call_logs import CallLog
from .chains import AdvisorChain, AdvisorConfig
from .model_configs import ChatModelConfig, EmbeddingModelConfig
from .resources import PromptTemplate, SensitiveWordList

__all__ = [
    "AdvisorChain",
    "AdvisorConfig",
    "CallLog",
    "ChatModelConfig",
    "EmbeddingModelConfig",
    "PromptTemplate",
    "SensitiveWordList",
]
