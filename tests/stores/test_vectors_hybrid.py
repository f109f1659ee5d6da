"""Lexical and hybrid search in PgVectorStore (issue 41): one statement with both legs on their
indexes, the owner scope and both filters on both legs, identifiers as written, a collection in
another language, and bad settings refused."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from advisors_app.core.vectorstore import RETRIEVAL, Document, SearchRequest, parse_filter
from advisors_app.definition.registry import params_errors
from advisors_app.models import Collection
from advisors_app.models import Document as DocumentRow
from advisors_app.stores.vectors import PgVectorStore
from tests.embeddings import WordEmbeddingModel

pytestmark = pytest.mark.django_db

IDENTIFIER_TEXTS = {
    "varnames": "co_varnames is a tuple containing the names of the local variables.",
    "names": "co_names is a tuple containing the names used by the bytecode.",
    "subclass_hook": "Whenever a class inherits from another class, __init_subclass__ is "
    "called on the parent class.",
    "init": "A subclass may override __init__ to set up its instances.",
    "casefold": "str.casefold() returns a casefolded copy of the string.",
    "lower": "str.lower() returns a copy of the string converted to lowercase.",
}


def store_of(slug: str = "docs", model=None, **collection) -> PgVectorStore:
    row = Collection.objects.create(slug=slug, name=slug, **collection)
    return PgVectorStore(row, model or WordEmbeddingModel())


def collection_indexes() -> list[str]:
    """The indexes of the document table that start with ``collection_id``."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, DocumentRow._meta.db_table)
    return [
        name
        for name, info in constraints.items()
        if info["index"] and not info["unique"] and info["columns"][:1] == ["collection_id"]
    ]


def ids(documents) -> list[str]:
    return [d.id for d in documents]


def test_hybrid_is_one_statement_with_both_legs_on_their_indexes() -> None:
    store = store_of()
    store.add(Document(text, id=key) for key, text in IDENTIFIER_TEXTS.items())
    store.add(Document(f"filler sentence number {i} about tuples", id=f"f{i}") for i in range(60))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE advisors_app_document")
    request = SearchRequest("co_varnames", top_k=3, search_mode="hybrid")

    with CaptureQueriesContext(connection) as captured:
        documents = store.similarity_search(request)

    searches = [q["sql"] for q in captured.captured_queries if "advisors_app_document" in q["sql"]]
    assert len(searches) == 1
    [sql] = searches
    assert "vector_leg AS" in sql and "lexical_leg AS" in sql and "<=>" in sql and "@@" in sql
    assert documents[0].id == "varnames"
    assert documents[0].metadata[RETRIEVAL]["lexical_rank"] == 1

    # The plan of that statement, with the store's settings and sequential scans off (as a
    # large table would make them): HNSW for the vector leg, the GIN index for the lexical one.
    plans = []

    def explain(execute, sql, params, many, context):
        if sql.startswith("WITH lexical_query"):
            cursor = context["cursor"]
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
            [[plan]] = cursor.fetchone()
            plans.append(json.dumps(plan))
        return execute(sql, params, many, context)

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        # On a table this small the planner may read the collection's rows through an index
        # on collection_id and filter them, depending on what earlier tests left in the
        # statistics; without those (dropped inside this transaction only) each leg's choice
        # is its own index or nothing, as on a large table.
        for name in collection_indexes():
            cursor.execute(f"DROP INDEX {name}")
        with connection.execute_wrapper(explain):
            store.similarity_search(request)
    [plan] = plans
    assert '"Index Name": "advisors_document_hnsw"' in plan
    assert '"Index Name": "advisors_document_lexical"' in plan


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_another_users_private_document_never_appears(mode: str) -> None:
    users = get_user_model().objects
    alice = users.create_user("alice")
    bob = users.create_user("bob")
    collection = Collection.objects.create(slug="shared", name="Shared")
    model = WordEmbeddingModel()
    PgVectorStore.for_user(collection, alice, model).add(
        [Document("alice_secret_token is kept in the vault.", id="private")]
    )
    PgVectorStore(collection, model).add([Document("Nothing secret here.", id="public")])
    request = SearchRequest("alice_secret_token", top_k=5, search_mode=mode)

    seen_by_bob = PgVectorStore.for_user(collection, bob, model).similarity_search(request)
    seen_by_alice = PgVectorStore.for_user(collection, alice, model).similarity_search(request)

    assert "private" not in ids(seen_by_bob)
    assert seen_by_alice[0].id == "private"
    assert seen_by_alice[0].metadata[RETRIEVAL]["lexical_rank"] == 1


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_the_chains_and_the_callers_filters_bind_both_legs(mode: str) -> None:
    store = store_of()
    store.add(
        [
            Document("shared_term for tenant a in 2023", {"tenant": "a", "year": 2023}, id="a23"),
            Document("shared_term for tenant a in 2025", {"tenant": "a", "year": 2025}, id="a25"),
            Document("shared_term for tenant b", {"tenant": "b", "year": 2025}, id="b25"),
        ]
    )
    chain = parse_filter("tenant == 'a'")

    found = store.similarity_search(
        SearchRequest("shared_term", top_k=5, search_mode=mode, filter_expression=chain)
    )
    narrowed = store.similarity_search(
        SearchRequest(
            "shared_term",
            top_k=5,
            search_mode=mode,
            filter_expression=parse_filter("tenant == 'a' && year >= 2024"),
        )
    )

    assert sorted(ids(found)) == ["a23", "a25"]
    assert ids(narrowed) == ["a25"]


