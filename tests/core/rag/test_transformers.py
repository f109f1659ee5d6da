"""Query transformers: exact templates sent as user text, answers stripped, B22 history."""

from __future__ import annotations

import pytest

from advisors_app.core import (
    AdvisorStateError,
    AssistantMessage,
    ChatClient,
    ScriptedChatModel,
    SystemMessage,
    UserMessage,
)
from advisors_app.core.rag import (
    CompressionQueryTransformer,
    Query,
    RewriteQueryTransformer,
    TranslationQueryTransformer,
)

HISTORY = (
    SystemMessage("sys"),
    UserMessage("Tell me about Oslo"),
    AssistantMessage("Oslo is the capital of Norway."),
)


async def test_rewrite_sends_springs_template_and_keeps_history_and_context():
    model = ScriptedChatModel(["  rewritten query \n"])
    query = Query("what's up with   rust lifetimes??", HISTORY, {"k": "v"})
    result = await RewriteQueryTransformer(model).transform(query)
    assert model.prompts[0].user_message.text == (
        "Given a user query, rewrite it to provide better results when querying a vector store.\n"
        "Remove any irrelevant information, and ensure the query is concise and specific.\n\n"
        "Original query:\nwhat's up with   rust lifetimes??\n\nRewritten query:\n"
    )
    assert result == query.mutate(text="rewritten query")


async def test_rewrite_target_and_blank_answer_returns_the_query():
    model = ScriptedChatModel(["   "])
    query = Query("q")
    transformer = RewriteQueryTransformer(ChatClient(model), target_search_system="web search")
    assert await transformer.transform(query) is query
    assert "when querying a web search." in model.prompts[0].user_message.text


async def test_b22_compression_history_excludes_the_current_question():
    model = ScriptedChatModel(["What is the population of Oslo?"])
    question = UserMessage("What about its population?")
    query = Query(question.text, (*HISTORY, question))
    result = await CompressionQueryTransformer(model).transform(query)
    assert result.text == "What is the population of Oslo?"
    assert model.prompts[0].user_message.text == (
        "Given the following conversation history and a follow-up query, your task is to "
        "synthesize\na concise, standalone query that incorporates the context from the "
        "history.\nEnsure the standalone query is clear, specific, and maintains the user's "
        "intent.\n\nConversation history:\nUSER: Tell me about Oslo\n"
        "ASSISTANT: Oslo is the capital of Norway.\n\n"
        "Follow-up query:\nWhat about its population?\n\nStandalone query:\n"
    )


async def test_translation_template_and_required_language():
    model = ScriptedChatModel(["Hallo"])
    result = await TranslationQueryTransformer(model, "German").transform(Query("Hello"))
    assert result.text == "Hallo"
    assert model.prompts[0].user_message.text == (
        "Given a user query, translate it to German.\n"
        "If the query is already in German, return it unchanged.\n"
        "If you don't know the language of the query, return it unchanged.\n"
        "Do not add explanations nor any other text.\n\n"
        "Original query: Hello\n\nTranslated query:\n"
    )
    with pytest.raises(ValueError, match=r"targetLanguage cannot be null or empty"):
        TranslationQueryTransformer(model, " ")


def test_templates_need_real_placeholders_and_a_model():
    model = ScriptedChatModel([])
    with pytest.raises(ValueError, match=r"placeholders must be present.*: query"):
        RewriteQueryTransformer(model, prompt_template="rewrite the query for {target}")
    with pytest.raises(ValueError, match=r"history"):
        CompressionQueryTransformer(model, prompt_template="history {query}")
    with pytest.raises(AdvisorStateError, match=r"chatClientBuilder cannot be null"):
        RewriteQueryTransformer(None)


async def test_user_text_with_braces_is_not_template_syntax():
    model = ScriptedChatModel(["ok"])
    await RewriteQueryTransformer(model).transform(Query("use {target} and {query}"))
    assert "Original query:\nuse {target} and {query}\n" in model.prompts[0].user_message.text


async def test_transform_none_is_refused():
    with pytest.raises(ValueError, match=r"query cannot be null"):
        await RewriteQueryTransformer(ScriptedChatModel([])).transform(None)
