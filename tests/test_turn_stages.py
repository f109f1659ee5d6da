"""The stages of a turn: each timed in its trace, and the hooks a feature adds run where the
stage runs (choose, open, run, finish, after commit) with what the stage knows."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from advisors_app.definition import publish
from advisors_app.definition.runtime import clear_cache
from advisors_app.exceptions import TurnError
from advisors_app.models import CallLog, ChatMessage, Conversation
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.turn import Stage, add_hook, call_turn, remove_hook, stream_turn
from advisors_app.turn.state import Finished, Opening, Turn, VersionChoice
from tests.factories import make_chain, scripted_model
from tests.turn_helpers import collect

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def chain() -> Any:
    """Version 1 answers "one" (production); version 2 answers "two" (not labelled)."""
    chain = make_chain("staged", model=scripted_model("one", responses=("one",), repeat=True))
    chain.chat_model = scripted_model("two", responses=("two",), repeat=True)
    chain.save()
    publish(chain, message="answers two")
    return chain


@pytest.fixture
def hooked() -> Iterator[Callable[[Stage, Callable[[Any], Any]], None]]:
    """Adds hooks for one test."""
    added: list[tuple[Stage, Callable[[Any], Any]]] = []

    def add(stage: Stage, hook: Callable[[Any], Any]) -> None:
        added.append((stage, add_hook(stage, hook)))

    yield add
    for stage, hook in added:
        remove_hook(stage, hook)


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_each_stage_is_timed_in_the_trace(chain: Any, user: Any, mode: str) -> None:
    if mode == "call":
        outcome = await call_turn(chain.slug, user, "hi")
    else:
        outcome = (await collect(await stream_turn(chain.slug, user, "hi")))[-1].outcome
    stages = outcome.trace["stages"]
    assert list(stages) == ["choose", "open", "run", "finish", "after_commit"]
    assert all(seconds >= 0 for seconds in stages.values())
    # The call log is written in the finish stage: it has the stages up to its own row.
    log = await CallLog.objects.aget()
    assert log.trace["stages"] == {k: v for k, v in stages.items() if k != "after_commit"}


async def test_a_choose_hook_picks_the_version_the_turn_reads(
    chain: Any, user: Any, hooked: Any
) -> None:
    seen: list[VersionChoice] = []

    def second_version(choice: VersionChoice) -> VersionChoice:
        seen.append(choice)
        return dataclasses.replace(choice, label=None, version=2)

    hooked(Stage.CHOOSE, second_version)
    outcome = await call_turn(chain.slug, user, "hi")
    assert (outcome.content, outcome.version) == ("two", 2)
    assert [(c.chain, c.label, c.version) for c in seen] == [(chain.slug, None, None)]


async def test_an_open_hook_refuses_the_turn_before_anything_is_written(
    chain: Any, user: Any, hooked: Any
) -> None:
    opened: list[Opening] = []

    def refuse(opening: Opening) -> None:
        opened.append(opening)
        raise TurnError("permission_denied", "Not today.", http_status=403)

    hooked(Stage.OPEN, refuse)
    with pytest.raises(TurnError) as refused:
        await call_turn(chain.slug, user, "hi")
    assert refused.value.code == "permission_denied"
    [opening] = opened
    assert (opening.chain, opening.target.number, opening.conversation) == (chain.slug, 1, None)
    assert not await Conversation.objects.aexists()
    assert not await CallLog.objects.aexists()


async def test_a_run_hook_adds_to_the_request_context(chain: Any, user: Any, hooked: Any) -> None:
    def tag(turn: Turn) -> None:
        turn.context["experiment.arm"] = "b"

    hooked(Stage.RUN, tag)
    outcome = await call_turn(chain.slug, user, "hi", trace_payloads=True)
    assert outcome.trace["entries"][0]["request"]["context"]["experiment.arm"] == "b"


async def test_finish_hooks_write_with_the_turn_and_after_commit_hooks_follow(
    chain: Any, user: Any, hooked: Any, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[str, Any]] = []

    def in_the_transaction(finished: Finished) -> None:
        # The reply and the call log are written: a hook may refer to them.
        seen.append(("finish", (finished.message_id, finished.call_log.pk)))
        finished.outcome = dataclasses.replace(finished.outcome, metadata={"hooked": True})

    def committed(finished: Finished) -> None:
        seen.append(("after_commit", finished.outcome.message_id))

    def failing(finished: Finished) -> None:
        raise RuntimeError("the queue is down")

    hooked(Stage.FINISH, in_the_transaction)
    hooked(Stage.AFTER_COMMIT, failing)
    hooked(Stage.AFTER_COMMIT, committed)
    with caplog.at_level(logging.ERROR, logger="advisors_app.turn.stages"):
        outcome = await call_turn(chain.slug, user, "hi")
    log = await CallLog.objects.aget()
    assert seen == [("finish", (outcome.message_id, log.pk)), ("after_commit", outcome.message_id)]
    assert outcome.metadata == {"hooked": True} and outcome.stored
    assert "After-commit hook" in caplog.text  # logged; the committed turn stands


async def test_a_failing_finish_hook_leaves_the_call_log_alone(
    chain: Any, user: Any, hooked: Any
) -> None:
    told: list[bool] = []

    def fails_once(finished: Finished) -> None:
        told.append(finished.messages_failed)
        if not finished.messages_failed:
            raise RuntimeError("disk full")

    hooked(Stage.FINISH, fails_once)
    with pytest.raises(RuntimeError):
        await call_turn(chain.slug, user, "hi")
    assert told == [False, True]  # then again, in the transaction of the call log alone
    assert await sync_to_async(CallLog.objects.count)() == 1
    # The turn stored nothing; the user's message, stored before it ran, stays marked
    # interrupted (issue 36), and is no history for the model.
    [message] = [m async for m in ChatMessage.objects.all()]
    assert (message.message_type, message.text) == ("user", "hi")
    assert message.metadata["interrupted"] is True
    assert message.metadata["finish_reason"] == "error"
    key = (await Conversation.objects.aget()).conversation_id
    assert await DjangoChatMemoryRepository().afind_by_conversation_id(key) == []


async def test_an_assign_hook_serves_another_version_once_the_read_is_done(
    chain: Any, user: Any, hooked: Any
) -> None:
    from advisors_app.turn.state import Assignment

    seen: list[Assignment] = []
    second = await chain.versions.aget(number=2)

    def serve_second(assignment: Assignment) -> Any:
        seen.append(assignment)
        return dataclasses.replace(
            assignment.target,
            version_id=second.pk,
            number=2,
            snapshot_hash=second.snapshot_hash,
        )

    hooked(Stage.ASSIGN, serve_second)
    first = await call_turn(chain.slug, user, "hi")
    assert (first.content, first.version) == ("two", 2)
    later = await call_turn(chain.slug, user, "again", conversation_id=first.conversation_id)
    assert later.content == "two"
    assert seen[0].conversation is None and seen[0].asked.number == 1
    # The conversation was created on the version served, and read back on the next turn.
    assert seen[1].conversation.chain_version_id == second.pk
