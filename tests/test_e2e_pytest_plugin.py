"""End to end: the regression test the livekit/agents #7880 report asks for (tests/e2e/regression_7880/, written with
the pytest plugin's `rtrace_server` fixture against the real livekit-agents client), run as its maintainers would
run it (`pytester`): on 1.8.8 both tool-output push paths delete the output and each test fails with RT101; on
1.8.9 both pass."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import client_python

pytestmark = pytest.mark.e2e
pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parent.parent
REGRESSION = ROOT / "tests" / "e2e" / "regression_7880"
SCENARIO = ROOT / "tests" / "e2e" / "livekit_scenario.py"
TESTS = ("test_queued_speech_push_keeps_the_tool_output", "test_interrupted_tool_output_push_keeps_the_tool_output")


def run_regression(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, version: str) -> pytest.RunResult:
    for path in REGRESSION.iterdir():
        if path.is_file():
            shutil.copy(path, pytester.path / path.name)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    monkeypatch.setenv("LIVEKIT_PYTHON", str(client_python(version)))
    monkeypatch.setenv("LIVEKIT_SCENARIO", str(SCENARIO))
    return pytester.runpytest("-v", "-p", "no:cacheprovider")


def failure(result: pytest.RunResult, test: str) -> str:
    """The failure section of `test` in the run's output."""
    out = result.stdout.str()
    start = out.index(f"_ {test} _")
    end = out.find("\n___", start + 1)
    return out[start : end if end >= 0 else None]


def test_the_7880_regression_test_fails_on_livekit_1_8_8_with_rt101_on_both_push_paths(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_regression(pytester, monkeypatch, "1.8.8")
    result.assert_outcomes(failed=2)
    for test in TESTS:
        text = failure(result, test)
        assert "rtrace: " in text and "at or above error in this test's session; trace kept at" in text, text
        assert "RT101 deleted-function-call-output" in text, text
        assert "AssertionError" not in text, text  # the agent did what the test needs: only the finding fails it


def test_the_7880_regression_test_passes_on_livekit_1_8_9(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_regression(pytester, monkeypatch, "1.8.9")
    result.assert_outcomes(passed=2)
    for test in TESTS:
        result.stdout.fnmatch_lines([f"*{test} PASSED*"])
