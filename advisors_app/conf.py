"""Typed access to the ``ADVISORS`` settings dict, read at access time.

Why at access time: ``override_settings(ADVISORS=...)`` and settings reloaded between tests take
effect without re-importing anything (the django-cors-headers ``conf.py`` pattern). Objects built
from these settings (models, chains) are cached with :func:`cached_by_settings` and dropped when
Django sends ``setting_changed`` for ``ADVISORS`` (the Channels ``layers.py`` pattern).
Secrets never live here: model configurations name environment variables instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings as django_settings
from django.core.signals import setting_changed

__all__ = ["DEFAULTS", "AdvisorsSettings", "app_settings", "cached_by_settings"]

DEFAULTS: dict[str, Any] = {
    "DEFAULT_CHAT_MODEL": "smollm2-135m-instruct",
    "DEFAULT_EMBEDDING_MODEL": "all-minilm-l6-v2",
    "EMBEDDING_DIMENSIONS": 384,
    "MAX_MESSAGE_CHARS": 8000,
    "APPROVAL_TTL_SECONDS": 24 * 3600,
    "STREAM_COALESCE_MS": 40,
    "STREAM_COALESCE_CHARS": 64,
    "SSE_KEEPALIVE_SECONDS": 15.0,
    "TURN_BUFFER_SECONDS": 300.0,
    "PENDING_TURN_SECONDS": 900.0,
    "DISCONNECT_POLICY": "cancel",
    "WEBSOCKET_MAX_PENDING_FRAMES": 32,
    "WEBSOCKET_FRAME_RATE": 10.0,
    "WEBSOCKET_FRAME_BURST": 64,
    "CHAT_THROTTLE_RATE": "30/minute",
    "MAX_UPLOAD_BYTES": 10 * 1024 * 1024,
    "MAX_REQUEST_BODY_BYTES": 1024 * 1024,
    "UPLOAD_THROTTLE_RATE": "10/minute",
    "SEARCH_THROTTLE_RATE": "60/minute",
    "FEEDBACK_THROTTLE_RATE": "60/minute",
    "RESUME_THROTTLE_RATE": "30/minute",
    "MAX_SOCKETS_PER_USER": 20,
    "UPLOAD_MAX_FILES": 10,
    "UPLOAD_BYTES_PER_DAY": 100 * 1024 * 1024,
    "MAX_CHUNKS_PER_COLLECTION": 10_000,
    "INGESTION_MAX_PAGES": 1000,
    "INGESTION_MAX_DECOMPRESSED_BYTES": 32 * 1024 * 1024,
    "INGESTION_MAX_CHARS": 1_000_000,
    "INGESTION_CPU_SECONDS": 300.0,
    "INGESTION_MEMORY_BYTES": 1024**3,
    "INGESTION_MAX_ATTEMPTS": 3,
    "TENANT_RESOLVER": "",
    "CHAT_PAGE_DEFAULT_CHAIN": "",
    "MCP_ENDPOINT_ENABLED": False,
    "TRACE_PAYLOAD_SAMPLE": 0.0,
    "EXPERIMENT_CHECK_TURNS": 100,
    "EXPERIMENT_CHECK_SECONDS": 60.0,
    "EXPERIMENT_MIN_TURNS": 30,
    "EXPERIMENT_ALPHA": 0.05,
    "CHAT_MODELS": {},
    "PROVIDER_KEY_ENVS": None,
    "EMBEDDING_MODELS": {},
    "MCP_SERVERS": {},
    "MCP_DISCOVERY_TTL_SECONDS": 300.0,
    "OPENTELEMETRY": False,
}

F = TypeVar("F", bound=Callable[..., Any])

_cache_clearers: list[Callable[[], None]] = []


class AdvisorsSettings:
    """The app's settings: ``settings.ADVISORS[name]`` when given, else ``DEFAULTS[name]``."""

    def _get(self, name: str) -> Any:
        return getattr(django_settings, "ADVISORS", {}).get(name, DEFAULTS[name])

    @property
    def DEFAULT_CHAT_MODEL(self) -> str:
        """Key of the chat-model configuration used when a chain names none."""
        return str(self._get("DEFAULT_CHAT_MODEL"))

    @property
    def DEFAULT_EMBEDDING_MODEL(self) -> str:
        """Key of the embedding-model configuration used when a collection names none."""
        return str(self._get("DEFAULT_EMBEDDING_MODEL"))

    @property
    def EMBEDDING_DIMENSIONS(self) -> int:
        """Length of every stored embedding vector (384 for all-MiniLM-L6-v2)."""
        return int(self._get("EMBEDDING_DIMENSIONS"))

    @property
    def CHAT_MODELS(self) -> dict[str, Any]:
        """Chat-model configurations by alias (see ``advisors_app.core.providers.registry``).

        The built-in alias ``"smollm2-135m-instruct"`` (the embedded model) exists even when
        this dict does not name it; an entry with that name replaces it.
        """
        return dict(self._get("CHAT_MODELS"))

    @property
    def PROVIDER_KEY_ENVS(self) -> frozenset[str] | None:
        """The only environment variables a model config may read its API key from, or
        ``None`` (the default): any name ending in ``_API_KEY``, ``_KEY`` or ``_TOKEN`` that is
        none of the server's own secrets (:mod:`advisors_app.core.providers.key_envs`)."""
        value = self._get("PROVIDER_KEY_ENVS")
        return None if value is None else frozenset(value)

    @property
    def EMBEDDING_MODELS(self) -> dict[str, Any]:
        """Embedding-model configurations by alias; ``"all-minilm-l6-v2"`` is built in."""
        return dict(self._get("EMBEDDING_MODELS"))

    @property
    def MAX_MESSAGE_CHARS(self) -> int:
        """Longest user message accepted by every transport, in characters."""
        return int(self._get("MAX_MESSAGE_CHARS"))

    @property
    def APPROVAL_TTL_SECONDS(self) -> float:
        """How long a tool call waits for a decision before its approval expires."""
        return float(self._get("APPROVAL_TTL_SECONDS"))

    @property
    def STREAM_COALESCE_MS(self) -> int:
        """Streamed text is sent at most once per this many milliseconds (0: every piece).

        The first piece of an answer is never held back; see ``advisors_app.turn.delivery``.
        """
        return int(self._get("STREAM_COALESCE_MS"))

    @property
    def STREAM_COALESCE_CHARS(self) -> int:
        """Held-back streamed text is sent at once when it reaches this many characters."""
        return int(self._get("STREAM_COALESCE_CHARS"))

    @property
    def WEBSOCKET_MAX_PENDING_FRAMES(self) -> int:
        """Frames a chat socket may have read but not yet handled (resumes waiting, votes being
        stored); one more closes it (:mod:`advisors_app.channels.consumers`)."""
        return int(self._get("WEBSOCKET_MAX_PENDING_FRAMES"))

    @property
    def WEBSOCKET_FRAME_RATE(self) -> float:
        """Frames per second a chat socket may send once its burst is spent (0: no bound;
        :mod:`advisors_app.channels.frame_rate`)."""
        return float(self._get("WEBSOCKET_FRAME_RATE"))

    @property
    def WEBSOCKET_FRAME_BURST(self) -> int:
        """Frames a chat socket may send at once before ``WEBSOCKET_FRAME_RATE`` applies."""
        return int(self._get("WEBSOCKET_FRAME_BURST"))

    @property
    def CHAT_THROTTLE_RATE(self) -> str:
        """Chat turns allowed per user, as DRF writes rates (``"30/minute"``); ``""``: no limit.

        Counted in Django's default cache (per process unless the cache is shared).
        """
        return str(self._get("CHAT_THROTTLE_RATE"))

    @property
    def SSE_KEEPALIVE_SECONDS(self) -> float:
        """A Server-Sent Events stream silent this many seconds gets a ``: keep-alive`` comment
        line (0: never), so proxies and clients do not time out while the model thinks."""
        return float(self._get("SSE_KEEPALIVE_SECONDS"))

    @property
    def TURN_BUFFER_SECONDS(self) -> float:
        """How long the last turn of a conversation stays resumable after its latest event
        (``advisors_app.turn.buffer``)."""
        return float(self._get("TURN_BUFFER_SECONDS"))

    @property
    def PENDING_TURN_SECONDS(self) -> float:
        """A turn that started this many seconds ago and has not finished is taken as gone (its
        process died on another machine): its message shows as interrupted and
        ``manage.py turn_recover`` releases its budget reservations
        (:mod:`advisors_app.turn.recovery`). Set it above the longest turn you run: a turn is
        not stopped at it."""
        return float(self._get("PENDING_TURN_SECONDS"))

    @property
    def DISCONNECT_POLICY(self) -> str:
        """What a dropped chat connection does to its running turn: ``"cancel"`` (stop the
        model, store the partial answer) or ``"continue"`` (run to the end, store it whole; a
        client resumes it). A server shutting down always cancels."""
        return str(self._get("DISCONNECT_POLICY"))

    @property
    def EXPERIMENT_CHECK_TURNS(self) -> int:
        """A running experiment's guardrails are checked (a task queued) after this many of
        its turns in a server process, or :attr:`EXPERIMENT_CHECK_SECONDS` after the last
        check that process queued, whichever comes first (``advisors_app.experiments``)."""
        return int(self._get("EXPERIMENT_CHECK_TURNS"))

    @property
    def EXPERIMENT_CHECK_SECONDS(self) -> float:
        """See :attr:`EXPERIMENT_CHECK_TURNS`."""
        return float(self._get("EXPERIMENT_CHECK_SECONDS"))

    @property
    def EXPERIMENT_MIN_TURNS(self) -> int:
        """Turns each of the two arms compared needs before a guardrail may trip."""
        return int(self._get("EXPERIMENT_MIN_TURNS"))

    @property
    def EXPERIMENT_ALPHA(self) -> float:
        """The guardrails' error rate: the chance, under continuous monitoring, that a
        guardrail trips while the arm is in fact within its bound (mSPRT threshold 1/α)."""
        return float(self._get("EXPERIMENT_ALPHA"))

    @property
    def MAX_UPLOAD_BYTES(self) -> int:
        """Largest document file (or JSON text, in UTF-8 bytes) an upload accepts; larger
        answers 413."""
        return int(self._get("MAX_UPLOAD_BYTES"))

    @property
    def MAX_REQUEST_BODY_BYTES(self) -> int:
        """Largest request body of any route but the upload routes, which take their files on
        top of it (0: no limit anywhere); larger answers 413 before it is read
        (``advisors_app.security.body_limits``)."""
        return int(self._get("MAX_REQUEST_BODY_BYTES"))

    @property
    def UPLOAD_THROTTLE_RATE(self) -> str:
        """Uploads (``POST /api/documents/``) allowed per user, as DRF writes rates
        (``"10/minute"``); ``""``: no limit. Counted like chat turns
        (``advisors_app.ingestion.uploads``)."""
        return str(self._get("UPLOAD_THROTTLE_RATE"))

    @property
    def SEARCH_THROTTLE_RATE(self) -> str:
        """Searches (``POST /api/documents/search/``) allowed per user, as DRF writes rates
        (``"60/minute"``); ``""``: no limit. Every search counts, answered or refused, in
        Django's default cache (per process unless the cache is shared)."""
        return str(self._get("SEARCH_THROTTLE_RATE"))

    @property
    def FEEDBACK_THROTTLE_RATE(self) -> str:
        """Votes on replies allowed per user, as DRF writes rates (``"60/minute"``); ``""``: no
        limit. Shared by ``PUT``/``DELETE /api/messages/<id>/feedback/`` and the websocket's
        ``feedback`` frames; every vote counts, stored or refused
        (:mod:`advisors_app.security.rates`)."""
        return str(self._get("FEEDBACK_THROTTLE_RATE"))

    @property
    def RESUME_THROTTLE_RATE(self) -> str:
        """Resumes of a turn's stream allowed per user, as DRF writes rates (``"30/minute"``);
        ``""``: no limit. Shared by the SSE resume (``"resume": true`` on the stream endpoint)
        and the websocket's ``resume`` frames; every well-formed resume counts, found or not
        (:mod:`advisors_app.security.rates`)."""
        return str(self._get("RESUME_THROTTLE_RATE"))

    @property
    def MAX_SOCKETS_PER_USER(self) -> int:
        """Chat websockets one user may hold open at once, counted across every server process
        (Redis with the channels_redis layer; this process otherwise); one more is closed with
        4429. 0: no limit (:mod:`advisors_app.channels.sockets`)."""
        return int(self._get("MAX_SOCKETS_PER_USER"))

    @property
    def UPLOAD_MAX_FILES(self) -> int:
        """Most files one upload request may carry (0: no limit); more answers 413."""
        return int(self._get("UPLOAD_MAX_FILES"))

    @property
    def UPLOAD_BYTES_PER_DAY(self) -> int:
        """Bytes one user may upload over the REST API in any 24 hours (0: no limit); an upload
        that would pass it answers 429."""
        return int(self._get("UPLOAD_BYTES_PER_DAY"))

    @property
    def MAX_CHUNKS_PER_COLLECTION(self) -> int:
        """Chunks one user may own in one collection through the REST API (0: no limit): an
        upload to a full collection answers 429, a job that would pass it fails."""
        return int(self._get("MAX_CHUNKS_PER_COLLECTION"))

    @property
    def INGESTION_MAX_PAGES(self) -> int:
        """Most pages of one PDF that ingestion reads (0: no limit); a longer one fails."""
        return int(self._get("INGESTION_MAX_PAGES"))

    @property
    def INGESTION_MAX_DECOMPRESSED_BYTES(self) -> int:
        """Most decompressed bytes ingestion reads from one file (0: no limit): every PDF
        stream, and every page's content again for each page that draws it."""
        return int(self._get("INGESTION_MAX_DECOMPRESSED_BYTES"))

    @property
    def INGESTION_MAX_CHARS(self) -> int:
        """Most characters of text one file may yield (0: no limit); more fails the file."""
        return int(self._get("INGESTION_MAX_CHARS"))

    @property
    def INGESTION_CPU_SECONDS(self) -> float:
        """CPU seconds one ingestion job may use to read, split and embed (0: no limit)."""
        return float(self._get("INGESTION_CPU_SECONDS"))

    @property
    def INGESTION_MEMORY_BYTES(self) -> int:
        """Address space of the child process that reads one uploaded file (0: no limit);
        a file that needs more fails."""
        return int(self._get("INGESTION_MEMORY_BYTES"))

    @property
    def INGESTION_MAX_ATTEMPTS(self) -> int:
        """Runs of one ingestion job whose worker died before a recovery fails it instead of
        queueing it again (``manage.py ingestion_recover``)."""
        return int(self._get("INGESTION_MAX_ATTEMPTS"))

    @property
    def CHAT_PAGE_DEFAULT_CHAIN(self) -> str:
        """Slug of the chain the chat page opens on (``""`` or a disabled chain: the first
        enabled chain by slug)."""
        return str(self._get("CHAT_PAGE_DEFAULT_CHAIN"))

    @property
    def MCP_ENDPOINT_ENABLED(self) -> bool:
        """Whether the MCP endpoint (``advisors_app.mcp_server``, mounted by the project's
        ``asgi.py``) serves chains as MCP tools; off, it answers 404 as if not mounted."""
        return bool(self._get("MCP_ENDPOINT_ENABLED"))

    @property
    def TENANT_RESOLVER(self) -> str:
        """Dotted path of a callable ``user -> str | None`` naming the user's tenant.

        ``""`` (the default): no tenants. With a resolver, a user's searches, retrievals and
        uploads are limited to documents of their tenant, and they see the collections without a
        tenant and those of theirs (see :mod:`advisors_app.stores.scoped`).
        """
        return str(self._get("TENANT_RESOLVER"))

    @property
    def TRACE_PAYLOAD_SAMPLE(self) -> float:
        """Share of turns (0 to 1) whose call-log trace keeps each advisor's request and
        response; the others keep times, status and chunk counts only. Turns run while
        ``DEBUG`` is on, and in the admin playground, always keep them."""
        return float(self._get("TRACE_PAYLOAD_SAMPLE"))

    @property
    def OPENTELEMETRY(self) -> bool | dict[str, Any]:
        """Export each turn as OpenTelemetry spans (:mod:`advisors_app.telemetry`): ``False``
        (off), ``True`` (the exporter reads the ``OTEL_*`` environment variables), or
        ``{"endpoint": "http://127.0.0.1:4318", "service_name"?: ..., "headers"?: {...},
        "timeout"?: 10}``. Read when the app starts."""
        value = self._get("OPENTELEMETRY")
        return dict(value) if isinstance(value, dict) else bool(value)

    @property
    def MCP_SERVERS(self) -> dict[str, Any]:
        """stdio MCP servers by slug: ``{"files": {"command": "uvx", "args": [...], "env"?: {...},
        "cwd"?: ..., "connect_timeout"?: 10, "call_timeout"?: 30}}`` (``advisors_app.mcp``).
        Only here, never in the admin: a command line is code the server runs."""
        return dict(self._get("MCP_SERVERS"))

    @property
    def MCP_DISCOVERY_TTL_SECONDS(self) -> float:
        """How long a server's discovered tool list is reused before it is listed again (a
        list-changed notification from the server drops it at once)."""
        return float(self._get("MCP_DISCOVERY_TTL_SECONDS"))


app_settings = AdvisorsSettings()


def cached_by_settings(func: F) -> F:
    """Cache ``func``'s results until the ``ADVISORS`` setting changes."""
    cached = functools.cache(func)
    _cache_clearers.append(cached.cache_clear)
    return cached  # type: ignore[return-value]


def _clear_caches(*, setting: str, **kwargs: Any) -> None:
    if setting == "ADVISORS":
        for clear in _cache_clearers:
            clear()


setting_changed.connect(_clear_caches)
