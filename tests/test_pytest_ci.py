"""The CI plugin: under CI=true a skipped test fails the run; otherwise skips stay skips."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SUITE = {
    "test_mixed": """
        import pytest

        def test_passes():
            pass

        def test_skips():
            pytest.skip("needs a GPU")

        @pytest.mark.skipif(True, reason="never on this machine")
        def test_skipif():
            pass

        @pytest.mark.xfail(reason="known bug")
        def test_xfails():
            assert False
    """,
    "test_module_skip": """
        import pytest

        pytest.skip("whole module unavailable", allow_module_level=True)
    """,
}


def run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str, *modules: str
) -> pytest.RunResult:
    pytester.makepyfile(**{name: SUITE[name] for name in modules})
    # A conftest like the suite's own, loaded from the repository in a separate interpreter.
    pytester.makeconftest(
        "import os\n"
        "from tests.pytest_ci import SkipsFail, ci_enabled\n"
        "def pytest_configure(config):\n"
        "    if ci_enabled(dict(os.environ)):\n"
        "        config.pluginmanager.register(SkipsFail())\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("CI", ci)
    monkeypatch.delenv("DJANGO_SETTINGS_MODULE", raising=False)
    return pytester.runpytest_subprocess("-p", "no:django", "-p", "no:cacheprovider")


@pytest.mark.slow
def test_skipped_tests_fail_under_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, "true", "test_mixed")
    # A skipif mark skips during setup, so that one shows as an error rather than a failure.
    result.assert_outcomes(passed=1, failed=1, errors=1, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED *test_skips - skipped under CI=true*needs a GPU"])
    result.stdout.fnmatch_lines(["ERROR *test_skipif - skipped under CI=true*never on this*"])


@pytest.mark.slow
def test_module_skipped_at_collection_fails_under_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, "true", "test_module_skip")
    result.assert_outcomes(errors=1)
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*skipped under CI=true*whole module unavailable*"])


@pytest.mark.slow
def test_skips_stay_skips_outside_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, "", "test_mixed", "test_module_skip")
    result.assert_outcomes(passed=1, skipped=3, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
