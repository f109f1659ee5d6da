"""Fixtures for provider tests: a scripted loopback server per test, one llama.cpp per run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from advisors_app.core.providers.embedded_smollm2 import (
    EmbeddedLlamaServer,
    embedded_llama_server,
)
from tests.core.providers.openai_server import ScriptedOpenAiServer


@pytest.fixture
def openai_server() -> Iterator[ScriptedOpenAiServer]:
    server = ScriptedOpenAiServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_server() -> EmbeddedLlamaServer:
    """The process-wide embedded server, started once for the whole run."""
    server = embedded_llama_server()
    server.endpoint()
    return server
