"""Spring AI's filter-expression language, parsed into :mod:`.filters` nodes.

Spring AI ``FilterExpressionTextParser`` (grammar ``Filters.g4``)::

    genre == 'drama' && year >= 2020
    (year >= 2020 OR country == "BG") AND city NIN ["Sofia", "Plovdiv"]
    NOT country == 'BG' || tenant in ['t1', 't2'] && isOpen == true && price <= 9.5

Operators ``== != > >= < <=``, ``in [..]``, ``nin [..]`` / ``not in [..]``, ``is null``,
``is not null``, ``&&`` / ``and`` / ``AND``, ``||`` / ``or`` / ``OR``, ``NOT`` / ``not``,
parentheses. ``NOT`` binds tighter than ``AND``, which binds tighter than ``OR`` (as Spring's
current parser). Constants: strings in single or double quotes (a backslash escapes the next
character), integers (an optional ``L`` suffix is accepted), decimals, ``true``/``false``.
Keys are identifiers (``a_1``), dotted identifiers (``a.b``) or quoted strings.

The text is only ever turned into filter objects by a real parser (``lark``, LALR); it is never
pasted into SQL or evaluated. Invalid text raises ``ValueError`` naming the line and column.
Divergence: an optional leading ``WHERE`` is accepted, parse results are cached per parser
class (bounded), and texts longer than :data:`MAX_FILTER_LENGTH` characters are refused.
"""

from __future__ import annotations

import functools
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput

from .filters import (
    And,
    Eq,
    Filter,
    Gt,
    Gte,
    In,
    IsNotNull,
    IsNull,
    Lt,
    Lte,
    Ne,
    Nin,
    Not,
    Or,
)

__all__ = ["MAX_FILTER_LENGTH", "FilterExpressionTextParser", "parse_filter", "resolve_filter"]

#: Longest filter text accepted, in characters (bounds parsing work for untrusted input).
MAX_FILTER_LENGTH = 4096

_GRAMMAR = r"""
?start: WHERE? or_expr

?or_expr: and_expr (OR and_expr)*
?and_expr: not_expr (AND not_expr)*
?not_expr: NOT not_expr          -> negation
         | atom
?atom: "(" or_expr ")"
     | key COMPARE constant      -> comparison
     | key IN array              -> inclusion
     | key NOT IN array          -> exclusion
     | key NIN array             -> exclusion
     | key IS NULL               -> is_null
     | key IS NOT NULL           -> is_not_null

array: "[" constant ("," constant)* "]"

key: IDENTIFIER ("." IDENTIFIER)?  -> plain_key
   | QUOTED_STRING                 -> quoted_key

constant: SIGNED_INT LONG_SUFFIX?  -> integer
        | SIGNED_DECIMAL           -> decimal
        | QUOTED_STRING            -> text
        | BOOLEAN                  -> boolean

COMPARE: "==" | "!=" | ">=" | "<=" | ">" | "<"
WHERE.3: /(WHERE|where)(?![A-Za-z0-9_])/
AND.3: /(AND|and)(?![A-Za-z0-9_])/ | "&&"
OR.3: /(OR|or)(?![A-Za-z0-9_])/ | "||"
NIN.3: /(NIN|nin)(?![A-Za-z0-9_])/
IN.3: /(IN|in)(?![A-Za-z0-9_])/
NOT.3: /(NOT|not)(?![A-Za-z0-9_])/
IS.3: /(IS|is)(?![A-Za-z0-9_])/
NULL.3: /(NULL|null)(?![A-Za-z0-9_])/
BOOLEAN.3: /(TRUE|true|FALSE|false)(?![A-Za-z0-9_])/
LONG_SUFFIX: "L" | "l"
SIGNED_DECIMAL.2: /[+-]?(\d+\.\d*|\.\d+)/
SIGNED_INT: /[+-]?\d+/
IDENTIFIER: /[A-Za-z_][A-Za-z0-9_]*/
QUOTED_STRING: /'(?:[^'\\]|\\.)*'/s | /"(?:[^"\\]|\\.)*"/s

%ignore /[ \t\r\n]+/
"""

_COMPARISONS: dict[str, type[Filter]] = {
    "==": Eq,
    "!=": Ne,
    ">": Gt,
    ">=": Gte,
    "<": Lt,
    "<=": Lte,
}


def _unquote(token: str) -> str:
    body = token[1:-1]
    out: list[str] = []
    chars = iter(body)
    for char in chars:
        # As Spring's grammar: a backslash escapes whatever character follows it.
        out.append(next(chars, "\\") if char == "\\" else char)
    return "".join(out)