@pytest.mark.parametrize(
    ("query", "first", "not_before"),
    [
        ("co_varnames", "varnames", "names"),
        ("__init_subclass__", "subclass_hook", "init"),
        ("str.casefold", "casefold", "lower"),
        ("casefold", "casefold", "lower"),
    ],
)
def test_identifiers_with_underscores_and_dots_match_as_written(
    query: str, first: str, not_before: str
) -> None:
    store = store_of()
    store.add(Document(text, id=key) for key, text in IDENTIFIER_TEXTS.items())

    found = ids(store.similarity_search(SearchRequest(query, top_k=6, search_mode="lexical")))

    assert found[0] == first
    assert not_before not in found or found.index(not_before) > found.index(first)


def test_co_varnames_does_not_match_co_names_through_its_exact_token() -> None:
    store = store_of()
    store.add([Document(IDENTIFIER_TEXTS["names"], id="names")])
    found = store.similarity_search(SearchRequest("co_varnames", top_k=3, search_mode="lexical"))
    # Only the shared word "co" links them, never the identifier's own token.
    assert all(d.metadata[RETRIEVAL]["lexical_rank"] for d in found)
    [row] = DocumentRow.objects.values_list("search_vector", flat=True)
    assert "cozuvarnames" not in row and "cozunames" in row


def test_a_collection_in_another_language_configuration() -> None:
    german = store_of("de", text_search_config="german")
    english = store_of("en")
    for store in (german, english):
        store.add([Document("Die Häuser am Fluss sind alt.", id=f"{store.collection.slug}-1")])
    request = SearchRequest("Haus", top_k=3, search_mode="lexical")

    assert ids(german.similarity_search(request)) == ["de-1"]
    assert english.similarity_search(request) == []


def test_scores_stay_cosine_similarities_and_the_legs_are_labelled() -> None:
    store = store_of()
    store.add(Document(text, id=key) for key, text in IDENTIFIER_TEXTS.items())
    [best, *_] = store.similarity_search(
        SearchRequest("co_varnames", top_k=3, search_mode="hybrid")
    )
    how = best.metadata[RETRIEVAL]
    assert set(how) == {"mode", "vector_rank", "lexical_rank", "fused_score"}
    assert how["mode"] == "hybrid" and how["fused_score"] > 0
    assert best.score == pytest.approx(best.metadata["score"])
    assert -1.0 <= best.score <= 1.0


