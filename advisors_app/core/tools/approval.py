"""Human approval of tool calls (Spring AI 2.1 tool-call confirmation).

A tool call may need a person's decision before it runs: the tool says so itself
(``@tool(requires_approval=True)`` or a predicate over its arguments) or a
:class:`ToolCallConfirmationPolicy` names it (the chain's ``"approval"`` params compile into one).
When a model reply holds any such call, the :class:`~.manager.ToolCallingManager` runs **no** call
of that reply and raises :class:`ToolApprovalRequiredError` carrying one :class:`PendingToolCall`
per call that waits; the application later passes one :class:`ToolCallDecision` per pending call
back and the manager runs the reply's calls as decided. Nothing is kept between the two: the
pause is an ordinary response and the resume an ordinary request over the stored conversation.

Divergences from Spring AI: a decision may also *edit* the arguments (LangChain's
``HumanInTheLoopMiddleware``), not only allow or deny; a policy condition is a JSON Schema over
the arguments, so a chain stored as JSON can carry it; a policy says which decisions a call
allows and why it needs approval (the text a person is shown).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

import jsonschema

from ..messages import Message, ToolCall

if TYPE_CHECKING:
    from .callback import ToolCallback

__all__ = [
    "ApprovalDecision",
    "ApprovalPredicate",
    "ApprovalRequirement",
    "PendingToolCall",
    "ToolApprovalRequiredError",
    "ToolCallConfirmationPolicy",
    "ToolCallDecision",
    "ToolCallDecisionError",
    "parse_arguments",
]

#: A tool's own condition: receives the model's arguments (a dict) and returns whether the call
#: needs approval.
ApprovalPredicate = Callable[[Mapping[str, Any]], bool]


class ApprovalDecision(StrEnum):
    """What a person decided about one pending call."""

    APPROVE = "approve"
    EDIT = "edit"
    REJECT = "reject"


ALL_DECISIONS: tuple[str, ...] = tuple(d.value for d in ApprovalDecision)


def parse_arguments(arguments: str) -> dict[str, Any] | None:
    """The model's JSON argument text as a dict: blank is ``{}``; ``None`` when it is not a
    JSON object (the call will fail on its arguments anyway; a policy then asks for approval)."""
    text = arguments.strip() or "{}"
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


class ToolCallDecisionError(ValueError):
    """Raised when resume decisions do not fit the pending calls: one missing, unknown, twice,
    a decision the call does not allow, or edit arguments that are not a JSON object."""


@dataclass(frozen=True, slots=True, init=False)
class ToolCallDecision:
    """A person's decision on one pending tool call (Spring AI ``ToolCallDecision``).

    ``approval_id`` is the pending call's approval id, which is the model's tool call id.
    ``decision`` is ``"approve"``, ``"edit"`` or ``"reject"``; ``arguments`` (``edit`` only,
    required there) are the new arguments, a dict or JSON object text, stored as canonical JSON
    text; ``reason`` (``reject``) is what the model reads as the tool's result. Raises
    :class:`ToolCallDecisionError` for an unknown decision, missing or non-object edit
    arguments. Spring AI's decision is allow/deny; ``edit`` follows LangChain.
    """

    approval_id: str
    decision: ApprovalDecision
    arguments: str | None = None
    reason: str | None = None

    def __init__(
        self,
        approval_id: str,
        decision: ApprovalDecision | str,
        arguments: Mapping[str, Any] | str | None = None,
        reason: str | None = None,
    ) -> None:
        if not isinstance(approval_id, str) or not approval_id:
            raise ToolCallDecisionError("approval_id must be a non-empty string")
        try:
            kind = ApprovalDecision(decision)
        except ValueError:
            raise ToolCallDecisionError(
                f"decision for {approval_id!r} must be one of {', '.join(ALL_DECISIONS)}, "
                f"got {decision!r}"
            ) from None
        text: str | None = None
        if kind is ApprovalDecision.EDIT:
            if arguments is None:
                raise ToolCallDecisionError(f"an edit of {approval_id!r} needs 'arguments'")
            if isinstance(arguments, str):
                parsed = parse_arguments(arguments)
            else:
                parsed = dict(arguments) if isinstance(arguments, Mapping) else None
            if parsed is None:
                raise ToolCallDecisionError(
                    f"edit arguments of {approval_id!r} must be a JSON object, got {arguments!r}"
                )
            text = json.dumps(parsed, sort_keys=True, separators=(",", ":"))
        object.__setattr__(self, "approval_id", approval_id)
        object.__setattr__(self, "decision", kind)
        object.__setattr__(self, "arguments", text)
        object.__setattr__(self, "reason", reason)

    @classmethod
    def approve(cls, approval_id: str) -> ToolCallDecision:
        return cls(approval_id, ApprovalDecision.APPROVE)

    @classmethod
    def edit(cls, approval_id: str, arguments: Mapping[str, Any] | str) -> ToolCallDecision:
        return cls(approval_id, ApprovalDecision.EDIT, arguments)

    @classmethod
    def reject(cls, approval_id: str, reason: str | None = None) -> ToolCallDecision:
        return cls(approval_id, ApprovalDecision.REJECT, reason=reason)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCallDecision:
        """From the REST shape ``{"approval_id", "decision", "arguments"?, "reason"?}``."""
        if "approval_id" not in data or "decision" not in data:
            raise ToolCallDecisionError(
                f"a decision needs 'approval_id' and 'decision', got keys {sorted(data)}"
            )
        return cls(data["approval_id"], data["decision"], data.get("arguments"), data.get("reason"))

    def to_dict(self) -> dict[str, Any]:
        """The REST shape; ``arguments`` as a dict, keys without a value left out."""
        out: dict[str, Any] = {"approval_id": self.approval_id, "decision": self.decision.value}
        if self.arguments is not None:
            out["arguments"] = json.loads(self.arguments)
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    def rejection_text(self, tool_name: str) -> str:
        """The tool response a rejected call sends to the model."""
        text = f"The user rejected the call to tool '{tool_name}'; it was not executed."
        return f"{text} Reason: {self.reason}" if self.reason else text


@dataclass(frozen=True, slots=True)
class ApprovalRequirement:
    """Why a call needs approval and which decisions it allows (a policy's verdict)."""

    reason: str
    allowed_decisions: tuple[str, ...] = ALL_DECISIONS


@dataclass(frozen=True, slots=True)
class PendingToolCall:
    """One call of a paused reply that waits for a decision.

    ``approval_id`` is the tool call id; ``arguments`` the model's arguments as a dict (the raw
    text when they are not a JSON object); ``allowed_decisions`` and ``reason`` come from the
    policy.
    """

    approval_id: str
    tool: str
    arguments: Mapping[str, Any] | str
    allowed_decisions: tuple[str, ...]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """``{"approval_id", "tool", "arguments", "allowed_decisions", "reason"}`` (JSON-ready)."""
        return {
            "approval_id": self.approval_id,
            "tool": self.tool,
            "arguments": (
                self.arguments if isinstance(self.arguments, str) else dict(self.arguments)
            ),
            "allowed_decisions": list(self.allowed_decisions),
            "reason": self.reason,
        }


class ToolApprovalRequiredError(RuntimeError):
    """Raised by ``ToolCallingManager.execute_tool_calls`` when calls of a reply need approval.

    Spring AI ``ToolCallConfirmationRequiredException``. No call of the reply ran. ``pending``
    holds the calls that wait (in the model's order); ``history`` is the turn's history
    ending with the assistant message that requested them. The ``ToolCallingAdvisor`` turns it
    into a response with finish reason ``"APPROVAL_REQUIRED"``.
    """

    FINISH_REASON: ClassVar[str] = "APPROVAL_REQUIRED"

    def __init__(self, pending: Sequence[PendingToolCall], history: Sequence[Message]) -> None:
        names = ", ".join(f"{p.tool} ({p.approval_id})" for p in pending)
        super().__init__(f"tool calls need approval: {names}")
        self.pending = tuple(pending)
        self.history = tuple(history)


_RULE_VALUES = ("always", "never")


@dataclass(frozen=True, slots=True)
class _Rule:
    mode: str  # "always", "never" or "when"
    validator: Any = None
    reason: str | None = None
    allowed_decisions: tuple[str, ...] = ALL_DECISIONS


def _compile_rule(tool_name: str, value: Any) -> _Rule:
    where = f"approval rule for tool {tool_name!r}"
    if isinstance(value, str):
        if value not in _RULE_VALUES:
            raise ValueError(
                f"{where} must be 'always', 'never' or {{'when': <JSON Schema>}}, got {value!r}"
            )
        return _Rule(value)
    if not isinstance(value, Mapping) or "when" not in value:
        raise ValueError(
            f"{where} must be 'always', 'never' or {{'when': <JSON Schema>}}, got {value!r}"
        )
    unknown = set(value) - {"when", "reason", "allowed_decisions"}
    if unknown:
        raise ValueError(
            f"{where} has unknown keys {sorted(unknown)}; allowed: when, reason, allowed_decisions"
        )
    schema = value["when"]
    if not isinstance(schema, Mapping | bool):
        raise ValueError(f"{where}: 'when' must be a JSON Schema object, got {schema!r}")
    validator_class = jsonschema.validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as error:
        raise ValueError(f"{where}: 'when' is not a valid JSON Schema: {error.message}") from error
    reason = value.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ValueError(f"{where}: 'reason' must be a string, got {reason!r}")
    allowed = tuple(value.get("allowed_decisions", ALL_DECISIONS))
    bad = [d for d in allowed if d not in ALL_DECISIONS]
    if bad or not allowed:
        raise ValueError(
            f"{where}: 'allowed_decisions' must be a non-empty list of "
            f"{', '.join(ALL_DECISIONS)}, got {list(allowed)!r}"
        )
    return _Rule("when", validator_class(schema), reason, allowed)


class ToolCallConfirmationPolicy:
    """Which tool calls need a person's approval (Spring AI ``ToolCallConfirmationPolicy``).

    ``rules`` maps a tool name to ``"always"``, ``"never"`` or ``{"when": <JSON Schema>,
    "reason"?: str, "allowed_decisions"?: [...]}`` — the chain params' ``"approval"`` object as
    is. A ``when`` rule asks for approval when the arguments (a JSON object) *are valid* against
    the schema (``{}`` matches every call); arguments that are not a JSON object always ask.
    A rule for a tool overrides the tool's own ``requires_approval`` (``"never"`` switches it
    off for this chain); a tool without a rule is asked through
    ``ToolCallback.requires_approval_for``. With no rules this is Spring's default policy: the
    tools' own declarations. ``ValueError`` at construction names the tool and the bad rule.
    Subclass and override :meth:`requirement` for other policies (keep it free of side
    effects: it runs again on resume).
    """

    def __init__(self, rules: Mapping[str, Any] | None = None) -> None:
        if rules is not None and not isinstance(rules, Mapping):
            raise ValueError(f"approval rules must be an object of tool names, got {rules!r}")
        self._rules = {name: _compile_rule(name, value) for name, value in (rules or {}).items()}

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> ToolCallConfirmationPolicy:
        """The policy of a tool-calling advisor's ``"approval"`` params (``None``: declarations
        only)."""
        return cls(params)

    @property
    def tool_names(self) -> frozenset[str]:
        """The tools that have a rule."""
        return frozenset(self._rules)

    def may_require_approval(self, tool_name: str, callback: ToolCallback | None) -> bool:
        """Whether some call of ``tool_name`` could need approval under this policy."""
        rule = self._rules.get(tool_name)
        if rule is None:
            return callback is not None and callback.may_require_approval
        return rule.mode != "never"

    def requirement(
        self, call: ToolCall, callback: ToolCallback | None
    ) -> ApprovalRequirement | None:
        """What ``call`` needs: ``None`` when it may run, else why and the decisions allowed.

        ``callback`` is the tool the call resolves to (``None`` for a name nobody knows).
        """
        rule = self._rules.get(call.name)
        arguments = parse_arguments(call.arguments)
        if rule is None:
            if callback is None or not callback.requires_approval_for(arguments):
                return None
            return ApprovalRequirement(f"Tool '{call.name}' requires approval before it runs.")
        if rule.mode == "never":
            return None
        if rule.mode == "when" and arguments is not None and not rule.validator.is_valid(arguments):
            return None
        reason = rule.reason or f"Tool '{call.name}' requires approval before it runs."
        return ApprovalRequirement(reason, rule.allowed_decisions)


def index_decisions(
    decisions: Iterable[ToolCallDecision | Mapping[str, Any]],
) -> dict[str, ToolCallDecision]:
    """Decisions by approval id; dicts are read with :meth:`ToolCallDecision.from_dict`.

    Raises :class:`ToolCallDecisionError` for a second decision on one id.
    """
    indexed: dict[str, ToolCallDecision] = {}
    for item in decisions:
        decision = item if isinstance(item, ToolCallDecision) else ToolCallDecision.from_dict(item)
        if decision.approval_id in indexed:
            raise ToolCallDecisionError(f"two decisions for {decision.approval_id!r}")
        indexed[decision.approval_id] = decision
    return indexed
