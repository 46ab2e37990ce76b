"""README's "Use rtrace in your tests", run: its pytest example under pytester, its `minimize` command on the
bundled trace (with the sizes it states), its live line, and docs/testing.md quoting the Vitest files CI runs."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rtrace.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SECTION = README.split("## Use rtrace in your tests")[1].split("\n## ")[0]
pytest_plugins = ("pytester",)


def blocks(text: str, info: str = "") -> list[str]:
    """The fenced code blocks of `text` with that info string, in order."""
    found, body, opened = [], [], None
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if opened is None:
                opened, body = line[3:].strip(), []
            else:
                if opened == info:
                    found.append("".join(body))
                opened = None
        elif opened is not None:
            body.append(line)
    return found


def test_the_pytest_example_passes_and_fails_as_the_readme_says(pytester: pytest.Pytester) -> None:
    (example,) = blocks(SECTION, "python")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_agent=example)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)
    # without fail_on="never" the deleted tool output fails the test, with the finding and the kept trace
    pytester.makepyfile(test_agent=example.replace('@pytest.mark.rtrace(fail_on="never")', ""))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["rtrace: * at or above error in this test's session; trace kept at *", "*RT101 deleted-function-call-output*"]
    )


def test_the_minimize_command_gives_the_sizes_the_readme_states(tmp_path: Path) -> None:
    (command,) = [line for line in blocks(SECTION)[-1].splitlines() if line.startswith("rtrace minimize ")]
    argv = shlex.split(command.split("#")[0])
    argv[argv.index("-o") + 1] = str(tmp_path / "min.jsonl")
    done = subprocess.run(
        [sys.executable, "-m", "rtrace.cli", *argv[1:]], cwd=ROOT, capture_output=True, text=True, check=True
    )
    written = len((tmp_path / "min.jsonl").read_bytes().splitlines())
    assert written <= 12
    assert f"76 records -> {written} lines (RT101 deleted-function-call-output holds" in done.stderr
    assert f"the 76-line 1.8.8 race becomes {written} lines that still give RT101" in " ".join(SECTION.split())


def test_the_live_line_shown_is_the_one_analyze_follow_prints(capsys: pytest.CaptureFixture[str]) -> None:
    (shown,) = [line for line in SECTION.splitlines() if line.startswith("error RT101 deleted-function-call-output")]
    race = ROOT / "sample_traces" / "real" / "tool-output-race.livekit-1.8.8.jsonl"
    assert main(["analyze", "--follow", "--follow-timeout", "0.1", str(race)]) == 1
    assert shown in capsys.readouterr().err.splitlines()


def test_docs_testing_quotes_the_vitest_files_ci_runs() -> None:
    doc = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    setup, config = blocks(doc, "js")[:2]
    folder = ROOT / "tests" / "e2e" / "node" / "vitest"
    assert setup == (folder / "rtrace.globalSetup.mjs").read_text(encoding="utf-8")
    assert config == "// vitest.config.mjs\n" + (folder / "vitest.config.mjs").read_text(encoding="utf-8")
    assert "(docs/testing.md)" in SECTION
