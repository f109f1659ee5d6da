"""Tools the model may call (Spring AI ``ToolCallback``, ``ToolDefinition``, ``@Tool``).

``@tool`` turns a typed function, plain or ``async``, into a :class:`ToolCallback`: the JSON
Schema of its arguments comes from the type hints (through Pydantic, so ``Annotated[str,
Field(description=...)]``, ``Literal``, enums, dataclasses and models all work), the description
from the docstring. A parameter annotated :class:`ToolContext` is not part of the schema: it
receives ``ToolCallingChatOptions.tool_context``, which is never sent to the model.

A call validates the model's arguments against the schema first (Pydantic's JSON mode: it
accepts the usual lenient forms such as ``"5"`` for an integer) and only then runs the function;
a plain function runs in a worker thread, never on the event loop. The result goes back to the
model as text: a ``str`` as is, anything else as JSON (Spring AI's
``DefaultToolCallResultConverter``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

import pydantic
import pydantic_core

from ..mappings import ReadOnlyMap, freeze

logger = logging.getLogger(__name__)

__all__ = [
    "FunctionToolCallback",
    "ToolArgumentsError",
    "ToolCallback",
    "ToolContext",
    "ToolDefinition",
    "convert_tool_result",
    "tool",
]


class ToolContext(ReadOnlyMap):
    """Read-only values the application gives tools (``ToolCallingChatOptions.tool_context``).

    Annotate a tool parameter with this type to receive it; the model never sees it.
    """

    __slots__ = ()


class ToolArgumentsError(ValueError):
    """Raised when the model's arguments for a tool are not valid JSON or break its schema."""


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What the model is told about a tool: ``name``, ``description`` and ``input_schema``.

    ``input_schema`` is a JSON Schema object (a dict) describing the arguments object.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not self.name.strip():
            raise ValueError("name cannot be null or empty")
        if self.input_schema is None:
            object.__setattr__(
                self, "input_schema", {"type": "object", "properties": {}, "required": []}
            )

    @property
    def input_schema_json(self) -> str:
        """The schema as canonical JSON text (sorted keys), for hashing and providers."""
        return json.dumps(self.input_schema, sort_keys=True, separators=(",", ":"))


class ToolCallback:
    """A tool: its :class:`ToolDefinition`, ``return_direct`` flag and ``call``.

    Subclass it for tools that are not Python functions (remote or MCP tools); ``@tool`` builds
    one from a function. ``await call(arguments, tool_context)`` takes the model's JSON argument
    text and returns the text sent back to the model. Raise :class:`ToolArgumentsError` for bad
    arguments; any exception is turned into a tool response by the ``ToolCallingManager``.
    """

    __slots__ = ()

    @property
    def definition(self) -> ToolDefinition:
        raise NotImplementedError

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def return_direct(self) -> bool:
        """``True``: the result goes straight to the caller instead of back to the model."""
        return False

    def requires_approval_for(self, arguments: Mapping[str, Any] | None) -> bool:
        """Whether a call with ``arguments`` (the model's JSON object; ``None`` when they are
        not one) needs a person's approval before it runs (Spring AI ``requiresConfirmation``).

        Default ``False``. A chain's ``ToolCallConfirmationPolicy`` rule for the tool overrides
        it.
        """
        return False

    @property
    def may_require_approval(self) -> bool:
        """Whether some call of this tool could need approval (:meth:`requires_approval_for`
        is not constantly ``False``). Default ``False``."""
        return False

    async def call(self, arguments: str, tool_context: Mapping[str, Any] | None = None) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def convert_tool_result(result: Any) -> str:
    """The text a tool result is sent as: a ``str`` as is, anything else as JSON.

    Pydantic serialises models, dataclasses, dates, enums and sets; ``None`` is ``"null"``.
    """
    if isinstance(result, str):
        return result
    return pydantic_core.to_json(result, fallback=str).decode()


def _strip_titles(schema: Any) -> Any:
    # Pydantic adds a "title" to every schema; providers ignore it and it costs prompt tokens.
    # Property names live in "properties" maps, so a property called "title" is kept.
    if isinstance(schema, dict):
        cleaned = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in ("properties", "$defs") and isinstance(value, dict):
                cleaned[key] = {name: _strip_titles(sub) for name, sub in value.items()}
            else:
                cleaned[key] = _strip_titles(value)
        return cleaned
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    return schema


def _is_tool_context(annotation: Any) -> bool:
    if annotation is ToolContext:
        return True
    return any(arg is ToolContext for arg in typing.get_args(annotation))


