"""Framework-agnostic advisor engine: nothing below this package imports Django.

Everything in ``shared/API.md`` under ``advisors_app.core`` is importable from here.
"""

from __future__ import annotations

from .advisor import (
    DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
    DEFAULT_TOOL_CALLING_ORDER,
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    Advisor,
    AdvisorRole,
    BaseAdvisor,
    CallAdvisor,
    MemoryAdvisor,
    StreamAdvisor,
    ToolAdvisor,
    has_role,
)
from .aggregation import (
    ChatClientMessageAggregator,
    ChatClientResponseAccumulator,
    ChatResponseAccumulator,
    MessageAggregator,
)
from .attributes import (
    CHAT_MODEL_OVERRIDE,
    CONVERSATION_ID,
    OUTPUT_FORMAT,
    OWNER,
    STRUCTURED_OUTPUT_NATIVE,
    STRUCTURED_OUTPUT_SCHEMA,
    TOOL_CALLING_AUTO_REGISTER,
)
from .chain import (
    CallAdvisorChain,
    ChatModelCallAdvisor,
    ChatModelStreamAdvisor,
    DefaultAroundAdvisorChain,
    StreamAdvisorChain,
)
from .client import CallResponseSpec, ChatClient, ChatClientRequestSpec, StreamResponseSpec
from .decision import Decision, DecisionModel
from .exceptions import (
    AdvisorStateError,
    AuthenticationError,
    BadRequestError,
    BudgetExceededError,
    ContextOverflowError,
    MalformedResponseError,
    ModelFailure,
    OutputValidationError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitedError,
    ToolCallLimitExceededError,
)
from .finish_reasons import FinishReasonCategory, finish_category
from .mappings import ReadOnlyMap
from .messages import (
    AssistantMessage,
    Media,
    Message,
    MessageType,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    message_from_dict,
)
from .model import ChatModel, EmbeddingModel
from .observation import AdvisorObserver
from .prompt import ChatOptions, Prompt, ToolCallingChatOptions, merge_options
from .providers.scripted import ScriptedChatModel
from .requests import ChatClientRequest, ChatClientResponse
from .response import ChatGenerationMetadata, ChatResponse, ChatResponseMetadata, Generation, Usage
from .templates import PromptTemplate
from .testing import RecordingAdvisor
from .tools.approval import ToolCallDecision
from .usage import UsageAccumulator

__all__ = [
    "CHAT_MODEL_OVERRIDE",
    "CONVERSATION_ID",
    "DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER",
    "DEFAULT_TOOL_CALLING_ORDER",
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "OUTPUT_FORMAT",
    "OWNER",
    "STRUCTURED_OUTPUT_NATIVE",
    "STRUCTURED_OUTPUT_SCHEMA",
    "TOOL_CALLING_AUTO_REGISTER",
    "Advisor",
    "AdvisorObserver",
    "AdvisorRole",
    "AdvisorStateError",
    "AssistantMessage",
    "AuthenticationError",
    "BadRequestError",
    "BaseAdvisor",
    "BudgetExceededError",
    "CallAdvisor",
    "CallAdvisorChain",
    "CallResponseSpec",
    "ChatClient",
    "ChatClientMessageAggregator",
    "ChatClientRequest",
    "ChatClientRequestSpec",
    "ChatClientResponse",
    "ChatClientResponseAccumulator",
    "ChatGenerationMetadata",
    "ChatModel",
    "ChatModelCallAdvisor",
    "ChatModelStreamAdvisor",
    "ChatOptions",
    "ChatResponse",
    "ChatResponseAccumulator",
    "ChatResponseMetadata",
    "ContextOverflowError",
    "Decision",
    "DecisionModel",
    "DefaultAroundAdvisorChain",
    "EmbeddingModel",
    "FinishReasonCategory",
    "Generation",
    "MalformedResponseError",
    "Media",
    "MemoryAdvisor",
    "Message",
    "MessageAggregator",
    "MessageType",
    "ModelFailure",
    "OutputValidationError",
    "Prompt",
    "PromptTemplate",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "RateLimitedError",
    "ReadOnlyMap",
    "RecordingAdvisor",
    "ScriptedChatModel",
    "StreamAdvisor",
    "StreamAdvisorChain",
    "StreamResponseSpec",
    "SystemMessage",
    "ToolAdvisor",
    "ToolCall",
    "ToolCallDecision",
    "ToolCallLimitExceededError",
    "ToolCallingChatOptions",
    "ToolResponse",
    "ToolResponseMessage",
    "Usage",
    "UsageAccumulator",
    "UserMessage",
    "finish_category",
    "has_role",
    "merge_options",
    "message_from_dict",
]
