"""Baselines: the fingerprints of a report's findings, written and read back; a later run accepts exactly those."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from rtrace.engine.fold import Report, analyze_path
from rtrace.report import baseline, json_report, sarif
from rtrace.rules.base import Config

from .conftest import REAL

RACE = REAL / "tool-output-race.livekit-1.8.8.jsonl"


def report_of(*paths: Path) -> Report:
    return Report([analyze_path(p) for p in paths], Config())


def test_a_baseline_accepts_every_finding_it_was_written_from(tmp_path: Path) -> None:
    report = report_of(RACE)
    path = tmp_path / "baseline.json"
    path.write_bytes(baseline.render(report))
    known = baseline.load(path)
    assert len(known) == len(report.findings) > 0
    accepted = baseline.apply(report, known)
    assert accepted.findings == [] and accepted.traces[0].accepted == len(report.findings)
    assert orjson.loads(json_report.render(accepted))["traces"][0]["accepted"] == len(report.findings)


def test_fingerprints_are_the_sarif_ones_and_ignore_where_the_trace_lives(tmp_path: Path) -> None:
    report = report_of(RACE)
    sarif_prints = [
        r["partialFingerprints"][sarif.FINGERPRINT] for r in sarif.report_sarif(report)["runs"][0]["results"]
    ]
    assert [p for _, p in sarif.trace_fingerprints(report.traces[0])] == sarif_prints
    moved = tmp_path / "elsewhere" / RACE.name
    moved.parent.mkdir()
    shutil.copy(RACE, moved)
    known = frozenset(sarif_prints)
    assert baseline.apply(report_of(moved), known).findings == []


def test_only_known_findings_are_accepted(tmp_path: Path) -> None:
    report = report_of(RACE)
    keep_out = sarif.trace_fingerprints(report.traces[0])[0][1]
    known = frozenset(p for _, p in sarif.trace_fingerprints(report.traces[0])) - {keep_out}
    left = baseline.apply(report, known)
    assert len(left.findings) == 1 and left.findings[0] == report.findings[0]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{", "not JSON"),
        (b'{"schema": "x"}', "not an rtrace baseline"),
        (b'{"schema": "rtrace.baseline/1", "findings": [{}]}', "no fingerprint"),
    ],
)
def test_a_bad_baseline_file_says_what_is_wrong(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "b.json"
    path.write_bytes(content)
    with pytest.raises(baseline.BaselineError, match=why):
        baseline.load(path)
    with pytest.raises(baseline.BaselineError, match="No such file"):
        baseline.load(tmp_path / "missing.json")
