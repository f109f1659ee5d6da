"""Registry: the one class behind the tool, advisor-type and evaluator registries."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from advisors_app.core.registry import Registry
from advisors_app.core.registry import __all__ as exported


@dataclass(frozen=True)
class Check:
    key: str
    label: str = ""


class CheckRegistry(Registry[Check]):
    kind = "guard check"
    kinds = "checks"


def test_register_get_and_iterate_in_registration_order() -> None:
    registry = CheckRegistry([Check("b"), Check("a", "Alpha")])
    c = registry.register(Check("c"))
    assert registry.get("c") is c and registry["c"] is c
    assert registry.get("nope") is None
    assert registry.keys == ("b", "a", "c") and len(registry) == 3
    assert [check.key for check in registry] == ["b", "a", "c"]
    assert "a" in registry and "z" not in registry and 3 not in registry
    assert registry.choices() == [("b", "b (b)"), ("a", "Alpha (a)"), ("c", "c (c)")]
    registry.unregister("b")
    registry.unregister("never-registered")  # ignored
    assert registry.keys == ("a", "c")


def test_an_unknown_key_names_itself_and_the_known_keys() -> None:
    registry = CheckRegistry([Check("a"), Check("b")])
    with pytest.raises(KeyError, match=r"Unknown guard check 'zz'\. Registered checks: a, b\."):
        registry["zz"]
    empty = CheckRegistry()
    assert empty.unknown_message("zz") == "Unknown guard check 'zz'. Registered checks: none."


def test_a_taken_key_needs_replace_but_the_same_object_again_is_harmless() -> None:
    registry = CheckRegistry()
    first = registry.register(Check("a"))
    registry.register(first)
    with pytest.raises(ValueError, match="guard check 'a' is already registered; pass replace"):
        registry.register(Check("a", "other"))
    second = registry.register(Check("a", "other"), replace=True)
    assert registry["a"] is second


def test_an_item_without_a_str_key_is_refused() -> None:
    with pytest.raises(ValueError, match="a guard check needs a str key"):
        CheckRegistry().register(object())  # type: ignore[arg-type]


def test_registered_lasts_for_the_block_and_puts_back_what_it_replaced() -> None:
    registry = CheckRegistry([Check("a", "original")])
    original = registry["a"]
    with registry.registered(Check("b")):
        assert registry.keys == ("a", "b")
    assert registry.keys == ("a",)
    with registry.registered(Check("a", "temporary"), Check("c"), replace=True):
        assert registry["a"].label == "temporary" and "c" in registry
    assert registry["a"] is original and "c" not in registry


def test_registered_undoes_what_it_did_when_a_registration_or_the_block_fails() -> None:
    registry = CheckRegistry([Check("a")])
    clash = registry.registered(Check("b"), Check("a", "clash"))
    with pytest.raises(ValueError, match="already registered"), clash:
        pass  # never reached: the clash refuses before the block runs
    assert registry.keys == ("a",)
    with pytest.raises(RuntimeError), registry.registered(Check("b")):
        raise RuntimeError("the test failed")
    assert registry.keys == ("a",)


def test_a_subclass_may_refuse_an_item_and_key_it_otherwise() -> None:
    @dataclass(frozen=True)
    class Named:
        name: str

    class Names(Registry[Named]):
        kind = "name"

        def key_of(self, item: Named) -> str:
            return item.name

        def validate(self, item: Named) -> None:
            if not item.name.islower():
                raise ValueError(f"{item.name!r} is not lower case")

    registry = Names([Named("x")])
    assert registry.keys == ("x",)
    with pytest.raises(ValueError, match="'X' is not lower case"):
        registry.register(Named("X"))


def test_the_project_registries_are_registries() -> None:
    from advisors_app.core.tools import ToolRegistry

    assert exported == ["Registry"]
    assert issubclass(ToolRegistry, Registry)
