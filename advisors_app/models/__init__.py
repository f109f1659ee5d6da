"""The app's models, one submodule per area (memory, documents, chains, ...).

Django looks for models in ``advisors_app.models``: each submodule's models are imported here so
that they register, and so that ``from advisors_app.models import X`` works for every model.
"""

from advisors_app.models.approvals import ToolApproval, ToolApprovalGrant
from advisors_app.models.audit import AuditEntry
from advisors_app.models.cache import SemanticCacheEntry
from advisors_app.models.call_logs import CallLog
from advisors_app.models.chains import AdvisorChain, AdvisorConfig, VersionPolicy
from advisors_app.models.costs import Budget, BudgetCounter, BudgetReservation, ModelPrice
from advisors_app.models.documents import Collection, Document
from advisors_app.models.evaluation import (
    Dataset,
    DatasetItem,
    EvalResult,
    EvalRun,
    PromotionGate,
    items_as_of,
)
from advisors_app.models.experiments import Experiment, ExperimentArm, ExperimentEvent
from advisors_app.models.ingestion import IngestionFile, IngestionJob
from advisors_app.models.mcp import McpServer
from advisors_app.models.memory import ChatMessage, Conversation
from advisors_app.models.model_configs import ChatModelConfig, EmbeddingModelConfig
from advisors_app.models.online import OnlineEvaluation
from advisors_app.models.resources import PromptTemplate, SensitiveWordList
from advisors_app.models.scores import Score
from advisors_app.models.sessions import ConversationBoundary
from advisors_app.models.versions import PRODUCTION, ChainLabel, ChainLabelEvent, ChainVersion

__all__ = [
    "PRODUCTION",
    "AdvisorChain",
    "AdvisorConfig",
    "AuditEntry",
    "Budget",
    "BudgetCounter",
    "BudgetReservation",
    "CallLog",
    "ChainLabel",
    "ChainLabelEvent",
    "ChainVersion",
    "ChatMessage",
    "ChatModelConfig",
    "Collection",
    "Conversation",
    "ConversationBoundary",
    "Dataset",
    "DatasetItem",
    "Document",
    "EmbeddingModelConfig",
    "EvalResult",
    "EvalRun",
    "Experiment",
    "ExperimentArm",
    "ExperimentEvent",
    "IngestionFile",
    "IngestionJob",
    "McpServer",
    "ModelPrice",
    "OnlineEvaluation",
    "PromotionGate",
    "PromptTemplate",
    "Score",
    "SemanticCacheEntry",
    "SensitiveWordList",
    "ToolApproval",
    "ToolApprovalGrant",
    "VersionPolicy",
    "items_as_of",
]
