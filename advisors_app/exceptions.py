"""Refusals: what the Django layer raises when it refuses a caller's request.

A :class:`Refusal` carries what every transport answers with — a stable ``code``, the
``http_status`` a REST view answers, a ``message`` for people, ``fields`` (dotted field path →
messages) — and the error body's other keys (``retry_after`` seconds, ``conversation_id``,
``trace_id``, ``reset_at``). Each transport maps it in one place: REST bodies in
:func:`advisors_app.api.errors.api_exception_handler`, SSE and websocket ``error`` frames (and
MCP tool errors, built from the frame) in :func:`advisors_app.turn.events.error_event`. As DRF's
``APIException`` with ``status_code`` and ``default_code``; the tree follows httpx's
``_exceptions.py``::

    Exception
    └── Refusal                               a caller's request is refused; nothing was done
        ├── TurnError                         a turn is refused before it runs (400 … 500)
        ├── Conflict                          409: the request does not fit the current state
        ├── FeedbackError                     evaluation.feedback: a vote (400, 404)
        ├── UploadRefused                     ingestion.uploads: a limit or quota (413, 429)
        ├── PublishError (ValueError)         definition.versions: lint or build errors (400)
        ├── ChainNotFound (LookupError)       definition.runtime: no enabled chain (404)
        ├── VersionNotFound (LookupError)     definition.runtime: no such label or version (404)
        ├── VersionLookupError (LookupError)  definition.versions: a ref names nothing (404)
        ├── EvalRunError (ValueError)         evaluation.runs: a run cannot be created (400)
        ├── ExperimentError (ValueError)      experiments.editing: an experiment change (400 … 409)
        └── EvaluatorParamsError (ValueError) evaluation.evaluators: bad evaluator params (400)

A subclass sets ``code`` and ``http_status`` as class attributes (its usual answer); an instance
may pass others. Callers that know better still translate a refusal into their own (a view
answering a rollback without a version with 409). Not refusals, so not in the tree: the engine's
errors (:mod:`advisors_app.core.exceptions`; ``error_event`` maps provider failures, a context
overflow, a used-up budget and a guard's block — ``GuardBlockedError``, code ``guard_blocked``,
HTTP 422 — as well), configuration errors (``ChainConfigurationError``,
``McpConfigurationError``) and failures of a tool, an MCP server or a background job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["Conflict", "Refusal", "TurnError"]


class Refusal(Exception):
    """Raised when the app refuses a caller's request; nothing was done.

    ``code``: stable and machine-readable (default ``"invalid"``); ``http_status``: what a REST
    view answers (default 400); ``message``: one sentence for people (also ``str(refusal)``);
    ``fields``: dotted field path → messages (``{}`` when no field is at fault);
    ``retry_after``: seconds to wait before asking again (or ``None``); ``conversation_id``
    and ``trace_id``: the conversation and call log a refusal after a turn's set-up concerns;
    ``reset_at``: the ISO time a used-up budget resets. Spring AI has no counterpart (it
    throws ``IllegalArgumentException``); DRF's ``APIException`` is the model.
    """

    code: str = "invalid"
    http_status: int = 400

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        http_status: int | None = None,
        fields: Mapping[str, Sequence[str]] | None = None,
        retry_after: float | None = None,
        conversation_id: str | None = None,
        trace_id: str | None = None,
        reset_at: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if http_status is not None:
            self.http_status = http_status
        self.fields: dict[str, list[str]] = {
            field: list(messages) for field, messages in (fields or {}).items()
        }
        self.retry_after = retry_after
        self.conversation_id = conversation_id
        self.trace_id = trace_id
        self.reset_at = reset_at


class TurnError(Refusal):
    """Raised when a turn is refused before it runs; nothing was stored (but its call log, for
    ``context_overflow``).

    ``code``: ``"invalid"`` (400, see ``fields``), ``"not_authenticated"`` (401),
    ``"permission_denied"`` (403), ``"chain_not_found"``/``"version_not_found"``/
    ``"not_found"`` (404), ``"conflict"`` (409: the tool calls a resume decides were decided
    meanwhile, or changed; the conversation was started on another chain),
    ``"context_overflow"`` (400: the message alone cannot fit the chat model's context window),
    ``"throttled"`` (429, ``retry_after`` seconds), ``"budget_exceeded"`` (429: a budget
    counting the turn is used up; ``retry_after`` and ``reset_at`` say when it resets) or
    ``"chain_misconfigured"`` (500: the stored chain cannot be built; the message says why,
    ``trace_id`` names the log line). ``fields`` keys are ``message``, ``conversation_id``,
    ``params.options.temperature``, ``chain``, …; ``conversation_id`` is the conversation a
    refusal after the turn's set-up leaves (``None`` for refused input).
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        errors: Mapping[str, Sequence[str]] | None = None,
        http_status: int = 400,
        retry_after: float | None = None,
        trace_id: str | None = None,
        conversation_id: str | None = None,
        reset_at: str | None = None,
    ) -> None:
        super().__init__(
            message,
            code=code,
            http_status=http_status,
            fields=errors,
            retry_after=retry_after,
            conversation_id=conversation_id,
            trace_id=trace_id,
            reset_at=reset_at,
        )

    @property
    def errors(self) -> dict[str, list[str]]:
        """``fields`` under its name before :class:`Refusal` (docs/chains.md names it)."""
        return self.fields


class Conflict(Refusal):
    """Raised when a request does not fit the current state (409 ``conflict``): nothing to roll
    back to, or a delete that other rows refuse (code ``protected``)."""

    code = "conflict"
    http_status = 409
