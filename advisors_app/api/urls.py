"""Routes of the REST API (included by ``advisors_app.urls`` under ``api/``)."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from advisors_app.api.errors import api_not_found
from advisors_app.api.views.approvals import (
    ApprovalDecisionView,
    ApprovalDetailView,
    ApprovalListView,
    ConversationGrantDetailView,
    ConversationGrantListView,
)
from advisors_app.api.views.chains import ChainDetailView, ChainListView
from advisors_app.api.views.chat import ChainCallView, ChainStreamView
from advisors_app.api.views.conversations import ConversationDetailView, ConversationListView
from advisors_app.api.views.documents import (
    CollectionDetailView,
    CollectionListView,
    DocumentDetailView,
    DocumentListView,
    DocumentSearchView,
    IngestionDetailView,
    IngestionListView,
)
from advisors_app.api.views.evaluation import EvalRunCompareView
from advisors_app.api.views.experiments import (
    ChainExperimentListView,
    ExperimentActionView,
    ExperimentConcludeView,
    ExperimentDetailView,
    ExperimentResultsView,
)
from advisors_app.api.views.feedback import MessageFeedbackView
from advisors_app.api.views.online import ChainOnlineEvaluationListView
from advisors_app.api.views.protocols import (
    ChainAgUiView,
    ChainAiSdkStreamView,
    ChainAiSdkView,
)
from advisors_app.api.views.recall import ConversationSearchView
from advisors_app.api.views.usage import UsageView
from advisors_app.api.views.versions import (
    ChainDiffView,
    ChainLabelDetailView,
    ChainLabelHistoryView,
    ChainLabelListView,
    ChainLabelRollbackView,
    ChainVersionDetailView,
    ChainVersionListView,
    ChainVersionRestoreView,
)

__all__ = ["urlpatterns"]

_CHAIN = "chains/<slug:slug>/"
_LABEL = _CHAIN + "labels/<str:name>/"

urlpatterns: list[URLPattern | URLResolver] = [
    path("chains/", ChainListView.as_view(), name="api-chains"),
    path("chains/<slug:slug>/", ChainDetailView.as_view(), name="api-chain"),
    path("chains/<slug:slug>/call/", ChainCallView.as_view(), name="api-chain-call"),
    path("chains/<slug:slug>/stream/", ChainStreamView.as_view(), name="api-chain-stream"),
    path(_CHAIN + "ag-ui/", ChainAgUiView.as_view(), name="api-chain-ag-ui"),
    path(_CHAIN + "ai-sdk/", ChainAiSdkView.as_view(), name="api-chain-ai-sdk"),
    path(
        _CHAIN + "ai-sdk/<str:chat_id>/stream/",
        ChainAiSdkStreamView.as_view(),
        name="api-chain-ai-sdk-stream",
    ),
    path(_CHAIN + "versions/", ChainVersionListView.as_view(), name="api-chain-versions"),
    path(
        _CHAIN + "versions/<int:number>/",
        ChainVersionDetailView.as_view(),
        name="api-chain-version",
    ),
    path(
        _CHAIN + "versions/<int:number>/restore/",
        ChainVersionRestoreView.as_view(),
        name="api-chain-version-restore",
    ),
    path(_CHAIN + "diff/", ChainDiffView.as_view(), name="api-chain-diff"),
    path(_CHAIN + "labels/", ChainLabelListView.as_view(), name="api-chain-labels"),
    path(_CHAIN + "experiments/", ChainExperimentListView.as_view(), name="api-chain-experiments"),
    path(
        _CHAIN + "online-evaluations/",
        ChainOnlineEvaluationListView.as_view(),
        name="api-chain-online-evaluations",
    ),
    path("experiments/<int:pk>/", ExperimentDetailView.as_view(), name="api-experiment"),
    *(
        path(
            f"experiments/<int:pk>/{action}/",
            ExperimentActionView.as_view(action_name=action),
            name=f"api-experiment-{action}",
        )
        for action in ("start", "pause", "stop")
    ),
    path(
        "experiments/<int:pk>/conclude/",
        ExperimentConcludeView.as_view(),
        name="api-experiment-conclude",
    ),
    path(
        "experiments/<int:pk>/results/",
        ExperimentResultsView.as_view(),
        name="api-experiment-results",
    ),
    path(_LABEL, ChainLabelDetailView.as_view(), name="api-chain-label"),
    path(_LABEL + "history/", ChainLabelHistoryView.as_view(), name="api-chain-label-history"),
    path(_LABEL + "rollback/", ChainLabelRollbackView.as_view(), name="api-chain-label-rollback"),
    path("conversations/", ConversationListView.as_view(), name="api-conversations"),
    path(
        "conversations/<str:conversation_id>/",
        ConversationDetailView.as_view(),
        name="api-conversation",
    ),
    path(
        "conversations/<str:conversation_id>/search/",
        ConversationSearchView.as_view(),
        name="api-conversation-search",
    ),
    path(
        "conversations/<str:conversation_id>/grants/",
        ConversationGrantListView.as_view(),
        name="api-conversation-grants",
    ),
    path(
        "conversations/<str:conversation_id>/grants/<str:tool>/",
        ConversationGrantDetailView.as_view(),
        name="api-conversation-grant",
    ),
    path(
        "messages/<int:message_id>/feedback/",
        MessageFeedbackView.as_view(),
        name="api-message-feedback",
    ),
    path("approvals/", ApprovalListView.as_view(), name="api-approvals"),
    path("approvals/<int:pk>/", ApprovalDetailView.as_view(), name="api-approval"),
    path(
        "approvals/<int:pk>/decision/",
        ApprovalDecisionView.as_view(),
        name="api-approval-decision",
    ),
    path("collections/", CollectionListView.as_view(), name="api-collections"),
    path("collections/<slug:slug>/", CollectionDetailView.as_view(), name="api-collection"),
    path("documents/", DocumentListView.as_view(), name="api-documents"),
    path("documents/search/", DocumentSearchView.as_view(), name="api-documents-search"),
    path("documents/<str:document_id>/", DocumentDetailView.as_view(), name="api-document"),
    path("ingestions/", IngestionListView.as_view(), name="api-ingestions"),
    path("ingestions/<str:job_id>/", IngestionDetailView.as_view(), name="api-ingestion"),
    path("usage/", UsageView.as_view(), name="api-usage"),
    path(
        "eval-runs/<int:a>/compare/<int:b>/",
        EvalRunCompareView.as_view(),
        name="api-eval-run-compare",
    ),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Its set-up script is a file of its own (docs/?script): a Content-Security-Policy that
    # runs no inline script lets Swagger UI run.
    path(
        "docs/",
        SpectacularSwaggerSplitView.as_view(url_name="advisors_app:api-schema"),
        name="api-docs",
    ),
    re_path(r"^[\s\S]*$", api_not_found),  # any path, even one with a newline
]
