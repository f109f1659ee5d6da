"""Tool indexes: one contract suite for every index, plus each index's own ranking rules."""

from __future__ import annotations

import hashlib
import math
import re

import pytest

from advisors_app.core.tools.search import (
    KeywordToolIndex,
    RegexToolIndex,
    ToolIndex,
    ToolReference,
    ToolSearchRequest,
    VectorToolIndex,
    tool_fingerprint,
)
from advisors_app.core.tools.search.regex import query_pattern

TOOLS = [
    ToolReference("send_email", "Send an email message to a recipient"),
    ToolReference("getWeather", "Current weather and forecast for a city"),
    ToolReference("book_flight", "Book a flight between two airports"),
    ToolReference("convert_currency", "Convert an amount between currencies"),
]


class HashingEmbeddings:
    """A deterministic bag-of-words embedding: enough for ranking by shared words."""

    dimensions = 64

    async def embed(self, texts):
        vectors = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower()):
                slot = int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dimensions
                vector[slot] += 1.0
            norm = math.sqrt(sum(v * v for v in vector)) or 1.0
            vectors.append([v / norm for v in vector])
        self.calls = getattr(self, "calls", 0) + 1
        return vectors


INDEXES = {
    "regex": RegexToolIndex,
    "keyword": KeywordToolIndex,
    "vector": lambda: VectorToolIndex(HashingEmbeddings()),
}


@pytest.fixture(params=sorted(INDEXES))
def index(request) -> ToolIndex:
    return INDEXES[request.param]()


async def test_contract_best_match_first_and_sessions_isolated(index):
    assert isinstance(index, ToolIndex)
    await index.index_tools("s1", TOOLS)
    response = await index.search(ToolSearchRequest("s1", "weather forecast city"))
    assert response.names[0] == "getWeather"
    assert (await index.search(ToolSearchRequest("s2", "weather"))).names == []
    assert (await index.search(ToolSearchRequest("", "weather"))).names == []


async def test_contract_max_results_and_clear(index):
    await index.index_tools("s1", TOOLS)
    response = await index.search(ToolSearchRequest("s1", "email flight currency", max_results=2))
    assert len(response.names) == 2
    await index.clear_index("s1")
    assert (await index.search(ToolSearchRequest("s1", "email"))).names == []


async def test_contract_index_tools_adds_and_replaces_by_name(index):
    await index.index_tools("s1", TOOLS[:1])
    await index.index_tools("s1", [ToolReference("send_email", "Post a letter"), TOOLS[2]])
    assert (await index.search(ToolSearchRequest("s1", "flight"))).names == ["book_flight"]
    assert (await index.search(ToolSearchRequest("s1", "letter post"))).names[0] == "send_email"


def test_regex_pattern_drops_stop_words_short_tokens_and_caps_length():
    assert query_pattern("What is the weather, in Paris?").pattern == "(weather|paris)"
    assert query_pattern("a the").pattern == "(a|the)"  # nothing left: raw tokens
    assert query_pattern("   ").pattern == ".*"
    assert query_pattern("c++ (x)").pattern == r"(c\+\+)"
    long = query_pattern(" ".join(f"word{i:03d}" for i in range(100))).pattern
    assert len(long) <= 200 and long.startswith("(word000|word001")


async def test_regex_scores_names_above_descriptions_and_keeps_ties_in_order():
    index = RegexToolIndex()
    await index.index_tools(
        "s",
        [
            ToolReference("alpha", "mentions email"),
            ToolReference("beta", "mentions email"),
            ToolReference("email_tool", "does things"),
        ],
    )
    response = await index.search(ToolSearchRequest("s", "email"))
    assert response.names == ["email_tool", "alpha", "beta"]
    assert response.total_matches == 3
    everything = await index.search(ToolSearchRequest("s", ""))
    assert everything.names == ["alpha", "beta", "email_tool"]


async def test_keyword_splits_camel_and_snake_names():
    index = KeywordToolIndex()
    await index.index_tools("s", TOOLS)
    assert (await index.search(ToolSearchRequest("s", "weather"))).names == ["getWeather"]
    assert (await index.search(ToolSearchRequest("s", "zzz"))).names == []
    # No usable word: every tool, in indexing order.
    assert (await index.search(ToolSearchRequest("s", "the a", max_results=2))).names == [
        "send_email",
        "getWeather",
    ]


async def test_vector_threshold_and_embedding_memo():
    embeddings = HashingEmbeddings()
    index = VectorToolIndex(embeddings, similarity_threshold=0.99)
    await index.index_tools("s1", TOOLS)
    await index.index_tools("s2", TOOLS)  # same texts: served from the memo
    assert embeddings.calls == 1
    assert (await index.search(ToolSearchRequest("s1", "weather"))).names == []
    assert (await index.search(ToolSearchRequest("s1", "   "))).names == []
    with pytest.raises(ValueError, match=r"similarity in \[0, 1\]"):
        VectorToolIndex(embeddings, similarity_threshold=1.5)


def test_fingerprint_ignores_order_and_sees_changes():
    assert tool_fingerprint(TOOLS) == tool_fingerprint(reversed(TOOLS))
    changed = [*TOOLS[:-1], ToolReference("convert_currency", "other")]
    assert tool_fingerprint(changed) != tool_fingerprint(TOOLS)
    assert len(tool_fingerprint([])) == 64
