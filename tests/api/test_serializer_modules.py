"""The serializers package mirrors the views package, and every module's exports resolve."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from advisors_app.api import serializers, views


def _module_names(package: object) -> set[str]:
    return {info.name for info in pkgutil.iter_modules(package.__path__)}  # type: ignore[attr-defined]


def test_every_views_module_has_its_serializers_module() -> None:
    assert _module_names(views) <= _module_names(serializers)


@pytest.mark.parametrize("name", sorted(_module_names(serializers)))
def test_exported_members(name: str) -> None:
    module = importlib.import_module(f"advisors_app.api.serializers.{name}")
    assert len(set(module.__all__)) == len(module.__all__)
    for member in module.__all__:
        assert hasattr(module, member), member
