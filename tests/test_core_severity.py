"""Severities and fail-on levels, declared once, and every consumer that reads them."""

from __future__ import annotations

import dataclasses

import pytest

from rtrace.core.severity import FAIL_ON_LEVELS, SEVERITY_RANK, failing


@dataclasses.dataclass
class F:
    severity: str


def test_failing_is_at_or_above_the_level_and_never_is_none() -> None:
    found = [F("info"), F("warning"), F("error")]
    assert [f.severity for f in failing(found, "error")] == ["error"]
    assert [f.severity for f in failing(found, "warning")] == ["warning", "error"]
    assert failing(found, "info") == found and failing(found, "never") == []
    assert set(FAIL_ON_LEVELS) == set(SEVERITY_RANK) | {"never"}


def test_every_consumer_offers_exactly_the_declared_levels() -> None:
    import typer.main

    from rtrace.cli import app
    from rtrace.engine.settings import FAIL_ON
    from rtrace.integrations.pytest_plugin import LEVELS

    group = typer.main.get_command(app)
    for command in ("analyze", "serve"):
        [option] = [p for p in group.commands[command].params if p.name == "fail_on"]  # type: ignore[attr-defined]
        assert tuple(option.type.choices) == FAIL_ON_LEVELS, command  # type: ignore[attr-defined]
    assert FAIL_ON == LEVELS == FAIL_ON_LEVELS


@pytest.mark.parametrize("level", FAIL_ON_LEVELS)
def test_analyze_serve_and_the_exit_code_agree_on_each_level(level: str) -> None:
    from rtrace.cli.root import ExitCode, exit_code

    found = [F("warning")]
    expected = ExitCode.FINDINGS if level in ("warning", "info") else ExitCode.OK
    assert exit_code(found, level) == expected  # type: ignore[arg-type]


def test_at_or_above_is_read_in_one_place() -> None:
    """No module but `core/severity.py` compares severity ranks against a level (`failing` is "at or above"): the
    hunt's exit code and the pytest plugin's hunt read it too (issue 38)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "rtrace"
    compares = re.compile(r"SEVERITY_RANK[^\n]*(>=|<=|>|<)|(>=|<=|>|<)[^\n]*SEVERITY_RANK")
    found = [f"{p.relative_to(root)}:{n}" for p in sorted(root.rglob("*.py")) if p.name != "severity.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if compares.search(line)]  # fmt: skip
    assert found == []