def test_the_collection_default_mode_applies_and_a_request_overrides_it() -> None:
    store = store_of(search_mode="lexical")
    store.add(Document(text, id=key) for key, text in IDENTIFIER_TEXTS.items())
    by_default = store.similarity_search(SearchRequest("co_varnames", top_k=2))
    by_vector = store.similarity_search(SearchRequest("co_varnames", top_k=2, search_mode="vector"))
    assert by_default[0].metadata[RETRIEVAL]["mode"] == "lexical"
    assert by_vector[0].metadata[RETRIEVAL] == {"mode": "vector", "vector_rank": 1}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"search_mode": "fuzzy"}, "search_mode must be one of"),
        ({"vector_weight": -1}, "vector_weight must be a number"),
        ({"lexical_weight": float("nan")}, "lexical_weight must be a number"),
        ({"rrf_k": 0}, "rrf_k must be an integer"),
    ],
)
def test_a_bad_search_request_is_refused(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SearchRequest("q", **change)


@pytest.mark.parametrize("key", ["question_answer", "retrieval_augmentation"])
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"search_mode": "fuzzy"}, "params.search_mode"),
        ({"rrf_k": 0}, "params.rrf_k"),
        ({"lexical_weight": -0.5}, "params.lexical_weight"),
        ({"rerank": {"top_n": 0}}, "params.rerank.top_n"),
        ({"rerank": {"method": "magic"}}, "params.rerank.method"),
        ({"rerank": {"top_n": 5, "extra": 1}}, "params.rerank.extra"),
    ],
)
def test_bad_params_get_field_errors(key: str, change: dict, field: str) -> None:
    base = {"collection": "docs"}
    assert params_errors(key, {**base, "search_mode": "hybrid", "rerank": {"top_n": 20}}) == {}
    assert field in params_errors(key, {**base, **change})


def test_an_unknown_text_search_configuration_is_a_field_error() -> None:
    collection = Collection(slug="x", name="x", text_search_config="klingon")
    with pytest.raises(ValidationError) as raised:
        collection.full_clean()
    assert "text_search_config" in raised.value.message_dict


def test_a_scoped_search_reads_the_collection_once() -> None:
    from asgiref.sync import async_to_sync

    from advisors_app.stores.scoped import UserScopedVectorStore

    store = store_of(search_mode="hybrid", ef_search=60)
    store.add(Document(text, id=key) for key, text in IDENTIFIER_TEXTS.items())
    scoped = UserScopedVectorStore("docs", WordEmbeddingModel())

    with CaptureQueriesContext(connection) as captured:
        found = async_to_sync(scoped.asimilarity_search)(SearchRequest("co_varnames", top_k=2))

    reads = [q["sql"] for q in captured.captured_queries if "advisors_app_collection" in q["sql"]]
    assert len(reads) == 1
    assert found[0].metadata[RETRIEVAL]["mode"] == "hybrid"


def test_a_common_word_leaves_the_lexical_query_once_the_table_has_statistics() -> None:
    """60 chunks share "ubiquitous": by the column's statistics it would have the lexical leg
    rank every row (over this store's budget of 20), so it is left out and the rare word
    decides; before ANALYZE (no statistics) every word is kept."""

    class SmallBudgetStore(PgVectorStore):
        lexical_budget_rows = 20

    collection = Collection.objects.create(slug="big", name="big")
    store = SmallBudgetStore(collection, WordEmbeddingModel())
    store.add(Document(f"ubiquitous filler {i}", id=f"c{i}") for i in range(60))
    store.add([Document("ubiquitous and quokka_habitat", id="rare")])
    request = SearchRequest("ubiquitous quokka_habitat", top_k=5, search_mode="lexical")

    assert len(store.similarity_search(request)) == 5
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE advisors_app_document")
    assert ids(store.similarity_search(request)) == ["rare"]
