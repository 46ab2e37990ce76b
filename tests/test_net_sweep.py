"""`rtrace sweep` against a small client whose bug shows only when acks are slow (tests/sweep_client.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rtrace.cli import main
from rtrace.net.sweep import parse_latency_list, sweep

CLIENT = [sys.executable, str(Path(__file__).resolve().parent / "sweep_client.py")]


def test_parse_latency_list() -> None:
    assert parse_latency_list("0,10,50,200ms") == pytest.approx([0.0, 0.01, 0.05, 0.2])
    assert parse_latency_list("0.1,0.2s") == pytest.approx([0.1, 0.2])
    assert parse_latency_list("0") == [0.0]
    for bare in ("5", "0,10,50"):  # no unit anywhere: refused, never guessed
        with pytest.raises(ValueError, match="unit"):
            parse_latency_list(bare)
    with pytest.raises(ValueError):
        parse_latency_list("")
    with pytest.raises(ValueError):
        parse_latency_list("fast")


def test_the_table_shows_the_threshold(tmp_path: Path) -> None:
    result = sweep(CLIENT, [0.0, 0.1], 2, tmp_path, timeout=30)
    assert [r.exit_code for r in result.results] == [0, 0, 0, 0]
    assert result.count(0.0, "RT101") == 0
    assert result.count(0.1, "RT101") == 2
    assert result.has_errors()
    for r in result.results:
        assert r.trace.exists() and r.trace.parent == tmp_path
    assert [r.trace.name for r in result.results if r.latency == 0.1] == [
        "latency-100ms-run1.jsonl",
        "latency-100ms-run2.jsonl",
    ]


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "o")
    assert main(["sweep", "--latency", "0", "--runs", "1", "--out", out, "--", *CLIENT]) == 0
    assert "no finding at any latency" in capsys.readouterr().out
    assert main(["sweep", "--latency", "150ms", "--runs", "1", "--out", out, "--", *CLIENT]) == 1
    assert "RT101" in capsys.readouterr().out
    assert main(["sweep", "--latency", "nope", "--runs", "1", "--", *CLIENT]) == 2


def test_a_failing_or_hanging_command_is_reported(tmp_path: Path) -> None:
    result = sweep([sys.executable, "-c", "import sys; sys.exit(3)"], [0.0], 1, tmp_path, timeout=10)
    assert result.results[0].exit_code == 3 and not result.has_errors()
    result = sweep([sys.executable, "-c", "import time; time.sleep(30)"], [0.0], 1, tmp_path, timeout=0.5)
    assert result.results[0].exit_code is None
