"""What one turn costs the database: SQL statements, read trips, commits and thread hops
(issue 17).

A chain of SafeGuard + MessageChatMemory + SimpleLogger on the scripted model; a later turn of
its conversation is one read trip and two commits: at most 7 statements, 2 commits, 2 thread
hops (the turn's opening and its finish), its reads (version, conversation, window) sent together
in one psycopg pipeline. The second commit (issue 36) is the user's message, stored pending before
the chain runs so that a server killed mid-turn leaves it (one statement at the end of the
opening hop); a first turn stores it in the statement that creates its conversation, at no cost.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.sync import SyncToAsync, async_to_sync, sync_to_async
from django.db import connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import Client
from django.test.utils import CaptureQueriesContext

from advisors_app.core.memory import MessageWindowChatMemory, TurnMemory
from advisors_app.core.messages import AssistantMessage, SystemMessage, UserMessage
from advisors_app.costs import budgets, pricing
from advisors_app.definition.runtime import load_chain
from advisors_app.models import ChatMessage, Conversation
from advisors_app.security import redaction
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.turn import call_turn, stream_turn
from advisors_app.turn.open import window_sizes
from tests.factories import make_chain, scripted_model
from tests.test_consumers import frames_until_end, open_socket

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_chain_cache", "caches_held_fresh"),
]

#: Issue 17's targets for a later turn of the memory chain (issue 35: the same on every path).
MAX_STATEMENTS = 7
MAX_COMMITS = 2
MAX_HOPS = 2


@pytest.fixture
def caches_held_fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process-wide caches every turn reads, with a wall-clock lifetime (the enabled
    budgets, the prices, redaction's model-config names), kept for the whole test: each test
    fills them with its first turn, and no counted turn pays for a refill because a lifetime
    ran out mid-test on a slow run (issue 35: a budgets ``SELECT`` once appeared in a count).
    The budgets and prices are emptied first: another test's rows must not be held."""
    monkeypatch.setattr(budgets, "CACHE_SECONDS", math.inf)
    monkeypatch.setattr(pricing, "CACHE_SECONDS", math.inf)
    monkeypatch.setattr(redaction, "DATABASE_TTL", math.inf)  # read on a thread of its own
    budgets.clear_budget_cache()
    pricing.clear_price_cache()
    yield
    budgets.clear_budget_cache()
    pricing.clear_price_cache()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def chain() -> Any:
    return make_chain(
        "memory-chain",
        model=scripted_model("memory-model", responses=("Sure.",)),
        advisors=(
            ("safe_guard", {"words": ["keylogger"]}),
            ("message_chat_memory", {"max_messages": 10}),
            ("simple_logger", {}),
        ),
    )


@dataclass
class Cost:
    statements: list[str] = field(default_factory=list)
    commits: int = 0
    hops: int = 0
    #: Round trips of the turn's reads: a pipeline of queries is one, a query alone one.
    read_trips: int = 0

    def __str__(self) -> str:
        return (
            f"{len(self.statements)} statements, {self.read_trips} read trips, "
            f"{self.commits} commits, {self.hops} hops"
        )


_MARKERS = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO")


def _cost(log: list[str]) -> tuple[list[str], int]:
    """The statements of ``log`` (transaction markers left out) and its commits: ``COMMIT``s
    plus writes sent outside a transaction block (PostgreSQL commits each by itself)."""
    statements: list[str] = []
    commits = 0
    in_block = False
    for sql in log:
        word = sql.strip().upper()
        if word == "BEGIN":
            in_block = True
        elif word in ("COMMIT", "ROLLBACK"):
            commits += word == "COMMIT"
            in_block = False
        elif not word.startswith(_MARKERS):
            statements.append(sql)
            commits += not in_block and not word.startswith("SELECT")
    return statements, commits


@contextlib.contextmanager
def counting() -> Iterator[Cost]:
    """Statements, read trips and commits of every thread (a websocket's turn runs on its own
    thread, :mod:`advisors_app.db.threads`), from the SQL log Django writes when it logs
    queries (transaction markers included), and ``sync_to_async`` hops
    (``SyncToAsync.__call__``)."""
    cost = Cost()
    log: list[tuple[str, object | None]] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            sql = getattr(record, "sql", None)
            if sql is not None:
                # On the querying thread: psycopg's pipeline while one is open, else None.
                raw = connections[getattr(record, "alias", "default")].connection
                log.append((sql, getattr(raw, "_pipeline", None)))

    original_call = SyncToAsync.__call__

    async def hop(self: Any, *args: Any, **kwargs: Any) -> Any:
        cost.hops += 1
        return await original_call(self, *args, **kwargs)

    sql_logger = logging.getLogger("django.db.backends")
    handler, level, propagate = Capture(), sql_logger.level, sql_logger.propagate
    logged = BaseDatabaseWrapper.queries_logged
    BaseDatabaseWrapper.queries_logged = property(lambda self: True)  # type: ignore[assignment, method-assign]
    sql_logger.addHandler(handler)
    sql_logger.setLevel(logging.DEBUG)
    sql_logger.propagate = False
    SyncToAsync.__call__ = hop  # type: ignore[method-assign]
    try:
        yield cost
    finally:
        SyncToAsync.__call__ = original_call  # type: ignore[method-assign]
        sql_logger.removeHandler(handler)
        sql_logger.setLevel(level)
        sql_logger.propagate = propagate
        BaseDatabaseWrapper.queries_logged = logged  # type: ignore[method-assign]
        cost.statements, cost.commits = _cost([sql for sql, _ in log])
        pipelines = [pipeline for sql, pipeline in log if sql.lstrip().upper().startswith("SELECT")]
        cost.read_trips = sum(
            pipeline is None or pipeline is not previous
            for previous, pipeline in zip([None, *pipelines], pipelines, strict=False)
        )


