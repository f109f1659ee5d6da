"""A paused turn survives a restart and is resumed by another process (issue 19).

A turn pauses on one daphne process; that process stops; a new one starts; the decision is
made over REST against the new one, and a ``db_worker`` process runs the resume: the tool runs
once, the owner's socket on the new server gets the resumed turn through the Redis channel
layer, and the stored history is valid. Nothing of the pause lives in a process's memory.

The chain runs on a scripted model with stateless tool rules (the demo notes chain's), so every
process answers the same prompt the same way, and the tool is the demo's ``save_note``
(registered in every process by ``advisors_app.demo``), whose notes are rows this test reads.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client
from django_tasks_db.models import DBTaskResult
from rest_framework.authtoken.models import Token
from websockets.asyncio.client import connect

from advisors_app.demo.loader import NOTES_MODEL_SETTINGS
from advisors_app.demo.models import DemoNote
from advisors_app.models import ChatMessage, ChatModelConfig, ToolApproval
from tests.factories import make_chain
from tests.helpers import database_url_for_subprocess
from tests.live_server import ROOT, LiveServer
from tests.task_worker import DbWorker
from tests.test_consumers_redis import REDIS_URL, redis_answers

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


def wait_for_task(timeout: float = 60.0) -> DBTaskResult:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = DBTaskResult.objects.get()
        if task.status in ("SUCCESSFUL", "FAILED"):
            return task
        time.sleep(0.1)
    raise AssertionError(f"the resume task is still {task.status} after {timeout} s")


def test_a_turn_paused_before_a_restart_resumes_in_another_process(
    tmp_path: Path, django_user_model: Any
) -> None:
    if not redis_answers(REDIS_URL):
        pytest.skip(f"no Redis at {REDIS_URL} (scripts/test.sh starts one)")
    env = {
        "DATABASE_URL": database_url_for_subprocess(),
        "REDIS_URL": REDIS_URL,
        "ADVISORS_TEST_REDIS_PREFIX": f"advisors-test-{uuid.uuid4().hex}",
    }
    alice = django_user_model.objects.create_user("alice", password="pw")
    token = Token.objects.create(user=alice).key
    session = Client()
    session.force_login(alice)
    cookie = f"sessionid={session.cookies['sessionid'].value}"
    model = ChatModelConfig.objects.create(
        slug="notes-rules", provider="scripted", settings=NOTES_MODEL_SETTINGS
    )
    make_chain(
        "notes",
        model=model,
        advisors=(("message_chat_memory", {"max_messages": 10}), ("tool_calling", {})),
        tools=["save_note"],
    )
    headers = {"Authorization": f"Token {token}"}
    logs = ROOT / "test-artifacts" / "approvals"
    server = LiveServer(logs / "server.log", **env)

    with server:
        paused = httpx.post(
            f"{server.url}/api/chains/notes/call/",
            json={"message": "Save a note: buy milk"},
            headers=headers,
            timeout=30,
        )
        assert paused.status_code == 200, paused.text
        body = paused.json()
        assert body["finish_reason"] == "APPROVAL_REQUIRED"
        conversation = body["conversation_id"]
        [pending] = body["pending_approvals"]
        assert pending["tool"] == "save_note" and pending["arguments"] == {"text": "buy milk"}
        first_pid = server.process.pid if server.process else None
        server.restart()  # a new process: nothing of the pause is in memory any more
        assert server.process is not None and server.process.pid != first_pid
        assert not DemoNote.objects.exists()

        listed = httpx.get(f"{server.url}/api/approvals/", headers=headers, timeout=30).json()
        [approval] = listed["results"]
        assert approval["approval_id"] == pending["approval_id"]
        assert approval["conversation_id"] == conversation

        async def resume() -> list[dict[str, Any]]:
            socket = await connect(
                f"{server.ws_url}/ws/chat/notes/",
                origin=server.url,  # type: ignore[arg-type]
                additional_headers={"Cookie": cookie},
                proxy=None,
            )
            try:
                decided = await asyncio.to_thread(
                    httpx.post,
                    f"{server.url}/api/approvals/{approval['id']}/decision/",
                    json={"decision": "approve"},
                    headers=headers,
                    timeout=30,
                )
                assert decided.status_code == 202, decided.text
                assert decided.json()["status"] == "queued"
                frames = []
                while True:
                    frame = json.loads(await asyncio.wait_for(socket.recv(), 60))
                    if frame["type"] == "conversation":
                        continue
                    frames.append(frame)
                    if frame["type"] in ("done", "error"):
                        return frames
            finally:
                await socket.close()

        layer = {k: v for k, v in env.items() if k != "DATABASE_URL"}  # the worker sets that
        with DbWorker(tmp_path / "worker.log", **layer) as worker:
            worker.wait_ready()
            frames = asyncio.run(resume())
            task = wait_for_task()
            worker_log = worker.log()

    assert task.status == "SUCCESSFUL", worker_log
    assert task.return_value["status"] == "done", task.return_value
    kinds = [f["type"] for f in frames]
    assert kinds[0] == "start" and kinds[-1] == "done", frames
    assert {"tool_call", "tool_result"} <= set(kinds)
    assert all(f["resumed_elsewhere"] and f["conversation_id"] == conversation for f in frames)
    note = DemoNote.objects.get()  # the tool ran once
    assert (note.owner_id, note.text) == (alice.pk, "buy milk")
    assert frames[-1]["content"] == f"The save_note tool answered: Saved note #{note.pk}: buy milk"

    # The history is valid: the call, its result, the answer; nothing pending any more.
    messages = list(ChatMessage.objects.filter(conversation__owner=alice).order_by("sequence"))
    assert [m.message_type for m in messages] == ["user", "assistant", "tool", "assistant"]
    call = messages[1]
    assert call.metadata["approval_pending"] is False
    assert [c["id"] for c in call.tool_calls] == [r["id"] for r in messages[2].tool_responses]
    assert messages[2].tool_responses[0]["response_data"].startswith("Saved note #")
    row = ToolApproval.objects.get()
    assert (row.status, row.decided_by_id) == ("approved", alice.pk)
    assert row.resumed_call_log is not None
    assert "took too long to shut down" not in server.log()
