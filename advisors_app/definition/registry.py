"""The advisor-type registry: which advisors a chain may use, their params, and how to build them.

An advisor row in the database stores a type **key** (``"safe_guard"``), never an import path,
so the admin cannot be used to import arbitrary code. Each :class:`AdvisorType` has a label, a
JSON Schema for its params (checked with ``jsonschema`` by the admin form, the API and the
runtime, with errors naming the field) and a factory that builds the core advisor.

A type's default order, roles and stream safety come from the core advisor class it names
(``advisor_class``: ``DEFAULT_ORDER``, ``ROLES``, ``STREAM_SAFE``, ``AFTER_SIDE_EFFECTS``), so
``ChatClient`` assembly and the chain lint read one set of metadata. A type may still pass them
explicitly (a third-party type without a class, or a deliberate divergence such as SafeGuard's
default order); explicit values win, except that roles may only add to the class's.

Params refer to other rows by slug; the schema says which with the ``x-reference`` keyword
(``{"type": "string", "x-reference": "word_list"}``), and a template reference may require
placeholders (``"x-required-placeholders": ["query"]``). The runtime resolves every reference
into the chain's configuration snapshot before building, so factories never query the database.

Built-in types are in :mod:`advisors_app.definition.advisor_types`. A third-party app registers
its own from its ``AppConfig.ready()``::

    from advisors_app.definition.registry import AdvisorType, advisor_types

    class MyAppConfig(AppConfig):
        def ready(self):
            advisor_types.register(AdvisorType(
                key="shout", label="Shout", factory=lambda spec: ShoutAdvisor(order=spec.order),
                advisor_class=ShoutAdvisor,  # or default_order=..., roles=... given here
                params_schema={"type": "object", "properties": {}, "additionalProperties": False},
            ))

The registries here are :class:`advisors_app.core.registry.Registry` subclasses, like the tool
and evaluator registries; a test registers a type for its own duration with
``with advisor_types.registered(my_type): ...``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from advisors_app.core.advisor import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE, Advisor, AdvisorRole
from advisors_app.core.registry import Registry
from advisors_app.validation import FieldErrors, check_schema, schema_errors


class BuildServices(Protocol):
    """What a factory resolves a chain snapshot's slugs through, without queries
    (implemented by :class:`advisors_app.definition.BuildServices`)."""

    def reference(self, kind: str, slug: str) -> Mapping[str, Any]: ...

    def chat_model(self, slug: str | None) -> Any: ...

    def embedding_model(self, slug: str | None) -> Any: ...

    def vector_store(self, collection: str, embedding_model: str | None = None) -> Any: ...

    def chat_memory(self, **options: Any) -> Any: ...


__all__ = [
    "EMPTY_PARAMS_SCHEMA",
    "ROLES",
    "AdvisorSpec",
    "AdvisorType",
    "AdvisorTypeRegistry",
    "ReferenceKind",
    "ReferenceKindRegistry",
    "advisor_types",
    "params_errors",
    "reference_kinds",
    "references_in",
    "registered_tool_names",
    "schema_help",
    "with_defaults",
]

#: Role names the chain lint knows: the values of :class:`~advisors_app.core.advisor.AdvisorRole`
#: (``memory``, ``tool``, ``guard``, ``rag``, ``cache``, ``logging``, ``rewrite``), defined there.
ROLES = frozenset(role.value for role in AdvisorRole)

EMPTY_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}

_KEY = re.compile(r"^[a-z][a-z0-9_]{0,99}$")
#: Keyword of a request param's schema naming the boolean row param that enables it.
_ENABLED_BY = "x-enabled-by"


@dataclass(frozen=True)
class AdvisorSpec:
    """What a factory builds an advisor from: the row's validated params and resolved refs.

    ``params`` has the schema's defaults filled in; ``order`` is the row's order or the type's
    default. ``word_list``, ``template``, ``chat_model``, ``embedding_model``, ``vector_store``
    and ``chat_memory`` resolve slugs through the chain's configuration snapshot (no queries).
    """

    key: str
    order: int
    params: Mapping[str, Any]
    chain_slug: str
    services: BuildServices

    def reference(self, kind: str, slug: str) -> Mapping[str, Any]:
        """The snapshot of the ``kind`` row with ``slug``; ``LookupError`` when missing."""
        return self.services.reference(kind, slug)

    def word_list(self, slug: str) -> list[str]:
        return list(self.reference("word_list", slug)["words"])

    def template(self, slug: str) -> str:
        return str(self.reference("prompt_template", slug)["text"])

    def chat_model(self, slug: str) -> Any:
        return self.services.chat_model(slug)

    def embedding_model(self, slug: str | None = None) -> Any:
        """The embedding model ``slug`` names, or the default one for ``None``."""
        return self.services.embedding_model(slug)

    def vector_store(self, collection: str, embedding_model: str | None = None) -> Any:
        return self.services.vector_store(collection, embedding_model)

    def chat_memory(self, **options: Any) -> Any:
        return self.services.chat_memory(**options)


class _FromClass:
    """Default of a metadata field of :class:`AdvisorType`: taken from ``advisor_class``."""

    def __repr__(self) -> str:
        return "<from advisor_class>"


_FROM_CLASS: Any = _FromClass()

#: ``AdvisorType`` field → the core advisor class attribute it derives from.
_CLASS_METADATA = {
    "default_order": "DEFAULT_ORDER",
    "roles": "ROLES",
    "stream_safe": "STREAM_SAFE",
    "after_side_effects": "AFTER_SIDE_EFFECTS",
}


@dataclass(frozen=True)
class AdvisorType:
    """A kind of advisor a chain may use.

    ``advisor_class`` is the core advisor class the factory builds; ``default_order``,
    ``roles``, ``stream_safe`` and ``after_side_effects`` not given explicitly are read from it
    (``DEFAULT_ORDER``, ``ROLES``, ``STREAM_SAFE``, ``AFTER_SIDE_EFFECTS``); without a class
    they default to 0, no roles, ``True`` and ``False``. Explicit roles must include the
    class's, since ``ChatClient`` assembly reads those from the advisor itself, and ``build``
    refuses a factory result that is not an instance of ``advisor_class``.

    ``roles`` (a subset of :data:`ROLES`, as plain strings) drive the chain lint.
    ``request_params`` are JSON Schema properties of the per-request params this type reads
    from the advisor context (for example a filter expression); callers may send only params
    some advisor of the chain declares. A request param whose schema has
    ``"x-enabled-by": "<param>"`` is accepted only from chains whose row sets that boolean
    param true (its default applies when absent): see :meth:`request_params_for`.
    ``after_side_effects`` marks an ``after`` that writes somewhere (audit, cache, memory): such
    a type must be ``stream_safe`` (its ``after`` runs once per stream, at completion).
    """

    key: str
    label: str
    factory: Callable[[AdvisorSpec], Advisor]
    params_schema: Mapping[str, Any] = field(default_factory=lambda: dict(EMPTY_PARAMS_SCHEMA))
    default_order: int = _FROM_CLASS
    description: str = ""
    roles: frozenset[str] = _FROM_CLASS
    request_params: Mapping[str, Any] = field(default_factory=dict)
    after_side_effects: bool = _FROM_CLASS
    stream_safe: bool = _FROM_CLASS
    advisor_class: type[Advisor] | None = None

    def __post_init__(self) -> None:
        if not _KEY.match(self.key):
            raise ValueError(
                f"advisor type key {self.key!r} must be lower_snake_case letters, digits and "
                "underscores (a key, never an import path)"
            )
        if not callable(self.factory):
            raise ValueError(f"advisor type {self.key!r}: factory must be callable")
        self._derive_metadata()
        unknown = set(self.roles) - ROLES
        if unknown:
            raise ValueError(
                f"advisor type {self.key!r}: unknown role(s) {sorted(unknown)}; "
                f"known: {sorted(ROLES)}"
            )
        if not HIGHEST_PRECEDENCE <= self.default_order <= LOWEST_PRECEDENCE:
            raise ValueError(f"advisor type {self.key!r}: default_order out of range")
        check_schema(self.params_schema)
        if self.params_schema.get("type") != "object":
            raise ValueError(f"advisor type {self.key!r}: params_schema must describe an object")
        check_schema({"type": "object", "properties": dict(self.request_params)})
        self._check_enabled_by()

    def _derive_metadata(self) -> None:
        """Fill the metadata fields not given from ``advisor_class`` (or the base defaults)."""
        cls = self.advisor_class
        if cls is not None and not (isinstance(cls, type) and issubclass(cls, Advisor)):
            raise ValueError(
                f"advisor type {self.key!r}: advisor_class must be a subclass of "
                f"advisors_app.core.Advisor, got {cls!r}"
            )
        source = cls or Advisor
        for name, attribute in _CLASS_METADATA.items():
            if getattr(self, name) is _FROM_CLASS:
                object.__setattr__(self, name, getattr(source, attribute))
        roles = frozenset(str(role) for role in self.roles)
        object.__setattr__(self, "roles", roles)
        if cls is not None:
            missing = {str(role) for role in cls.ROLES} - roles
            if missing:
                raise ValueError(
                    f"advisor type {self.key!r}: roles {sorted(roles)} must include "
                    f"{sorted(missing)} from {cls.__name__}.ROLES (ChatClient assembly reads "
                    "the class's roles, so the lint must see them too); add them or omit roles"
                )

    def _check_enabled_by(self) -> None:
        properties = self.params_schema.get("properties", {})
        for name, schema in self.request_params.items():
            flag = schema.get(_ENABLED_BY) if isinstance(schema, Mapping) else None
            if flag is None:
                continue
            if not (
                isinstance(properties.get(flag), Mapping)
                and properties[flag].get("type") == "boolean"
            ):
                raise ValueError(
                    f"advisor type {self.key!r}: request param {name!r} is enabled by "
                    f"{flag!r}, which must be a boolean property of params_schema"
                )

    def request_params_for(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The request params a row with ``params`` accepts (JSON Schema properties).

        ``request_params``, less those marked ``"x-enabled-by": flag`` whose ``flag`` param is
        not true for this row (schema defaults filled in); the marker itself is left out of
        what is returned. For example ``question_answer`` offers ``qa_filter_expression`` only
        when the row sets ``allow_request_filter``.
        """
        filled = with_defaults(self, params)
        accepted: dict[str, Any] = {}
        for name, schema in self.request_params.items():
            flag = schema.get(_ENABLED_BY) if isinstance(schema, Mapping) else None
            if flag is not None:
                if filled.get(flag) is not True:
                    continue
                schema = {k: v for k, v in schema.items() if k != _ENABLED_BY}
            accepted[name] = schema
        return accepted

    def build(
        self, params: Mapping[str, Any], order: int, chain_slug: str, services: BuildServices
    ) -> Any:
        """Validate ``params`` and call the factory; ``ValueError`` naming the field if invalid.

        ``TypeError`` when the factory's advisor is not an instance of ``advisor_class``.
        """
        errors = schema_errors(self.params_schema, params, "params")
        if errors:
            raise ValueError(_describe(self.key, errors))
        spec = AdvisorSpec(self.key, order, with_defaults(self, params), chain_slug, services)
        advisor = self.factory(spec)
        if self.advisor_class is not None and not isinstance(advisor, self.advisor_class):
            raise TypeError(
                f"advisor type {self.key!r}: the factory returned {type(advisor).__name__}, "
                f"not a {self.advisor_class.__name__} (its advisor_class, which the type's "
                "order, roles and stream safety come from)"
            )
        return advisor