def report(name: str, cost: Cost) -> None:
    print(f"\n{name}: {cost}")
    for sql in cost.statements:
        print("   ", sql[:2000])


async def collect(stream: Any) -> list[Any]:
    return [event async for event in stream]


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_a_later_turn_is_one_read_trip_and_one_commit(
    chain: Any, user: Any, mode: str
) -> None:
    first = await call_turn(chain.slug, user, "hello")
    with counting() as opening:
        await call_turn(chain.slug, user, "hi again")
    report("first turn (call)", opening)
    # A new conversation is one more commit: its row is created before the chain runs.
    assert len(opening.statements) <= MAX_STATEMENTS and opening.commits <= 2, opening
    assert opening.hops <= MAX_HOPS, opening
    with counting() as later:
        if mode == "call":
            result = await call_turn(
                chain.slug, user, "and now?", conversation_id=first.conversation_id
            )
            message_id = result.message_id
        else:
            stream = await stream_turn(
                chain.slug, user, "and now?", conversation_id=first.conversation_id
            )
            message_id = (await collect(stream))[-1].message_id
    report(f"later turn ({mode})", later)
    assert (await ChatMessage.objects.aget(pk=message_id)).text == "Sure."
    assert len(later.statements) <= MAX_STATEMENTS, later
    assert later.read_trips == 1, later
    assert later.commits <= MAX_COMMITS, later
    assert later.hops <= MAX_HOPS, later


def test_a_later_rest_call_is_one_read_trip_and_one_commit(chain: Any, user: Any) -> None:
    client = Client()
    client.force_login(user)
    url = f"/api/chains/{chain.slug}/call/"
    first = client.post(url, {"message": "hello"}, content_type="application/json").json()
    body = json.dumps({"message": "and now?", "conversation_id": first["conversation_id"]})
    with CaptureQueriesContext(connection) as captured:
        answer = client.post(url, body, content_type="application/json")
    assert answer.status_code == 200, answer.content
    # The test client runs the async view in this thread's connection (sessions, user).
    statements, commits = _cost([q["sql"] for q in captured.captured_queries])
    print(f"\nlater turn (REST): {len(statements)} statements, {commits} commits")
    for sql in statements:
        print("   ", sql[:2000])
    assert answer.json()["stored"] is True
    # Sessions and the user add their reads; the turn itself is held to the same targets.
    assert len(_turn_statements(statements)) <= MAX_STATEMENTS and commits <= MAX_COMMITS


def _turn_statements(statements: list[str]) -> list[str]:
    """``statements`` without the transport's own reads (the session, the user)."""
    return [sql for sql in statements if "django_session" not in sql and "auth_user" not in sql]


def test_a_later_sse_stream_is_one_read_trip_and_one_commit(chain: Any, user: Any) -> None:
    client = Client()
    client.force_login(user)
    first = client.post(
        f"/api/chains/{chain.slug}/call/", {"message": "hello"}, content_type="application/json"
    ).json()
    body = json.dumps({"message": "and now?", "conversation_id": first["conversation_id"]})
    with CaptureQueriesContext(connection) as captured:
        response = client.post(
            f"/api/chains/{chain.slug}/stream/", body, content_type="application/json"
        )
        text = async_to_sync(_read)(response)
    statements, commits = _cost([q["sql"] for q in captured.captured_queries])
    print(f"\nlater turn (SSE): {len(statements)} statements, {commits} commits")
    assert '"stored":true' in text
    assert len(_turn_statements(statements)) <= MAX_STATEMENTS and commits <= MAX_COMMITS


async def _read(response: Any) -> str:
    return b"".join([part async for part in response.streaming_content]).decode()


async def test_a_later_websocket_turn_is_one_read_trip_and_one_commit(
    chain: Any, user: Any
) -> None:
    first = await call_turn(chain.slug, user, "hello")
    socket = await open_socket(user, chain.slug)
    try:
        with counting() as later:
            await socket.send_json_to(
                {"type": "message", "message": "and now?", "conversation_id": first.conversation_id}
            )
            frames = await frames_until_end(socket)
    finally:
        await socket.disconnect()
    report("later turn (websocket)", later)
    assert frames[-1]["stored"] is True
    assert len(_turn_statements(later.statements)) <= MAX_STATEMENTS, later
    assert later.read_trips == 1, later
    assert later.commits <= MAX_COMMITS, later
    assert later.hops <= MAX_HOPS, later


