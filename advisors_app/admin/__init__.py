"""The app's admin: chains (with their versions, labels and the playground), what they refer
to, logs, conversations, documents (with upload), ingestion jobs, tool-call approvals, model
prices and budgets (with the spend report), MCP servers, experiments.

Importing this package registers every ``ModelAdmin`` with the default admin site.
"""

from __future__ import annotations

from advisors_app.admin.approvals import ToolApprovalAdmin, ToolApprovalGrantAdmin
from advisors_app.admin.chains import AdvisorChainAdmin, AdvisorConfigInline
from advisors_app.admin.costs import BudgetAdmin, ModelPriceAdmin
from advisors_app.admin.documents import CollectionAdmin, DocumentAdmin
from advisors_app.admin.evaluation import DatasetAdmin, EvalRunAdmin, PromotionGateAdmin
from advisors_app.admin.experiments import ExperimentAdmin, ExperimentArmInline
from advisors_app.admin.ingestion import IngestionJobAdmin
from advisors_app.admin.logs import CallLogAdmin, ConversationAdmin
from advisors_app.admin.mcp import McpServerAdmin
from advisors_app.admin.online import OnlineEvaluationAdmin
from advisors_app.admin.resources import (
    ChatModelConfigAdmin,
    EmbeddingModelConfigAdmin,
    PromptTemplateAdmin,
    SensitiveWordListAdmin,
)
from advisors_app.admin.scores import ScoreAdmin
from advisors_app.admin.versions import ChainLabelAdmin, ChainLabelEventAdmin, ChainVersionAdmin

__all__ = [
    "AdvisorChainAdmin",
    "AdvisorConfigInline",
    "BudgetAdmin",
    "CallLogAdmin",
    "ChainLabelAdmin",
    "ChainLabelEventAdmin",
    "ChainVersionAdmin",
    "ChatModelConfigAdmin",
    "CollectionAdmin",
    "ConversationAdmin",
    "DatasetAdmin",
    "DocumentAdmin",
    "EmbeddingModelConfigAdmin",
    "EvalRunAdmin",
    "ExperimentAdmin",
    "ExperimentArmInline",
    "IngestionJobAdmin",
    "McpServerAdmin",
    "ModelPriceAdmin",
    "OnlineEvaluationAdmin",
    "PromotionGateAdmin",
    "PromptTemplateAdmin",
    "ScoreAdmin",
    "SensitiveWordListAdmin",
    "ToolApprovalAdmin",
    "ToolApprovalGrantAdmin",
]
