"""The real clients of both protocols against the live site (Daphne on the test database): the
AI SDK's ``DefaultChatTransport`` + ``readUIMessageStream`` (what ``useChat`` runs) and AG-UI's
``HttpAgent`` (which validates every event and its order itself), from the npm registry's ``ai``
and ``@ag-ui/client`` pinned in tests/js/package-lock.json, each streaming a turn with a tool call
and sources."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rest_framework.authtoken.models import Token

from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import Collection
from tests.factories import make_chain, scripted_model

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

JS = Path(__file__).resolve().parents[1] / "js"


@pytest.fixture(scope="module")
def node_clients() -> Path:
    """tests/js with its locked packages installed (``npm ci`` once, from the npm registry)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js is not installed: the JavaScript clients cannot run")
    if not (JS / "node_modules" / "ai").is_dir():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"], cwd=JS, check=True, capture_output=True
        )
    return JS / "protocol_clients.mjs"


def test_the_ai_sdk_and_ag_ui_clients_stream_a_turn_with_a_tool_and_sources(
    live_api: str, node_clients: Path, alice: Any
) -> None:
    collection = Collection.objects.create(slug="kb", name="KB")
    ingest_text(collection, "policy.md", "Refunds take 5 days.")
    model = scripted_model(
        "clients-model",
        responses=["unused"],
        repeat=True,
    )
    model.settings.update(
        tool_rules=[{"when": "refund", "tool": "calculator", "arguments": {"expression": "2+3"}}],
        after_tool="Refunds take {tool_result} days.",
    )
    model.save()
    make_chain(
        "clients",
        model=model,
        advisors=(("question_answer", {"collection": "kb"}), ("tool_calling", {})),
        tools=["calculator"],
    )
    token, _ = Token.objects.get_or_create(user=alice)
    out = subprocess.run(
        ["node", str(node_clients), live_api, token.key, "clients", "How long does a refund take?"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)

    message = answer["aiSdk"]  # the UIMessage useChat would show
    assert message["role"] == "assistant"
    kinds = [part["type"] for part in message["parts"]]
    assert "tool-calculator" in kinds and "source-document" in kinds and "text" in kinds
    tool = next(part for part in message["parts"] if part["type"] == "tool-calculator")
    assert (tool["state"], tool["input"]) == ("output-available", {"expression": "2+3"})
    source = next(part for part in message["parts"] if part["type"] == "source-document")
    assert source["title"] == "policy.md"
    text = "".join(part["text"] for part in message["parts"] if part["type"] == "text")
    assert text == "Refunds take 5 days."
    assert message["metadata"]["stored"] is True  # finish's messageMetadata

    run = answer["agUi"]
    assert run.get("error") is None and run["outcome"] == "success"
    events = run["events"]
    assert events[0] == "RUN_STARTED" and events[-1] == "RUN_FINISHED"
    assert {"TOOL_CALL_START", "TOOL_CALL_RESULT", "CUSTOM", "TEXT_MESSAGE_CONTENT"} <= set(events)
    assert run["result"]["tools"][0]["name"] == "calculator"
    roles = [m["role"] for m in run["messages"]]
    assert roles[0] == "user" and "assistant" in roles and "tool" in roles
    assistant = [m for m in run["messages"] if m["role"] == "assistant"]
    assert any(m.get("content") == "Refunds take 5 days." for m in assistant)