def test_a_turn_memory_answers_reads_after_the_appends_it_holds(user: Any) -> None:
    """Memory inside the tool loop reads again after its own append within one turn: the
    turn's memory answers from the window read ahead and the appends it holds, without a
    query; a read past the window reads the older messages and puts the held ones after them.
    Nothing is written until the turn writes what is held."""
    repository = DjangoChatMemoryRepository()
    memory = MessageWindowChatMemory(repository, max_messages=4)
    key = f"{user.pk}:held"
    memory.add(key, [SystemMessage("Be brief."), UserMessage("one"), AssistantMessage("1")])
    row = Conversation.objects.get(conversation_id=key)
    turn = TurnMemory(key, repository.read_window(row.pk, row.last_sequence, 48))
    held = memory.for_turn(turn)
    with CaptureQueriesContext(connection) as captured:
        held.add(key, [UserMessage("two"), AssistantMessage("2")])
        assert [m.text for m in held.get(key)] == ["Be brief.", "one", "1", "two", "2"]
    assert captured.captured_queries == []  # held, and read from the turn's memory
    assert [m.text for m in repository.find_by_conversation_id(key)] == ["Be brief.", "one", "1"]
    with transaction.atomic():
        rows = repository.write_held(key, turn.appends)
    assert [r.sequence for r in rows] == [4, 5]
    # A read beyond the window read ahead: the stored messages, then the held ones.
    row.refresh_from_db()
    small = TurnMemory(key, repository.read_window(row.pk, row.last_sequence, 1))
    memory.for_turn(small).add(key, [UserMessage("three")])
    assert [m.text for m in small.repository(repository).find_last(key, 3)] == ["two", "2", "three"]
    assert [m.text for m in repository.find_by_conversation_id(key)][-2:] == ["two", "2"]


async def test_a_window_larger_than_the_one_read_ahead_is_read_again(user: Any) -> None:
    """The window is read with the version, before the chain is known, as large as the
    chain's memory read on its last turn here; when that is too few (the chain was republished
    with a larger window) the turn reads again and the memory still sees its whole window."""
    chain = await sync_to_async(make_chain)(
        "wide-memory",
        model=await sync_to_async(scripted_model)("wide-model", responses=("Sure.",)),
        advisors=(("message_chat_memory", {"max_messages": 10}),),
    )
    first = await call_turn(chain.slug, user, "one")
    for text in ("two", "three"):
        await call_turn(chain.slug, user, text, conversation_id=first.conversation_id)
    window_sizes.last[chain.slug] = 2  # as if its last turn here had read 2
    with counting() as later:
        await call_turn(chain.slug, user, "four", conversation_id=first.conversation_id)
    model = (await sync_to_async(load_chain)(chain.slug)).client.chat_model
    assert [m.text for m in model.prompts[-1].instructions] == [
        *("one", "Sure.", "two", "Sure.", "three", "Sure."),
        "four",
    ]
    assert later.read_trips == 2, later
    with counting() as next_turn:
        await call_turn(chain.slug, user, "five", conversation_id=first.conversation_id)
    assert next_turn.read_trips == 1, next_turn
    assert len(model.prompts[-1].instructions) == 9  # the 8 stored messages, then "five"


async def test_a_chain_without_memory_reads_no_window(user: Any) -> None:
    chain = await sync_to_async(make_chain)("no-memory")
    first = await call_turn(chain.slug, user, "one")
    await call_turn(chain.slug, user, "two", conversation_id=first.conversation_id)
    with counting() as later:
        await call_turn(chain.slug, user, "three", conversation_id=first.conversation_id)
    selects = [sql for sql in later.statements if sql.startswith("SELECT")]
    assert len(selects) == 2 and later.read_trips == 1, later  # the version, the conversation


async def test_an_experiment_adds_no_statement_to_a_turn(chain: Any, user: Any) -> None:
    """Issue 37: the label's experiment is read with the version, its plan cached per process."""
    from advisors_app.definition import publish
    from advisors_app.experiments.serving import clear_plans
    from tests.experiment_helpers import make_experiment

    first = await call_turn(chain.slug, user, "hello")
    with counting() as plain:
        await call_turn(chain.slug, user, "and now?", conversation_id=first.conversation_id)

    def second_version() -> None:
        chain.chat_model = scripted_model("memory-model-2", responses=("Also sure.",))
        chain.save()
        publish(chain, message="v2")
        make_experiment(chain)

    await sync_to_async(second_version)()
    clear_plans()
    started = await call_turn(chain.slug, user, "hello")  # reads the plan once
    assert started.experiment is not None
    with counting() as experimented:
        later = await call_turn(
            chain.slug, user, "and now?", conversation_id=started.conversation_id
        )
    report("a later turn under an experiment", experimented)
    assert later.experiment == started.experiment
    assert len(experimented.statements) == len(plain.statements), experimented
    assert (experimented.read_trips, experimented.commits) == (plain.read_trips, plain.commits)
