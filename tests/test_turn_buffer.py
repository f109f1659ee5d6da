"""The turn buffer's contract, run against each backend (issue 23)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from advisors_app.turn.buffer import InMemoryTurnBuffer, RedisTurnBuffer, TurnBuffer
from tests.test_consumers_redis import REDIS_URL, redis_answers


@contextlib.asynccontextmanager
async def new_redis_buffer() -> AsyncIterator[RedisTurnBuffer]:
    """A Redis buffer under a key prefix of its own, its keys removed after."""
    if not redis_answers(REDIS_URL):
        pytest.skip(f"no Redis at {REDIS_URL}")
    made = RedisTurnBuffer(REDIS_URL, f"advisors-test-{uuid.uuid4().hex}", ttl=60)
    try:
        yield made
    finally:
        client = made._client()
        keys = await client.keys(f"{made.prefix}:*")
        if keys:
            await client.delete(*keys)
        await client.aclose()


@pytest.fixture(params=["memory", "redis"])
async def buffer(request: pytest.FixtureRequest) -> AsyncIterator[TurnBuffer]:
    if request.param == "memory":
        yield InMemoryTurnBuffer(ttl=60)
        return
    async with new_redis_buffer() as made:
        yield made


def frames(trace: str, *kinds: str, start: int = 1) -> list[dict[str, Any]]:
    return [{"type": k, "event_id": f"{trace}-{n}"} for n, k in enumerate(kinds, start)]


async def test_a_turn_is_kept_and_a_new_one_replaces_it(buffer: TurnBuffer) -> None:
    assert await buffer.read(1, "c") is None
    await buffer.append(1, "c", frames("t", "start", "delta"))
    await buffer.append(1, "c", frames("t", "delta", "done", start=3))
    assert [f["event_id"] for f in await buffer.read(1, "c") or []] == [
        f"t-{n}" for n in (1, 2, 3, 4)
    ]
    assert await buffer.read(2, "c") is None  # another owner's key
    await buffer.append(1, "c", frames("u", "start"))
    assert await buffer.read(1, "c") == frames("u", "start")


async def test_follow_replays_then_tails_to_the_end(buffer: TurnBuffer) -> None:
    await buffer.append(1, "c", frames("t", "start", "delta", "delta"))
    got: list[str] = []

    async def follow() -> None:
        async for frame in buffer.follow(1, "c", "t-1", poll=0.05):
            got.append(frame["event_id"])

    task = asyncio.create_task(follow())
    await asyncio.sleep(0.2)
    await buffer.append(1, "c", frames("t", "delta", "done", start=4))
    await asyncio.wait_for(task, 5)
    assert got == ["t-2", "t-3", "t-4", "t-5"]


@pytest.fixture
async def redis_buffer() -> AsyncIterator[RedisTurnBuffer]:
    async with new_redis_buffer() as made:
        yield made


async def test_turns_appending_together_share_one_command(redis_buffer: RedisTurnBuffer) -> None:
    """Hundreds of turns streaming on one process cost one script call per frame each; now the
    appends that arrive while one is on its way go out together, each caller getting its own
    group's members."""
    client = redis_buffer._client()
    group = f"{redis_buffer.prefix}:group".encode()
    await client.zadd(group, {"socket-a": 100.0, "socket-old": 1.0})
    calls: list[int] = []
    script = redis_buffer.script()

    async def counted(*, keys: list[Any], args: list[Any]) -> Any:
        calls.append(len(keys))
        return await script(keys=keys, args=args)

    redis_buffer._scripts[client] = counted
    answers = await asyncio.gather(
        redis_buffer.append_and_list(1, "c", frames("t", "start"), group, 50.0),
        *(redis_buffer.append(n, "c", frames(f"t{n}", "start", "delta")) for n in range(2, 12)),
        redis_buffer.append_and_list(1, "d", frames("u", "start"), group, 0.0),
    )
    assert calls == [12 + 2]  # one command: twelve streams, two groups listed
    assert answers[0] == ["socket-a"]  # joined after the score asked for
    assert sorted(answers[-1]) == ["socket-a", "socket-old"]
    assert [f["event_id"] for f in await redis_buffer.read(5, "c") or []] == ["t5-1", "t5-2"]


async def test_a_failed_append_reaches_every_caller_of_its_command(
    redis_buffer: RedisTurnBuffer,
) -> None:
    client = redis_buffer._client()

    async def refused(*, keys: list[Any], args: list[Any]) -> Any:
        raise ConnectionError("Redis went away")

    redis_buffer._scripts[client] = refused
    answers = await asyncio.gather(
        *(redis_buffer.append(n, "c", frames("t", "start")) for n in range(3)),
        return_exceptions=True,
    )
    assert all(isinstance(answer, ConnectionError) for answer in answers)
    del redis_buffer._scripts[client]
    await redis_buffer.append(1, "c", frames("t", "start"))  # the next command goes out
    assert await redis_buffer.read(1, "c") == frames("t", "start")
