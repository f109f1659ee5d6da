"""``TurnInput``: what a caller asks of one chat turn, with the same names on every transport.

A turn either sends a ``message`` or resumes a turn paused for tool-call approval with
``decisions`` (one per pending call: ``{"approval_id", "decision": "approve" | "edit" |
"reject", "arguments"?, "reason"?, "grant"?}``, ``grant: true`` on an approval also allows the
tool for the rest of the conversation) and the ``conversation_id``; never both.

REST ``call`` and ``stream`` take it as the JSON body, the websocket as a ``message`` frame
(which may say ``text`` for ``message``, the name frames used first), ``manage.py chat`` from
its options. :meth:`TurnInput.from_data` refuses what is not a turn (not an object, unknown
fields, no message); :meth:`TurnInput.errors` checks each field's shape. Both report field errors
in one shape (``{field: [message, ...]}``), a message's errors under the name the caller used.
:func:`checked_input` is the turn's first step, before any database work: the caller must be
logged in, and a malformed label or version is refused at once (the params cannot be checked
without the version); the other field errors go on to the turn's ``open`` stage
(:mod:`advisors_app.turn.open`), which adds what needs the database (the chain, the version, the
conversation, the params the chain accepts) to the same errors before anything runs, then counts
the user's rate.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from advisors_app.conf import app_settings
from advisors_app.core.tools.approval import (
    ApprovalDecision,
    ToolCallDecision,
    ToolCallDecisionError,
)
from advisors_app.definition.runtime import DRAFT
from advisors_app.exceptions import TurnError
from advisors_app.memory.conversations import conversation_id_errors
from advisors_app.models.versions import LABEL_NAME_VALIDATOR
from advisors_app.validation import FieldErrors, json_value_errors, text_problem

__all__ = [
    "MESSAGE_ALIAS",
    "TURN_FIELDS",
    "Decision",
    "TurnInput",
    "checked_input",
    "parse_decision",
]

#: The fields of a turn, as every transport names them.
TURN_FIELDS = ("message", "decisions", "conversation_id", "params", "label", "version")
#: The keys of one decision.
DECISION_FIELDS = ("approval_id", "decision", "arguments", "reason", "grant")
#: Most decisions one resume may carry (a model reply with more calls is not plausible).
MAX_DECISIONS = 64
#: Longest edit arguments accepted, as JSON text.
MAX_ARGUMENTS_CHARS = 16_000


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision of a resume: the core :class:`ToolCallDecision` and whether it also
    allows the tool for the rest of the conversation (``grant``)."""

    decision: ToolCallDecision
    grant: bool = False


#: The other name a websocket frame may give ``message``.
MESSAGE_ALIAS = "text"


@dataclass(frozen=True, slots=True)
class TurnInput:
    """One turn as the caller sent it (any JSON values; see :meth:`errors`).

    ``message`` is the user's text, ``conversation_id`` the caller's conversation (``None``:
    start one), ``params`` a JSON object (``options``, ``system_params`` and the chain's context
    params), ``label`` or ``version`` the chain version to run (``None``: ``production``).
    ``message_field`` is the name the caller sent the message under (``message`` or, on the
    websocket, ``text``): its errors are reported there.
    """

    message: Any
    conversation_id: Any = None
    params: Any = None
    label: Any = None
    version: Any = None
    message_field: str = "message"
    #: A resume's decisions as sent (``None``: a message turn); see :meth:`resume_decisions`.
    decisions: Any = None
    #: Errors of the body or frame as a whole (unknown fields, no message), found by
    #: :meth:`from_data`; reported with the rest by :meth:`errors`.
    refused: FieldErrors = field(default_factory=dict, compare=False)

    @classmethod
    def from_data(
        cls, data: Any, *, envelope: Collection[str] = (), alias: bool = False
    ) -> TurnInput:
        """The turn in a decoded JSON body or frame; ``envelope`` names fields the transport
        reads itself (the websocket's ``type``), ``alias`` whether ``text`` may stand for
        ``message`` (the websocket's frames). Raises :class:`TurnError` (``invalid``) for
        anything but an object; unknown fields and a missing message are reported by
        :meth:`errors`, together with every other field's."""
        if not isinstance(data, Mapping):
            raise _invalid({"non_field_errors": ["Send a JSON object."]})
        known = (*TURN_FIELDS, MESSAGE_ALIAS) if alias else TURN_FIELDS
        refused: FieldErrors = {
            str(name): [f"Unknown field. Known fields: {', '.join(TURN_FIELDS)}."]
            for name in data
            if name not in known and name not in envelope
        }
        field_name = "message"
        if alias and MESSAGE_ALIAS in data:
            if "message" in data:
                refused["message"] = [
                    f"Send the message as message or as {MESSAGE_ALIAS} (its alias), not both."
                ]
            else:
                field_name = MESSAGE_ALIAS
        if "decisions" in data:
            if field_name in data:
                refused[field_name] = ["Send a message or decisions, not both."]
        elif field_name not in data:
            refused["message"] = ["This field is required."]
        return cls(
            data.get(field_name),
            data.get("conversation_id"),
            data.get("params"),
            data.get("label"),
            data.get("version"),
            message_field=field_name,
            decisions=data.get("decisions"),
            refused=refused,
        )

    @property
    def resumes(self) -> bool:
        """Whether this turn resumes paused tool calls (it carries ``decisions``)."""
        return self.decisions is not None

    def resume_decisions(self) -> tuple[Decision, ...]:
        """The decisions, parsed (call only when :meth:`errors` found none)."""
        return tuple(parse_decision(item) for item in self.decisions)

    def errors(self) -> FieldErrors:
        """Field errors: those :meth:`from_data` found, and of the shapes: the message (a
        non-blank string within ``ADVISORS["MAX_MESSAGE_CHARS"]``), the conversation id, the
        label and version (``{}``: well-formed; the chain may still refuse the params)."""
        errors: FieldErrors = {name: list(messages) for name, messages in self.refused.items()}
        if self.resumes:
            errors.update(_decisions_errors(self.decisions))
            if self.conversation_id is None:
                errors["conversation_id"] = ["Decisions resume a conversation: name it."]
        else:
            problem = None if "message" in errors else _message_problem(self.message)
            if problem:
                errors[self.message_field] = [problem]
        errors.update(conversation_id_errors(self.conversation_id))
        errors.update(_target_errors(self.label, self.version))
        return errors