def _describe(key: str, errors: FieldErrors) -> str:
    details = "; ".join(f"{f}: {', '.join(m)}" for f, m in errors.items())
    return f"invalid params for advisor type {key!r}: {details}"


class AdvisorTypeRegistry(Registry[AdvisorType]):
    """Advisor types by key (a :class:`~advisors_app.core.registry.Registry`): thread-safe,
    iteration in registration order; ``advisor_types["nope"]`` raises ``KeyError("Unknown
    advisor type 'nope'. Registered types: ...")``."""

    kind = "advisor type"
    kinds = "types"


#: The process-wide registry the models, admin, API and runtime use.
advisor_types = AdvisorTypeRegistry()


def with_defaults(advisor_type: AdvisorType, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with each missing top-level property's schema ``default`` filled in."""
    result = dict(params)
    for name, prop in advisor_type.params_schema.get("properties", {}).items():
        if name not in result and isinstance(prop, Mapping) and "default" in prop:
            result[name] = prop["default"]
    return result


def params_errors(key: str, params: Any) -> FieldErrors:
    """Errors of an advisor row: unknown type (``advisor_type``) or params against the schema.

    ``params_errors("safe_guard", {"word_list": 3})`` →
    ``{"params.word_list": ["3 is not of type 'string'"]}``.
    """
    advisor_type = advisor_types.get(key)
    if advisor_type is None:
        return {"advisor_type": [advisor_types.unknown_message(key)]}
    if not isinstance(params, Mapping):
        return {"params": ["Enter a JSON object."]}
    return schema_errors(advisor_type.params_schema, params, "params")


def references_in(
    advisor_type: AdvisorType, params: Mapping[str, Any]
) -> list[tuple[str, str, str]]:
    """``(param, kind, slug)`` for each slug ``params`` refers to (defaults included)."""
    found: list[tuple[str, str, str]] = []
    values = with_defaults(advisor_type, params)
    for name, prop in advisor_type.params_schema.get("properties", {}).items():
        value = values.get(name)
        if not isinstance(prop, Mapping) or value in (None, ""):
            continue
        kind = prop.get("x-reference")
        items = prop.get("items")
        if kind and isinstance(value, str):
            found.append((name, kind, value))
        elif isinstance(items, Mapping) and items.get("x-reference") and isinstance(value, list):
            found.extend((name, items["x-reference"], v) for v in value if isinstance(v, str))
        elif isinstance(items, Mapping) and isinstance(value, list):
            # A list of objects whose properties refer to rows (a tool loop's MCP servers).
            for key, sub in (items.get("properties") or {}).items():
                sub_kind = sub.get("x-reference") if isinstance(sub, Mapping) else None
                if sub_kind:
                    found.extend(
                        (name, sub_kind, entry[key])
                        for entry in value
                        if isinstance(entry, Mapping) and isinstance(entry.get(key), str)
                    )
    return found


@dataclass(frozen=True)
class ReferenceKind:
    """A model advisor params may refer to by slug, and what of a row the snapshot keeps.

    ``model`` is ``"app_label.ModelName"``; ``snapshot(row)`` returns the JSON-compatible
    content that affects behaviour; ``nested(row)`` lists further ``(kind, slug)`` references
    (a collection's embedding model); ``missing(slug)`` is the content of a slug with no row
    (``None``: a missing reference), for kinds whose slugs may also come from settings (stdio
    MCP servers).
    """

    key: str
    label: str
    model: str
    snapshot: Callable[[Any], dict[str, Any]]
    nested: Callable[[Any], list[tuple[str, str]]] = lambda row: []
    missing: Callable[[str], dict[str, Any] | None] = lambda slug: None


class ReferenceKindRegistry(Registry[ReferenceKind]):
    """Reference kinds by key (``word_list``, ``prompt_template``, ``chat_model``, ...).

    Unlike the other registries, registering a taken key replaces it by default: the app and
    its MCP support register their kinds from ``ready()``, which may run more than once.
    """

    kind = "reference kind"
    kinds = "kinds"

    def register(self, item: ReferenceKind, *, replace: bool = True) -> ReferenceKind:
        return super().register(item, replace=replace)


reference_kinds = ReferenceKindRegistry()


def registered_tool_names() -> frozenset[str]:
    """Names a chain's ``tools`` may use: those of
    :data:`advisors_app.definition.tools.tool_registry`."""
    from advisors_app.definition.tools import tool_registry

    return frozenset(tool_registry.names)


def schema_help(schema: Mapping[str, Any]) -> list[dict[str, str]]:
    """One row per top-level param: name, type, default, reference and description (for help)."""
    rows = []
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        if not isinstance(prop, Mapping):
            continue
        kind = prop.get("type", "")
        if "enum" in prop:
            kind = " | ".join(repr(v) for v in prop["enum"])
        reference = prop.get("x-reference") or (prop.get("items") or {}).get("x-reference", "")
        placeholders = prop.get("x-required-placeholders")
        description = prop.get("description", "")
        if placeholders:
            description += " Needs placeholders: " + ", ".join(f"{{{p}}}" for p in placeholders)
        rows.append(
            {
                "name": name,
                "type": kind if isinstance(kind, str) else " | ".join(kind),
                "default": repr(prop["default"]) if "default" in prop else "",
                "required": "yes" if name in required else "",
                "reference": f"slug of a {reference}" if reference else "",
                "description": description.strip(),
            }
        )
    return rows
