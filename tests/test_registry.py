"""The advisor-type registry: keys, schemas, params errors, references, third-party types."""

from __future__ import annotations

import pytest
from jsonschema.exceptions import SchemaError

from advisors_app.core import AdvisorRole, RecordingAdvisor
from advisors_app.definition.registry import (
    ROLES,
    AdvisorType,
    AdvisorTypeRegistry,
    advisor_types,
    params_errors,
    references_in,
    schema_help,
    with_defaults,
)


def _type(key: str = "recording", **kwargs: object) -> AdvisorType:
    kwargs.setdefault("factory", lambda spec: RecordingAdvisor(spec.key))
    return AdvisorType(key=key, label="Recording", **kwargs)  # type: ignore[arg-type]


def test_a_type_registered_from_a_third_party_ready_is_available() -> None:
    shout = advisor_types["append"]
    assert shout.label == "Append text"
    assert shout.default_order == 100
    assert ("append", "Append text (append)") in advisor_types.choices()


@pytest.mark.parametrize("key", ["advisors_app.core.advisors.SafeGuardAdvisor", "Safe", "a-b", ""])
def test_keys_are_snake_case_names_never_import_paths(key: str) -> None:
    with pytest.raises(ValueError, match="never an import path"):
        _type(key)


def test_registering_a_taken_key_needs_replace() -> None:
    registry = AdvisorTypeRegistry()
    first = registry.register(_type())
    with pytest.raises(ValueError, match="'recording' is already registered"):
        registry.register(_type())
    second = registry.register(_type(), replace=True)
    assert registry["recording"] is second is not first
    registry.unregister("recording")
    assert "recording" not in registry and len(registry) == 0


def test_unknown_key_lookup_names_the_registered_types() -> None:
    registry = AdvisorTypeRegistry()
    registry.register(_type())
    with pytest.raises(
        KeyError, match=r"Unknown advisor type 'nope'\. Registered types: recording"
    ):
        registry["nope"]


def test_a_type_needs_a_valid_object_schema_and_known_roles() -> None:
    with pytest.raises(SchemaError):
        _type(params_schema={"type": "object", "properties": {"x": {"type": "nonsense"}}})
    with pytest.raises(ValueError, match="must describe an object"):
        _type(params_schema={"type": "array"})
    with pytest.raises(ValueError, match="unknown role"):
        _type(roles=frozenset({"wizard"}))
    with pytest.raises(ValueError, match="default_order out of range"):
        _type(default_order=2**40)


def test_params_errors_name_the_field() -> None:
    assert params_errors("append", {"text": "!"}) == {}
    assert params_errors("append", {"text": 3}) == {"params.text": ["3 is not of type 'string'"]}
    assert params_errors("append", {}) == {"params.text": ["This field is required."]}
    errors = params_errors("append", {"text": "!", "colour": "red"})
    assert list(errors) == ["params.colour"]
    assert errors["params.colour"][0].startswith("Unknown field. Known fields: note, text")
    assert params_errors("append", ["not", "an", "object"]) == {"params": ["Enter a JSON object."]}


def test_params_errors_refuse_an_unknown_type() -> None:
    errors = params_errors("mystery", {})
    assert list(errors) == ["advisor_type"]
    assert "Unknown advisor type 'mystery'" in errors["advisor_type"][0]
    assert "append" in errors["advisor_type"][0]


def test_defaults_and_references_come_from_the_schema() -> None:
    advisor_type = _type(
        params_schema={
            "type": "object",
            "properties": {
                "lists": {"type": "array", "items": {"type": "string", "x-reference": "word_list"}},
                "template": {
                    "type": "string",
                    "x-reference": "prompt_template",
                    "x-required-placeholders": ["query"],
                    "default": "qa",
                },
                "top_k": {"type": "integer", "default": 4, "description": "Documents."},
            },
        }
    )
    assert with_defaults(advisor_type, {"top_k": 2}) == {"top_k": 2, "template": "qa"}
    assert references_in(advisor_type, {"lists": ["a", "b"]}) == [
        ("lists", "word_list", "a"),
        ("lists", "word_list", "b"),
        ("template", "prompt_template", "qa"),
    ]
    rows = {row["name"]: row for row in schema_help(advisor_type.params_schema)}
    assert rows["top_k"]["default"] == "4" and rows["top_k"]["description"] == "Documents."
    assert rows["template"]["reference"] == "slug of a prompt_template"
    assert rows["template"]["description"] == "Needs placeholders: {query}"


