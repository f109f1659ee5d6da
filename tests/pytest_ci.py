"""Pytest plugin for CI: a skipped test is a failure, so nothing silently stops being tested.

``tests/conftest.py`` registers it when ``CI`` is true. It turns skips into failures both for
tests (``pytest.skip``, ``skipif``) and for whole modules skipped at collection time; expected
failures (``xfail``) are left alone.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest


class SkipsFail:
    """Report every skip as a failure that names the skip reason."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Generator[None, Any, Any]:
        report = yield
        _fail_if_skipped(report)
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Generator[None, Any, Any]:
        report = yield
        _fail_if_skipped(report)
        return report


def _fail_if_skipped(report: pytest.TestReport | pytest.CollectReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, which counts as a failure: {reason}"


def ci_enabled(environ: dict[str, str]) -> bool:
    """Whether ``environ`` says this is a CI run (``CI`` set to a true value)."""
    return environ.get("CI", "").lower() in {"1", "true", "yes", "on"}
