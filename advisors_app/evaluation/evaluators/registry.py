"""The evaluator registry: which evaluators a run may use, their params, and how to build them.

It works as the advisor-type registry (:mod:`advisors_app.definition.registry`) does: a run stores
an evaluator **key** (``"exact"``) and its params, never an import path. Each
:class:`EvaluatorType` has a JSON Schema for its params (checked with ``jsonschema``, errors
naming the field), a factory that builds the evaluator from an :class:`EvaluatorSpec`, and a
description for the admin's picker.

Every schema also accepts ``key``: the score key the evaluator's scores are stored under
(default: the registry key), so one run can use ``contains`` twice as ``mentions_refund`` and
``mentions_deadline``. The registry adds that property; a schema may not define it.

Built-in evaluators are in this package's family modules and are registered when the package
is imported. A third-party app registers its own from its ``AppConfig.ready()``::

    from advisors_app.evaluation.evaluators import BaseEvaluator, evaluator_registry

    class Shorter(BaseEvaluator):
        def __init__(self, key, limit):
            super().__init__(key)
            self.limit = limit

        async def evaluate(self, case):
            return self.check(len(case.output) <= self.limit, f"{len(case.output)} chars")

    evaluator_registry.register(
        "shorter_than",
        params_schema={"type": "object", "properties": {"limit": {"type": "integer"}},
                       "required": ["limit"], "additionalProperties": False},
        factory=lambda spec: Shorter(spec.key, spec.params["limit"]),
        description="Passes when the answer has at most `limit` characters.",
    )
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from advisors_app.core.model import ChatModel
from advisors_app.core.registry import Registry
from advisors_app.validation import FieldErrors, check_schema, object_schema, schema_errors

from .base import Evaluator, EvaluatorParamsError
from .services import DjangoEvaluatorServices

__all__ = [
    "SCORE_KEY_SCHEMA",
    "EvaluatorParamsError",
    "EvaluatorRegistry",
    "EvaluatorServices",
    "EvaluatorSpec",
    "EvaluatorType",
    "evaluator_registry",
    "object_schema",
]

_KEY = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

#: The ``key`` param every evaluator accepts: a score key as ``Score.key`` stores it.
SCORE_KEY_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": "^[A-Za-z0-9_-]{1,64}$",
    "description": "Score key the results are stored under (default: the evaluator's key).",
}


class EvaluatorServices(Protocol):
    """What a factory's evaluators resolve models through
    (:class:`advisors_app.evaluation.evaluators.services.DjangoEvaluatorServices` by default)."""

    async def chat_model(self, slug: str | None) -> ChatModel: ...


@dataclass(frozen=True)
class EvaluatorSpec:
    """What a factory builds an evaluator from.

    ``type_key`` is the registry key, ``key`` the score key (``params["key"]`` or the
    registry key), ``params`` the validated params with the schema's defaults filled in.
    ``services`` resolves chat models lazily (an evaluator is built without a query).
    """

    type_key: str
    key: str
    params: Mapping[str, Any]
    services: EvaluatorServices | None = None

    async def chat_model(self, slug: str | None) -> ChatModel:
        """The chat model ``slug`` names (``None``: the default), through ``services`` or else
        :class:`~advisors_app.evaluation.evaluators.services.DjangoEvaluatorServices`."""
        services = self.services or DjangoEvaluatorServices()
        return await services.chat_model(slug)

    def error(self, param: str, message: str) -> EvaluatorParamsError:
        """The error a factory raises for one param (``params.<param>``)."""
        return EvaluatorParamsError({f"params.{param}": [message]}, self.type_key)


@dataclass(frozen=True)
class EvaluatorType:
    """A kind of evaluator: key, params schema (with ``key`` added), factory, description."""

    key: str
    params_schema: Mapping[str, Any]
    factory: Callable[[EvaluatorSpec], Evaluator]
    description: str = ""
    label: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not _KEY.match(self.key):
            raise ValueError(
                f"evaluator key {self.key!r} must be lower_snake_case letters, digits and "
                "underscores, at most 64 characters (a key, never an import path)"
            )
        if not callable(self.factory):
            raise ValueError(f"evaluator {self.key!r}: factory must be callable")
        schema = dict(self.params_schema)
        if schema.get("type") != "object":
            raise ValueError(f"evaluator {self.key!r}: params_schema must describe an object")
        properties = dict(schema.get("properties", {}))
        if "key" in properties:
            raise ValueError(
                f"evaluator {self.key!r}: params_schema may not define 'key'; the registry "
                "adds it (the score key)"
            )
        schema["properties"] = {**properties, "key": SCORE_KEY_SCHEMA}
        check_schema(schema)
        object.__setattr__(self, "params_schema", schema)
        if not self.label:
            object.__setattr__(self, "label", self.key.replace("_", " ").capitalize())

    def with_defaults(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` with each missing top-level property's schema ``default`` filled in."""
        result = dict(params)
        for name, prop in self.params_schema.get("properties", {}).items():
            if name not in result and isinstance(prop, Mapping) and "default" in prop:
                result[name] = prop["default"]
        return result

    def build(
        self, params: Mapping[str, Any] | None = None, services: EvaluatorServices | None = None
    ) -> Evaluator:
        """Validate ``params`` and call the factory.

        Raises :class:`EvaluatorParamsError` naming the field when the params break the schema
        or the factory refuses them (a ``ValueError`` it raises is reported on ``params``);
        ``TypeError`` when the factory returns no :class:`Evaluator` with an ``async``
        ``evaluate`` and the spec's score key.
        """
        params = {} if params is None else params
        if not isinstance(params, Mapping):
            raise EvaluatorParamsError({"params": ["Enter a JSON object."]}, self.key)
        errors = schema_errors(self.params_schema, params, "params")
        if errors:
            raise EvaluatorParamsError(errors, self.key)
        filled = self.with_defaults(params)
        spec = EvaluatorSpec(self.key, filled.get("key") or self.key, filled, services)
        try:
            evaluator = self.factory(spec)
        except EvaluatorParamsError:
            raise
        except ValueError as exc:
            raise EvaluatorParamsError({"params": [str(exc)]}, self.key) from exc
        if not isinstance(evaluator, Evaluator) or not inspect.iscoroutinefunction(
            evaluator.evaluate
        ):
            raise TypeError(
                f"evaluator {self.key!r}: the factory returned {type(evaluator).__name__}, "
                "which has no key and async evaluate(case)"
            )
        if evaluator.key != spec.key:
            raise TypeError(
                f"evaluator {self.key!r}: the factory's evaluator has key {evaluator.key!r}; "
                f"give it spec.key ({spec.key!r}), so params['key'] names its scores"
            )
        return evaluator


