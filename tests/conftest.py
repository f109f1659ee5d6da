"""Suite-wide pytest configuration."""

from __future__ import annotations

import os

import pytest

from tests.pytest_ci import SkipsFail, ci_enabled

pytest_plugins = ["pytester"]


def pytest_configure(config: pytest.Config) -> None:
    if ci_enabled(dict(os.environ)):
        config.pluginmanager.register(SkipsFail(), "advisors-ci-skips-fail")