@v_args(inline=True)
class _ToFilter(Transformer[Token, Filter]):
    def or_expr(self, *items: Any) -> Filter:
        return Or(*(i for i in items if isinstance(i, Filter)))

    def and_expr(self, *items: Any) -> Filter:
        return And(*(i for i in items if isinstance(i, Filter)))

    def negation(self, _not: Token, operand: Filter) -> Filter:
        return Not(operand)

    def start(self, *items: Any) -> Filter:
        return next(i for i in items if isinstance(i, Filter))

    def comparison(self, key: str, op: Token, value: Any) -> Filter:
        return _COMPARISONS[str(op)](key, value)  # type: ignore[call-arg]

    def inclusion(self, key: str, _in: Token, values: tuple[Any, ...]) -> Filter:
        return In(key, values)

    def exclusion(self, key: str, *rest: Any) -> Filter:
        return Nin(key, rest[-1])

    def is_null(self, key: str, _is: Token, _null: Token) -> Filter:
        return IsNull(key)

    def is_not_null(self, key: str, _is: Token, _not: Token, _null: Token) -> Filter:
        return IsNotNull(key)

    def array(self, *values: Any) -> tuple[Any, ...]:
        return values

    def plain_key(self, *parts: Token) -> str:
        return ".".join(str(p) for p in parts)

    def quoted_key(self, token: Token) -> str:
        return _unquote(str(token))

    def integer(self, token: Token, _suffix: Token | None = None) -> int:
        return int(str(token))

    def decimal(self, token: Token) -> float:
        return float(str(token))

    def text(self, token: Token) -> str:
        return _unquote(str(token))

    def boolean(self, token: Token) -> bool:
        return str(token).lower() == "true"


@functools.cache
def _lark() -> Lark:
    return Lark(_GRAMMAR, parser="lalr", maybe_placeholders=False)


def _describe(error: UnexpectedInput, text: str) -> str:
    if isinstance(error, UnexpectedEOF):
        return "unexpected end of expression"
    if isinstance(error, UnexpectedCharacters):
        return f"unexpected character {text[error.pos_in_stream or 0]!r}"
    token = getattr(error, "token", None)
    if token is not None and getattr(token, "type", "") == "$END":
        return "unexpected end of expression"
    return f"unexpected {str(token)!r}" if token is not None else "invalid syntax"


@functools.lru_cache(maxsize=512)
def parse_filter(text: str) -> Filter:
    """Parse ``text`` into a filter expression (cached); see :class:`FilterExpressionTextParser`."""
    if not isinstance(text, str):
        raise ValueError(f"filter expression text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("filter expression text cannot be null or empty")
    if len(text) > MAX_FILTER_LENGTH:
        raise ValueError(
            f"filter expression is {len(text)} characters long; at most {MAX_FILTER_LENGTH} allowed"
        )
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as error:
        line, column = error.line, error.column
        token = getattr(error, "token", None)
        at_end = isinstance(error, UnexpectedEOF) or getattr(token, "type", "") == "$END"
        if at_end or line in (None, -1):
            line, column = text.count("\n") + 1, len(text.rsplit("\n", 1)[-1]) + 1
        raise ValueError(
            f"Invalid filter expression at line {line}, column {column}: "
            f"{_describe(error, text)} in {text!r}"
        ) from None
    try:
        return _ToFilter().transform(tree)
    except RecursionError:
        raise ValueError("Invalid filter expression: nested too deeply") from None
    except LarkError as error:
        # Transformer errors wrap the ValueError a node raised (e.g. a non-finite number).
        cause = error.__context__ or error
        raise ValueError(f"Invalid filter expression {text!r}: {cause}") from None


class FilterExpressionTextParser:
    """Parses Spring AI's filter-expression text into :class:`~.filters.Filter` nodes.

    ``FilterExpressionTextParser().parse("genre == 'drama' && year >= 2020")`` returns
    ``And(Eq("genre", "drama"), Gte("year", 2020))``. Raises ``ValueError`` naming the line
    and column of the first error (Spring raises ``FilterExpressionParseException``).
    """

    __slots__ = ()

    def parse(self, text: str) -> Filter:
        return parse_filter(text)


def resolve_filter(value: Any, parameter: str = "filter_expression") -> Filter | None:
    """A filter from an expression object, filter text, or ``None``/blank text (no filter).

    Raises ``ValueError`` naming ``parameter`` when the text is invalid or the value is of
    another type (bug case B19: objects are used as they are, never turned into text).
    """
    if value is None:
        return None
    if isinstance(value, Filter):
        return value
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            return parse_filter(value)
        except ValueError as error:
            raise ValueError(f"{parameter}: {error}") from None
    raise ValueError(
        f"{parameter} must be a filter expression or filter text, got {type(value).__name__}"
    )
