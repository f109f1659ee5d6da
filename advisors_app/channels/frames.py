"""The chat socket's frames: their size bound, their close codes, and reading a client frame
into its type and turn (:mod:`advisors_app.channels.consumers` documents the protocol)."""

from __future__ import annotations

from typing import Any

from advisors_app.turn import TurnInput
from advisors_app.turn.delivery import resume_errors
from advisors_app.turn.events import TurnError

__all__ = [
    "CLOSE_NOT_AUTHENTICATED",
    "CLOSE_SERVER_SHUTDOWN",
    "CLOSE_TOO_BIG",
    "CLOSE_TOO_MANY_FRAMES",
    "MAX_FRAME_BYTES",
    "invalid_frame",
    "not_json",
    "read_frame",
    "utf8_size",
]

#: Close code for a connection without a logged-in user (4000-4999: application codes).
CLOSE_NOT_AUTHENTICATED = 4401

#: The largest client frame read, in bytes of UTF-8: ample for a message of
#: ``ADVISORS["MAX_MESSAGE_CHARS"]`` with its params or decisions. A larger one is answered with
#: an ``error`` frame, then the socket is closed with 4009 (1009, RFC 6455's "message too big",
#: is for the websocket layer itself: daphne's autobahn refuses it from an application, which
#: may close with 1000 or 3000-4999 only, so the app's code is 4000 + 1009's last digits). Frames
#: past the server's own limit (daphne: ``--websocket-max-message-size``, 1 MiB by default)
#: never reach the consumer: daphne drops the socket (docs/chat-page.md), so keep that limit
#: above this one.
MAX_FRAME_BYTES = 256 * 1024
CLOSE_TOO_BIG = 4009

#: Close code for a connection with more frames waiting than allowed (4000 + HTTP's 429, "too
#: many requests", as 4401 is for 401).
CLOSE_TOO_MANY_FRAMES = 4429

#: Close code for a connection whose turn the server stopped as it shut down, after the
#: ``error`` frame ``server_shutdown`` (4000 + HTTP's 503, "unavailable, try again"; 1001,
#: "going away", is not an application's to send).
CLOSE_SERVER_SHUTDOWN = 4503

_FRAME_TYPES = ("cancel", "feedback", "message", "resume")


def not_json(constant: str) -> Any:
    """Python's json accepts NaN and Infinity; JSON (and PostgreSQL's jsonb) does not."""
    raise ValueError(f"{constant} is not JSON")


def utf8_size(text: str) -> int:
    """``len(text.encode())`` without the copy for text that cannot be past the limit."""
    return len(text) if len(text) * 4 <= MAX_FRAME_BYTES else len(text.encode())


def invalid_frame(errors: dict[str, list[str]]) -> TurnError:
    """The refusal of a malformed frame (``error_event`` makes it the ``error`` frame)."""
    return TurnError("invalid", "The frame is invalid.", errors=errors)


def read_frame(content: Any) -> tuple[str, TurnInput | None]:
    """The frame's type and, for a ``message`` frame, its turn; raises :class:`TurnError`
    (``invalid``) for a malformed frame."""
    if not isinstance(content, dict):
        raise invalid_frame({"frame": ["Expected a JSON object."]})
    kind = content.get("type")
    if kind not in _FRAME_TYPES:
        known = ", ".join(_FRAME_TYPES)
        if "type" not in content:
            raise invalid_frame({"type": [f"This field is required. Known types: {known}."]})
        raise invalid_frame({"type": [f"Unknown frame type {kind!r}. Known types: {known}."]})
    if kind == "cancel":
        unknown = sorted(set(content) - {"type"})
        if unknown:
            raise invalid_frame({name: ["Unknown field."] for name in unknown})
        return kind, None
    if kind == "feedback":  # checked by parse_vote, which names its own fields
        return kind, None
    if kind == "resume":
        errors = resume_errors(content, ("type", "last_event_id"))
        if errors:
            raise invalid_frame(errors)
        return kind, None
    return kind, TurnInput.from_data(content, envelope=("type",), alias=True)