class EvaluatorRegistry(Registry[EvaluatorType]):
    """Evaluator types by key (a :class:`~advisors_app.core.registry.Registry`): thread-safe,
    iteration in registration order; ``evaluator_registry["nope"]`` raises ``KeyError("Unknown
    evaluator 'nope'. Registered evaluators: ...")``."""

    kind = "evaluator"
    kinds = "evaluators"

    def register(
        self,
        item: EvaluatorType | str,
        *,
        params_schema: Mapping[str, Any] | None = None,
        factory: Callable[[EvaluatorSpec], Evaluator] | None = None,
        description: str = "",
        label: str = "",
        replace: bool = False,
    ) -> EvaluatorType:
        """Add an evaluator type: a ready :class:`EvaluatorType`, or its key with
        ``params_schema``, ``factory``, ``description`` and ``label`` to build one.

        ``ValueError`` if the key is taken (unless ``replace``), is no lower_snake_case key,
        or the schema is no valid JSON Schema object; ``TypeError`` when a key comes without
        ``params_schema`` and ``factory``.
        """
        if isinstance(item, str):
            if params_schema is None or factory is None:
                raise TypeError(
                    f"evaluator_registry.register({item!r}, ...) needs params_schema= and "
                    "factory= (or pass a ready EvaluatorType)"
                )
            item = EvaluatorType(item, params_schema, factory, description, label)
        return super().register(item, replace=replace)

    def register_type(
        self, evaluator_type: EvaluatorType, *, replace: bool = False
    ) -> EvaluatorType:
        """Add a ready :class:`EvaluatorType` (what :meth:`register` builds from a key)."""
        return self.register(evaluator_type, replace=replace)

    def build(
        self,
        key: str,
        params: Mapping[str, Any] | None = None,
        *,
        services: EvaluatorServices | None = None,
    ) -> Evaluator:
        """The evaluator ``key`` names, built from ``params`` (see :meth:`EvaluatorType.build`).

        ``services`` resolves models (default: chat-model configurations and settings aliases,
        looked up at the first evaluation). An unknown key raises
        :class:`EvaluatorParamsError` on the field ``evaluator``.
        """
        evaluator_type = self.get(key)
        if evaluator_type is None:
            raise EvaluatorParamsError({"evaluator": [self.unknown_message(key)]})
        return evaluator_type.build(params, services)

    def params_errors(self, key: str, params: Any) -> FieldErrors:
        """Every problem of ``key`` + ``params`` by field (empty when they build), for forms.

        Builds the evaluator (no query, no model call), so the factory's own checks — a regex
        that does not compile, a scale whose minimum is not below its maximum — show too.
        """
        try:
            self.build(key, params)
        except EvaluatorParamsError as exc:
            return exc.errors
        return {}


#: The process-wide registry runs, the admin and the API use.
evaluator_registry = EvaluatorRegistry()