class FunctionToolCallback(ToolCallback):
    """A :class:`ToolCallback` over a Python function (what ``@tool`` returns).

    The wrapped function stays callable directly: ``weather("Paris")`` runs it unchanged.
    Raises ``TypeError`` at decoration time for ``*args``/``**kwargs``, positional-only or
    unannotated parameters, which have no JSON Schema.
    """

    __slots__ = (
        "__wrapped__",
        "_arguments_model",
        "_context_parameter",
        "_definition",
        "_is_async",
        "_parameter_names",
        "_requires_approval",
        "_return_direct",
    )

    def __init__(
        self,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        return_direct: bool = False,
        requires_approval: bool | Callable[[Mapping[str, Any]], bool] = False,
    ) -> None:
        if not isinstance(requires_approval, bool) and not callable(requires_approval):
            raise TypeError(
                "tool() requires_approval must be a bool or a predicate over the arguments, "
                f"got {type(requires_approval).__name__}"
            )
        self.__wrapped__ = function
        self._return_direct = return_direct
        self._requires_approval = requires_approval
        self._is_async = inspect.iscoroutinefunction(function)
        tool_name = name or function.__name__
        hints = typing.get_type_hints(function, include_extras=True)
        # Fields get neutral names and the parameter name as alias, so parameters called
        # "schema", "json" or "copy" do not clash with BaseModel attributes.
        fields: dict[str, Any] = {}
        self._parameter_names: dict[str, str] = {}
        self._context_parameter: str | None = None
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise TypeError(f"tool {tool_name!r}: *args and **kwargs have no JSON Schema")
            if parameter.kind is parameter.POSITIONAL_ONLY:
                raise TypeError(
                    f"tool {tool_name!r}: parameter {parameter.name!r} is positional-only"
                )
            if parameter.name not in hints:
                raise TypeError(
                    f"tool {tool_name!r}: parameter {parameter.name!r} needs a type annotation"
                )
            annotation = hints[parameter.name]
            if _is_tool_context(annotation):
                self._context_parameter = parameter.name
                continue
            default = ... if parameter.default is parameter.empty else parameter.default
            field_name = f"p{len(fields)}"
            self._parameter_names[field_name] = parameter.name
            fields[field_name] = (
                typing.Annotated[annotation, pydantic.Field(alias=parameter.name)],
                default,
            )
        model_name = "".join(part.title() for part in tool_name.split("_")) + "Arguments"
        self._arguments_model: type[pydantic.BaseModel] = pydantic.create_model(
            model_name,
            __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        schema = _strip_titles(self._arguments_model.model_json_schema())
        schema.setdefault("properties", {})
        schema.setdefault("required", [])
        text = description if description is not None else inspect.getdoc(function)
        self._definition = ToolDefinition(tool_name, (text or tool_name).strip(), schema)

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def return_direct(self) -> bool:
        return self._return_direct

    @property
    def may_require_approval(self) -> bool:
        return self._requires_approval is not False

    def requires_approval_for(self, arguments: Mapping[str, Any] | None) -> bool:
        """``requires_approval`` as given; a predicate gets the arguments dict and a call whose
        arguments are not a JSON object, or whose predicate raises, needs approval (fail
        closed)."""
        rule = self._requires_approval
        if isinstance(rule, bool):
            return rule
        if arguments is None:
            return True
        try:
            return bool(rule(arguments))
        except Exception:
            logger.warning("approval predicate of tool %r failed", self.name, exc_info=True)
            return True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)

    def validate(self, arguments: str) -> dict[str, Any]:
        """The keyword arguments parsed from the model's JSON ``arguments``.

        Blank text means no arguments (``{}``, as Spring AI does). Raises
        :class:`ToolArgumentsError` listing every problem (location and message).
        """
        try:
            parsed = self._arguments_model.model_validate_json(arguments.strip() or "{}")
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or '(arguments)'}: {error['msg']}"
                for error in exc.errors(include_url=False)
            )
            raise ToolArgumentsError(
                f"invalid arguments for tool '{self.name}': {problems}"
            ) from None
        return {
            parameter: getattr(parsed, field_name)
            for field_name, parameter in self._parameter_names.items()
        }

    async def call(self, arguments: str, tool_context: Mapping[str, Any] | None = None) -> str:
        kwargs = self.validate(arguments)
        if self._context_parameter is not None:
            kwargs[self._context_parameter] = ToolContext(freeze(tool_context))
        if self._is_async:
            result = await self.__wrapped__(**kwargs)
        else:
            result = await asyncio.to_thread(self.__wrapped__, **kwargs)
        return convert_tool_result(result)


@overload
def tool(function: Callable[..., Any], /) -> FunctionToolCallback: ...


@overload
def tool(
    name: str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    requires_approval: bool | Callable[[Mapping[str, Any]], bool] = False,
) -> Callable[[Callable[..., Any]], FunctionToolCallback]: ...


def tool(
    name: Callable[..., Any] | str | None = None,
    description: str | None = None,
    return_direct: bool = False,
    requires_approval: bool | Callable[[Mapping[str, Any]], bool] = False,
) -> Any:
    """Make a :class:`ToolCallback` of a typed function (Spring AI ``@Tool``).

    Use bare (``@tool``) or with options (``@tool("weather")``,
    ``@tool(name="weather", return_direct=True)``). ``name`` defaults to the function name,
    ``description`` to its docstring (or the name). ``requires_approval`` is ``True`` or a
    predicate over the arguments dict: such calls wait for a person's decision (see
    :mod:`.approval`). Raises ``TypeError`` when ``name`` is neither a string nor the
    decorated function, or ``requires_approval`` is neither a bool nor callable.
    """
    if callable(name):
        return FunctionToolCallback(name)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"tool() name must be a string, got {type(name).__name__}")

    def decorate(fn: Callable[..., Any]) -> FunctionToolCallback:
        return FunctionToolCallback(
            fn,
            name=name,
            description=description,
            return_direct=return_direct,
            requires_approval=requires_approval,
        )

    return decorate
