"""A scripted OpenAI-compatible HTTP server on loopback, for provider tests.

Each request takes the next reply of the script: a JSON answer with any status and headers, a
Server-Sent-Events stream (optionally malformed, stalled, or cut without its end), or a hang.
:class:`Completion` renders one answer as JSON or as a stream, whichever the request asked for,
so one script serves ``call`` and ``stream`` alike. Requests are recorded for assertions, and a
client that hangs up mid-stream is noted in ``disconnects``. Plain ``http.server`` threads: the
faults need control over the raw bytes that higher-level test servers hide.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Completion",
    "Embeddings",
    "Hang",
    "JsonReply",
    "ScriptedOpenAiServer",
    "SseReply",
    "chunk",
]


def chunk(
    content: str | None = None,
    *,
    reasoning: str | None = None,
    finish_reason: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: dict[str, Any] | None = None,
    index: int = 0,
    choices: bool = True,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` payload."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    payload: dict[str, Any] = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "scripted-model",
        "choices": [{"index": index, "delta": delta, "finish_reason": finish_reason}]
        if choices
        else [],
    }
    if usage is not None:
        payload["usage"] = usage
    return payload


@dataclass
class JsonReply:
    """A JSON (or raw text) body with a status and headers, after ``delay`` seconds."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class SseReply:
    """A 200 event stream: each event a payload dict, raw text sent as is, or a float (a pause
    of that many seconds).

    ``delay`` is slept before each event; ``cut_after`` closes the connection after that many
    events without ending the chunked body; ``done`` sends ``data: [DONE]`` at the end.
    """

    events: list[Any]
    delay: float = 0.0
    cut_after: int | None = None
    done: bool = True


@dataclass
class Hang:
    """Answer nothing for ``seconds`` (the server's ``stop`` ends the wait), then hang up."""

    seconds: float


@dataclass
class Completion:
    """A chat answer rendered as JSON for a call or as SSE chunks (of ``chunk_size`` chars);
    ``reasoning`` is sent as ``reasoning_content``, before the text in a stream."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = field(
        default_factory=lambda: {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    )
    chunk_size: int = 4

    def render(self, streaming: bool) -> JsonReply | SseReply:
        if not streaming:
            message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
            if self.reasoning:
                message["reasoning_content"] = self.reasoning
            if self.tool_calls:
                message["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": c["function"]}
                    for c in self.tool_calls
                ]
            body = {
                "id": "chatcmpl-scripted",
                "object": "chat.completion",
                "created": 1,
                "model": "scripted-model",
                "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
                "usage": self.usage,
            }
            return JsonReply(body)
        events: list[Any] = [chunk("")]
        size = self.chunk_size
        events += [
            chunk(reasoning=self.reasoning[i : i + size])
            for i in range(0, len(self.reasoning), size)
        ]
        events += [chunk(self.text[i : i + size]) for i in range(0, len(self.text), size)]
        for position, call in enumerate(self.tool_calls):
            arguments = call["function"]["arguments"]
            head = {"index": position, "id": call["id"], "type": "function"}
            head["function"] = {"name": call["function"]["name"], "arguments": ""}
            events.append(chunk(tool_calls=[head]))
            events += [
                chunk(tool_calls=[{"index": position, "function": {"arguments": part}}])
                for part in (arguments[i : i + size] for i in range(0, len(arguments), size))
            ]
        events.append(chunk(finish_reason=self.finish_reason))
        if self.usage is not None:
            events.append(chunk(usage=self.usage, choices=False))
        return SseReply(events)


@dataclass
class Embeddings:
    """An ``/embeddings`` answer: one vector per input, ``[i, len(text), 1.0...]`` padded."""

    dimensions: int = 3
    reverse: bool = False

    def render(self, inputs: list[str]) -> JsonReply:
        data = [
            {"object": "embedding", "index": i, "embedding": self.vector(i, text)}
            for i, text in enumerate(inputs)
        ]
        if self.reverse:
            data.reverse()
        return JsonReply({"object": "list", "data": data, "model": "scripted-embedding"})

    def vector(self, i: int, text: str) -> list[float]:
        return ([float(i), float(len(text))] + [1.0] * self.dimensions)[: self.dimensions]


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class ScriptedOpenAiServer:
    """The server: ``add(*replies)``, then point a client at :attr:`base_url`."""

    def __init__(self) -> None:
        self._script: deque[Any] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.requests: list[Request] = []
        self.disconnects: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.requests.append(Request("POST", self.path, headers, body))
                    reply = server._script.popleft() if server._script else None
                server._answer(self, reply, body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def add(self, *replies: Any) -> ScriptedOpenAiServer:
        with self._lock:
            self._script.extend(replies)
        return self

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler, reply: Any, body: Any) -> None:
        if reply is None:
            reply = JsonReply({"error": {"message": "the test script is exhausted"}}, 500)
        if isinstance(reply, Completion):
            reply = reply.render(bool(body and body.get("stream")))
        elif isinstance(reply, Embeddings):
            reply = reply.render(list((body or {}).get("input") or []))
        try:
            if isinstance(reply, Hang):
                self._stopping.wait(reply.seconds)
                handler.close_connection = True
            elif isinstance(reply, JsonReply):
                self._json(handler, reply)
            else:
                self._sse(handler, reply)
        except (BrokenPipeError, ConnectionResetError):
            self.disconnects.append(handler.path)

    def _json(self, handler: BaseHTTPRequestHandler, reply: JsonReply) -> None:
        if reply.delay:
            self._stopping.wait(reply.delay)
        is_text = isinstance(reply.body, str)
        data = (reply.body if is_text else json.dumps(reply.body)).encode()
        handler.send_response(reply.status)
        handler.send_header("Content-Type", "text/plain" if is_text else "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    def _sse(self, handler: BaseHTTPRequestHandler, reply: SseReply) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        events = [*reply.events, "data: [DONE]\n\n"] if reply.done else list(reply.events)
        for position, event in enumerate(events):
            if reply.cut_after is not None and position == reply.cut_after:
                handler.close_connection = True
                handler.connection.shutdown(socket.SHUT_RDWR)
                return
            if reply.delay and self._stopping.wait(reply.delay):
                return
            if isinstance(event, float):
                if self._stopping.wait(event):
                    return
                continue
            data = (event if isinstance(event, str) else f"data: {json.dumps(event)}\n\n").encode()
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()


def wait_for(predicate: Any, timeout: float = 5.0) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())
