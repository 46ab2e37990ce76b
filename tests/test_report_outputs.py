"""Formats by extension, several outputs in one `rtrace analyze` run, and the `rtrace report` command."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rtrace.cli import main
from rtrace.report.outputs import ReportFormat, format_for_path

from .conftest import REAL

RACE_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("r.md", ReportFormat.markdown),
        ("r.HTML", ReportFormat.html),
        ("r.json", ReportFormat.json),
        ("r.sarif", ReportFormat.sarif),
        ("r.sarif.json", ReportFormat.sarif),
        ("r.xml", ReportFormat.junit),
        ("r.txt", None),
    ],
)
def test_format_for_path(name: str, fmt: ReportFormat | None) -> None:
    assert format_for_path(Path(name)) is fmt


def test_analyze_writes_side_outputs_in_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = {k: tmp_path / f"out.{k}" for k in ("json", "sarif", "xml", "html", "md")}
    code = main(
        [
            "analyze",
            str(REAL),
            "--json",
            str(out["json"]),
            "--sarif",
            str(out["sarif"]),
            "--junit",
            str(out["xml"]),
            "--html",
            str(out["html"]),
            "--markdown",
            str(out["md"]),
        ]
    )
    assert code == 1
    assert "RT101 deleted-function-call-output" in capsys.readouterr().out  # the normal output is still there
    traces = sorted(REAL.glob("*.jsonl"))
    assert [t["path"] for t in json.loads(out["json"].read_text())["traces"]] == [str(p) for p in traces]
    assert json.loads(out["sarif"].read_text())["version"] == "2.1.0"
    assert len(ET.parse(out["xml"]).getroot().findall("testsuite")) == len(traces)
    assert out["html"].read_text().count('"path":') >= len(traces)
    assert out["md"].read_text().count("\n## `") == len(traces)


@pytest.mark.parametrize(("suffix", "marker"), [(".md", "```mermaid"), (".html", "<!DOCTYPE html>")])
def test_report_command_picks_the_format_from_the_extension(tmp_path: Path, suffix: str, marker: str) -> None:
    target = tmp_path / f"report{suffix}"
    assert main(["report", str(RACE_188), "-o", str(target)]) == 0
    assert marker in target.read_text()


def test_report_command_format_option_and_stdout(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert main(["report", str(RACE_188), "--format", "md"]) == 0
    assert b"sequenceDiagram" in capsysbinary.readouterr().out
    target = tmp_path / "report.out"
    assert main(["report", str(RACE_188), "-o", str(target), "--format", "html"]) == 0
    assert target.read_text().startswith("<!DOCTYPE html>")


def test_report_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(RACE_188), "-o", str(tmp_path / "r.txt")]) == 2
    assert "use --format" in capsys.readouterr().err
    assert main(["report", str(RACE_188), "--format", "pdf"]) == 2
    assert main(["report", str(RACE_188), "-o", str(tmp_path / "no" / "r.md")]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "r.md")]) == 3
    assert "missing.jsonl" in capsys.readouterr().err and not (tmp_path / "r.md").exists()  # nothing to report on