def test_build_validates_params_and_fills_defaults() -> None:
    seen = []

    def factory(spec):  # type: ignore[no-untyped-def]
        seen.append((spec.params, spec.order, spec.chain_slug))
        return RecordingAdvisor("r", spec.order)

    advisor_type = _type(
        factory=factory,
        params_schema={"type": "object", "properties": {"n": {"type": "integer", "default": 1}}},
    )
    advisor = advisor_type.build({}, 7, "support", services=None)
    assert advisor.order == 7
    assert seen == [({"n": 1}, 7, "support")]
    with pytest.raises(ValueError, match=r"'recording': params.n: 'x' is not of type 'integer'"):
        advisor_type.build({"n": "x"}, 7, "support", services=None)


class Recording(RecordingAdvisor):
    DEFAULT_ORDER = 42
    ROLES = frozenset({AdvisorRole.GUARD})
    AFTER_SIDE_EFFECTS = True


def test_the_role_vocabulary_is_the_cores() -> None:
    assert frozenset(AdvisorRole) == ROLES
    assert all(type(role) is str for role in ROLES)  # plain strings, as the lint compares them
    assert "rewrite" in ROLES


def test_metadata_not_given_comes_from_the_advisor_class() -> None:
    derived = _type(advisor_class=Recording, factory=lambda spec: Recording(spec.key, spec.order))
    assert derived.default_order == 42
    assert derived.roles == {"guard"} and all(type(r) is str for r in derived.roles)
    assert derived.after_side_effects is True and derived.stream_safe is True
    assert derived.build({}, 7, "support", services=None).order == 7


def test_without_a_class_a_third_party_type_keeps_its_explicit_values_or_the_defaults() -> None:
    plain = _type()
    assert (plain.default_order, plain.roles, plain.stream_safe, plain.after_side_effects) == (
        0,
        frozenset(),
        True,
        False,
    )
    explicit = _type(
        default_order=5, roles=frozenset({"cache"}), stream_safe=False, after_side_effects=True
    )
    assert (explicit.default_order, explicit.roles) == (5, {"cache"})
    assert explicit.stream_safe is False and explicit.after_side_effects is True


def test_explicit_values_win_over_the_class_but_roles_only_add() -> None:
    overridden = _type(advisor_class=Recording, default_order=-3, roles={"guard", "logging"})
    assert overridden.default_order == -3 and overridden.roles == {"guard", "logging"}
    with pytest.raises(ValueError, match=r"roles \['cache'\] must include \['guard'\] from Rec"):
        _type(advisor_class=Recording, roles=frozenset({"cache"}))


def test_advisor_class_must_be_an_advisor_and_the_factory_must_build_one() -> None:
    with pytest.raises(ValueError, match=r"advisor_class must be a subclass of advisors_app\.core"):
        _type(advisor_class=dict)
    wrong = _type(advisor_class=Recording)  # the default factory builds a plain RecordingAdvisor
    with pytest.raises(TypeError, match="returned RecordingAdvisor, not a Recording"):
        wrong.build({}, 0, "support", services=None)


def test_the_registries_share_the_core_registry() -> None:
    from advisors_app.core.registry import Registry
    from advisors_app.definition.registry import ReferenceKindRegistry, reference_kinds

    assert isinstance(advisor_types, Registry) and isinstance(reference_kinds, Registry)
    assert issubclass(ReferenceKindRegistry, Registry)
    assert advisor_types.keys == tuple(t.key for t in advisor_types)


def test_a_type_registered_for_a_block_is_gone_after_it() -> None:
    with advisor_types.registered(_type("t_for_a_block")):
        assert params_errors("t_for_a_block", {}) == {}
    assert "t_for_a_block" not in advisor_types
    assert list(params_errors("t_for_a_block", {})) == ["advisor_type"]


def test_a_reference_kind_registered_again_replaces_the_earlier_one() -> None:
    """The app's ``ready()`` registers its kinds each time it runs; that never raises."""
    from advisors_app.definition.registry import ReferenceKind, ReferenceKindRegistry

    kinds = ReferenceKindRegistry()
    kinds.register(ReferenceKind("word_list", "list", "advisors_app.SensitiveWordList", dict))
    again = kinds.register(
        ReferenceKind("word_list", "word list", "advisors_app.SensitiveWordList", dict)
    )
    assert kinds.get("word_list") is again and len(kinds) == 1
    with pytest.raises(ValueError, match="reference kind 'word_list' is already registered"):
        kinds.register(ReferenceKind("word_list", "x", "x.X", dict), replace=False)