def checked_input(user: Any, data: TurnInput) -> FieldErrors:
    """The checks of a turn that need no database: the user (``not_authenticated``, 401), then
    the fields — raising :class:`~advisors_app.exceptions.TurnError` ``invalid`` at once when
    the label or version is malformed — and the other field errors, for the ``open`` stage to
    report with the params'."""
    if user is None or not getattr(user, "is_authenticated", False):
        raise TurnError("not_authenticated", "Authentication is required.", http_status=401)
    errors = data.errors()
    if "label" in errors or "version" in errors:
        raise _invalid(errors)
    return errors


def _invalid(errors: FieldErrors) -> TurnError:
    return TurnError("invalid", "The request is invalid.", errors=errors)


def parse_decision(item: Any) -> Decision:
    """One decision of the JSON shape; raises :class:`ToolCallDecisionError` or
    ``ValueError`` saying what is wrong."""
    if not isinstance(item, Mapping):
        raise ValueError("Send each decision as a JSON object.")
    unknown = sorted(str(key) for key in item if key not in DECISION_FIELDS)
    if unknown:
        raise ValueError(f"Unknown keys {unknown}; known: {', '.join(DECISION_FIELDS)}.")
    approval_id, reason, grant = item.get("approval_id"), item.get("reason"), item.get("grant")
    if not isinstance(approval_id, str) or not approval_id or len(approval_id) > 255:
        raise ValueError("approval_id must be the pending call's id (a non-empty string).")
    if reason is not None and (not isinstance(reason, str) or len(reason) > 2000):
        raise ValueError("reason must be a text of at most 2000 characters.")
    if reason is not None and text_problem(reason):
        raise ValueError(f"reason: {text_problem(reason)}")
    if grant is not None and not isinstance(grant, bool):
        raise ValueError("grant must be true or false.")
    arguments = item.get("arguments")
    kind = item.get("decision")
    if arguments is not None:
        if kind != ApprovalDecision.EDIT.value:
            raise ValueError("arguments go with an edit only.")
        if not isinstance(arguments, Mapping):
            raise ValueError("Send the edit's arguments as a JSON object.")
        text = json.dumps(arguments)
        if len(text) > MAX_ARGUMENTS_CHARS:
            raise ValueError(f"The edit's arguments exceed {MAX_ARGUMENTS_CHARS} characters.")
        problems = json_value_errors(arguments, "arguments")
        if problems:
            raise ValueError("; ".join(f"{k}: {' '.join(v)}" for k, v in problems.items()))
    if reason is not None and kind != ApprovalDecision.REJECT.value:
        raise ValueError("reason goes with a reject only.")
    decision = ToolCallDecision.from_dict(item)
    if grant and decision.decision is ApprovalDecision.REJECT:
        raise ValueError("grant allows a tool: it goes with approve or edit, not reject.")
    return Decision(decision, bool(grant))


def _decisions_errors(decisions: Any) -> FieldErrors:
    if not isinstance(decisions, list) or not decisions:
        return {"decisions": ["Send a non-empty list of decisions, one per pending call."]}
    if len(decisions) > MAX_DECISIONS:
        return {"decisions": [f"Send at most {MAX_DECISIONS} decisions."]}
    problems = []
    for number, item in enumerate(decisions, start=1):
        try:
            parse_decision(item)
        except (ToolCallDecisionError, ValueError) as exc:
            problems.append(f"Decision {number}: {exc}")
    ids = [item.get("approval_id") for item in decisions if isinstance(item, Mapping)]
    if len(ids) != len(set(map(str, ids))):
        problems.append("Send one decision per approval_id.")
    return {"decisions": problems} if problems else {}


def _message_problem(message: Any) -> str | None:
    if message is None:
        return "This field is required."
    if not isinstance(message, str):
        return "Not a valid string."
    if not message.strip():
        return "This field may not be blank."
    problem = text_problem(message)
    if problem:
        return problem
    limit = app_settings.MAX_MESSAGE_CHARS
    if len(message) > limit:
        return f"Ensure this field has no more than {limit} characters (it has {len(message)})."
    return None


def _target_errors(label: Any, version: Any) -> FieldErrors:
    errors: FieldErrors = {}
    if label is not None and version is not None:
        errors["version"] = ["Send a label or a version, not both."]
    if label is not None and not (
        isinstance(label, str) and LABEL_NAME_VALIDATOR.regex.match(label)
    ):
        errors["label"] = [str(LABEL_NAME_VALIDATOR.message)]
    if version not in (None, DRAFT) and (
        isinstance(version, bool) or not isinstance(version, int) or version < 1
    ):
        errors["version"] = ['Enter a version number (1, 2, ...) or "draft".']
    return errors
