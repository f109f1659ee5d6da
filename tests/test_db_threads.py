"""A turn's database work: a thread of its own per websocket (kept from turn to turn), no
pooled connection held between pieces of work (:mod:`advisors_app.db.threads`)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, transaction

from advisors_app.channels import consumers
from advisors_app.db.threads import TurnThread, _release_pooled, db_sync_to_async, own_thread
from advisors_app.models import Conversation
from tests.test_consumers import alice, chain, fresh_cache, open_socket, script  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

thread_id = sync_to_async(threading.get_ident)


async def test_each_block_gets_a_thread_of_its_own() -> None:
    shared = await thread_id()

    async def inside() -> int:
        async with own_thread():
            first = await thread_id()
            assert await thread_id() == first  # thread-sensitive within the block
            return first

    one, two = await asyncio.gather(inside(), inside())
    assert len({shared, one, two}) == 3


async def test_a_kept_thread_serves_block_after_block_and_closes_what_each_opened() -> None:
    thread = TurnThread()
    try:
        async with own_thread(thread):
            first = await thread_id()
            assert await sync_to_async(_query_then_connection)() is not None  # plain: kept
        async with own_thread(thread):
            assert await thread_id() == first  # the same thread: its connection objects warm
            assert await sync_to_async(lambda: connection.connection)() is None  # closed
    finally:
        thread.shutdown()


def _query_then_connection() -> Any:
    Conversation.objects.exists()
    return connection.connection


async def test_a_pooled_connection_goes_back_after_each_piece_of_work() -> None:
    assert connection.settings_dict["OPTIONS"].get("pool")  # the example site pools
    async with own_thread():
        assert await sync_to_async(_query_then_connection)() is not None  # plain: kept
        assert await db_sync_to_async(_query_then_connection)() is not None  # used inside...
        assert await sync_to_async(lambda: connection.connection)() is None  # ...then back


def _kept_inside_a_transaction() -> bool:
    with transaction.atomic():
        Conversation.objects.exists()
        _release_pooled()  # what db_sync_to_async does after its work
        return connection.connection is not None and connection.in_atomic_block


async def test_a_connection_inside_a_transaction_is_kept() -> None:
    """Work done while a transaction is open on the thread (a caller's, a test's) keeps the
    connection: the transaction still needs it."""
    async with own_thread():
        assert await sync_to_async(_kept_inside_a_transaction)()


async def test_a_websocket_turn_does_not_wait_behind_other_blocking_work(
    alice: Any,  # noqa: F811
    chain: Any,  # noqa: F811
) -> None:
    """Before: every socket's database work queued on one thread per process, so one slow
    piece of blocking work delayed every other socket's turn."""
    socket = await open_socket(alice)
    await script("support", "Hello", "there")
    loop = asyncio.get_running_loop()
    holding = asyncio.Event()
    release = threading.Event()

    def hold_the_shared_thread() -> None:
        loop.call_soon_threadsafe(holding.set)
        release.wait()  # until the turn is done: behind this, a queued turn would never end

    blocker = asyncio.create_task(sync_to_async(hold_the_shared_thread)())
    await holding.wait()
    try:
        await socket.send_json_to({"type": "message", "message": "hi"})
        while (frame := await socket.receive_json_from(timeout=30))["type"] != "done":
            assert frame["type"] != "error", frame
        assert not blocker.done()  # the turn ended while the shared thread was still held
    finally:
        release.set()
        await blocker
    await socket.disconnect()


async def test_a_socket_runs_its_turns_on_one_thread_and_ends_it_when_it_closes(
    alice: Any,  # noqa: F811
    chain: Any,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new thread per turn cost its first query ~0.6 ms more (Django builds the thread's
    connection objects anew): a quarter of a later turn's time to first token."""
    threads: list[TurnThread] = []

    class Recorded(TurnThread):
        def __init__(self) -> None:
            super().__init__()
            threads.append(self)

    monkeypatch.setattr(consumers, "TurnThread", Recorded)
    socket = await open_socket(alice)
    await script("support", "One", "Two")
    for text in ("hi", "again"):
        await socket.send_json_to({"type": "message", "message": text})
        while (frame := await socket.receive_json_from())["type"] != "done":
            assert frame["type"] != "error", frame
    assert len(threads) == 1 and len(threads[0]._threads) == 1
    await socket.disconnect()
    assert threads[0]._shutdown
