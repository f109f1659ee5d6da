"""Safe, real tools for the demo chains: a calculator, the UTC time, the Python version and
the user's notes.

They are registered in the project tool registry
(:data:`advisors_app.definition.tools.tool_registry`)
by :class:`~advisors_app.demo.apps.DemoConfig`, so chains enable them by name. None of them
can reach the network, the file system or the interpreter's namespace: the calculator parses
arithmetic with :mod:`ast` and evaluates only a whitelist of node types (never ``eval``).

``save_note`` is the demo's tool with a visible side effect: it writes a
:class:`~advisors_app.demo.models.DemoNote` for the user the turn is for, and declares
``requires_approval=True``, so the user approves (or edits, or rejects) each call before it
runs. ``list_notes`` only reads and needs no approval. Both find the user in the tool context
under :data:`advisors_app.core.attributes.PRINCIPAL` (the tool-calling advisor puts the turn's
principal there) and refuse to run without one.
"""

from __future__ import annotations

import ast
import datetime
import math
import operator
import platform
import sys
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from advisors_app.core.attributes import PRINCIPAL
from advisors_app.core.tools import FunctionToolCallback, ToolContext, ToolRegistry, tool

__all__ = [
    "DEMO_TOOLS",
    "LISTED_NOTES",
    "MAX_EXPRESSION_CHARS",
    "MAX_RESULT_DIGITS",
    "NoPrincipalError",
    "calculate",
    "calculator",
    "current_utc_time",
    "list_notes",
    "python_version",
    "register_demo_tools",
    "save_note",
]

#: Longest expression the calculator accepts, in characters.
MAX_EXPRESSION_CHARS = 200
#: Largest integer result (and intermediate value) the calculator computes, in decimal digits.
MAX_RESULT_DIGITS = 1000

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def _digits(value: int | float) -> float:
    """Decimal digits of ``|value|`` (at least 1), as a float so huge values never overflow."""
    magnitude = abs(value)
    return 1.0 if magnitude < 10 else math.log10(magnitude) + 1


def _check_size(value: Any) -> int | float:
    if isinstance(value, complex):
        raise ValueError("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("the result is too large")
    if isinstance(value, int) and _digits(value) > MAX_RESULT_DIGITS:
        raise ValueError(f"the result would have more than {MAX_RESULT_DIGITS} digits")
    return value  # type: ignore[no-any-return]


def _power(base: int | float, exponent: int | float) -> Any:
    # Estimate the size before computing: 9 ** 9 ** 9 must be refused, not attempted.
    whole = isinstance(base, int) and isinstance(exponent, int)
    if (
        whole
        and exponent > 0
        and abs(base) > 1
        and exponent * math.log10(abs(base)) > MAX_RESULT_DIGITS
    ):
        raise ValueError(f"the result would have more than {MAX_RESULT_DIGITS} digits")
    try:
        return operator.pow(base, exponent)
    except OverflowError:
        raise ValueError("the result is too large") from None


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant):
        # bool is an int subclass: True + True is not arithmetic the user wrote.
        if type(node.value) in (int, float):
            return _check_size(node.value)
        raise ValueError(f"only numbers are allowed, not {node.value!r}")
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            return _check_size(_power(left, right))
        try:
            return _check_size(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
    raise ValueError(f"{type(node).__name__} is not allowed (only numbers, + - * / // % ** ( ))")


def calculate(expression: str) -> int | float:
    """The value of an arithmetic ``expression`` (``"2 * (3 + 4) ** 2"`` → ``98``).

    Numbers (int, float, scientific notation), ``+ - * / // % **``, unary ``+ -`` and
    parentheses only. Raises ``ValueError`` for anything else (names, attributes, calls,
    strings, comparisons...), for an expression longer than :data:`MAX_EXPRESSION_CHARS`, for
    division by zero, for complex or infinite results, and for integer results above
    :data:`MAX_RESULT_DIGITS` digits (checked before a power is computed, so ``9 ** 9 ** 9`` is
    refused at once).
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {exc.msg}") from None
    return _evaluate(tree)


@tool(name="calculator")
def calculator(
    expression: Annotated[str, Field(description="Arithmetic, e.g. 12 * (3 + 4) / 2")],
) -> str:
    """Compute arithmetic the user asks for (+ - * / // % ** and parentheses)."""
    return str(calculate(expression))


@tool(name="current_utc_time")
def current_utc_time() -> str:
    """The current date and time in UTC, when the user asks what time or day it is."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


@tool(name="python_version")
def python_version() -> str:
    """The version of Python this server runs, when the user asks for it."""
    return f"{platform.python_implementation()} {platform.python_version()} ({sys.platform})"


#: How many notes ``list_notes`` returns (the latest first).
LISTED_NOTES = 10


class NoPrincipalError(RuntimeError):
    """Raised by the notes tools when the tool context names no user to act for."""


def _principal(context: ToolContext) -> Any:
    user = context.get(PRINCIPAL)
    if user is None or getattr(user, "pk", None) is None:
        raise NoPrincipalError(
            f"no user to act for: the tool context has no saved user under {PRINCIPAL!r} "
            "(the notes tools need a signed-in user's turn)"
        )
    return user


@tool(
    name="save_note",
    requires_approval=True,
    description="Save a short note for the user, when they ask you to remember or note "
    "something. The user approves the call before the note is stored.",
)
async def save_note(
    text: Annotated[str, Field(description="The note to save, in the user's words")],
    context: ToolContext,
) -> str:
    """Store ``text`` as a :class:`~advisors_app.demo.models.DemoNote` of the turn's user.

    Returns ``"Saved note #<id>: <text>"``. Raises ``ValueError`` for a blank text or one
    longer than :data:`~advisors_app.demo.models.MAX_NOTE_CHARS` characters and
    :class:`NoPrincipalError` without a user (the tool loop sends either back to the model as
    the tool's error).
    """
    from .models import MAX_NOTE_CHARS, DemoNote

    user = _principal(context)
    text = text.strip()
    if not text:
        raise ValueError("the note is empty")
    if len(text) > MAX_NOTE_CHARS:
        raise ValueError(
            f"the note has {len(text)} characters; at most {MAX_NOTE_CHARS} are allowed"
        )
    note = await DemoNote.objects.acreate(owner_id=user.pk, text=text)
    return f"Saved note #{note.pk}: {note.text}"


@tool(name="list_notes")
async def list_notes(context: ToolContext) -> str:
    """The user's latest notes (at most 10, newest first), when they ask what they noted."""
    from .models import DemoNote

    user = _principal(context)
    latest = DemoNote.objects.filter(owner_id=user.pk).order_by("-created_at", "-pk")
    notes = [
        f"#{note.pk} ({note.created_at:%Y-%m-%d %H:%M} UTC): {note.text}"
        async for note in latest[:LISTED_NOTES]
    ]
    if not notes:
        return "You have no notes yet."
    return "Your latest notes:\n" + "\n".join(notes)


#: The demo's tools, by name.
DEMO_TOOLS: tuple[FunctionToolCallback, ...] = (
    calculator,
    current_utc_time,
    python_version,
    save_note,
    list_notes,
)


def register_demo_tools(registry: ToolRegistry | None = None) -> None:
    """Register :data:`DEMO_TOOLS` (default: in the project tool registry); idempotent."""
    if registry is None:
        from advisors_app.definition.tools import tool_registry as registry
    for callback in DEMO_TOOLS:
        registry.register(callback, replace=True)
