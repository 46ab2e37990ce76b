"""Where a report goes: the format from --format and -o, concise, github, quiet, statistics, piped text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtrace.cli import main

from .conftest import REAL

RACE_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"
RACE_189 = REAL / "tool-output-race.livekit-1.8.9.jsonl"


# -- habits of the tools users trust (issue 17) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "starts"),
    [("r.json", b"{"), ("r.sarif", b"{"), ("r.xml", b"<?xml"), ("r.md", b"#"), ("r.html", b"<!doctype html"),
     ("r.txt", str(RACE_188).encode())],
)  # fmt: skip
def test_output_follows_the_extension(name: str, starts: bytes, tmp_path: Path) -> None:
    out = tmp_path / name
    assert main(["analyze", str(RACE_188), "-o", str(out)]) == 1
    assert out.read_bytes().lower().startswith(starts.lower())
    if name.endswith(".sarif"):
        assert json.loads(out.read_bytes())["version"] == "2.1.0"


def test_an_output_whose_extension_says_nothing_or_disagrees_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(RACE_188), "-o", str(tmp_path / "out.data")]) == 2
    assert "cannot tell the format from the extension" in capsys.readouterr().err
    assert main(["analyze", str(RACE_188), "-f", "json", "-o", str(tmp_path / "out.html")]) == 2
    assert "asks for html but --format says json" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert main(["analyze", str(RACE_188), "-f", "concise", "-o", str(tmp_path / "out.txt")]) == 1
    assert (tmp_path / "out.txt").read_text().startswith(f"{RACE_188}:")


def test_concise_is_one_line_per_finding_and_github_one_annotation_each(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(RACE_188), "-f", "concise"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith(f"{RACE_188}:") for line in lines)
    assert f"{RACE_188}:47:1: RT101 [error] function_call_output" in lines[2]
    assert main(["analyze", str(RACE_188), "-f", "github"]) == 1
    annotations = capsys.readouterr().out.splitlines()
    assert [a.split(" ", 1)[0] for a in annotations] == ["::warning", "::error", "::error", "::warning"]


def test_quiet_prints_only_findings_and_nothing_when_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(RACE_188), "-q"]) == 1
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 4 and "events" not in out
    assert main(["analyze", str(RACE_189), "-q", "--select", "RT101"]) == 0
    assert capsys.readouterr().out == ""


def test_statistics_counts_per_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(RACE_188), "--statistics"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["2", "RT103", "unanswered-function-call", "warning"]
    assert sorted(line.split()[1] for line in lines[1:3]) == ["RT101", "RT102"]
    assert lines[-1] == "4 findings in 1 of 1 traces"


def test_piped_output_has_no_padding_and_follows_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["analyze", str(RACE_188)])
    out = capsys.readouterr().out
    assert all(line == line.rstrip() for line in out.splitlines()) and max(map(len, out.splitlines())) <= 120
    monkeypatch.setenv("COLUMNS", "70")
    main(["analyze", str(RACE_188)])
    narrow = capsys.readouterr().out.splitlines()
    assert max(map(len, narrow)) <= 70 and len(narrow) > len(out.splitlines())
