"""SARIF 2.1.0: validated against the official OASIS JSON schema, plus the properties CI relies on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rtrace.engine.fold import Report, analyze_path
from rtrace.report import sarif
from rtrace.rules import RULES
from rtrace.rules.base import Config

from .chromium import npm_file
from .conftest import REAL
from .hostile_trace import SECRET, write_hostile_trace

REAL_TRACES = sorted(REAL.glob("*.jsonl"))
RACE_188 = REAL / "tool-output-race.livekit-1.8.8.jsonl"

#: The official SARIF 2.1.0 schema (OASIS, "2.1.0-rtm.5") is not on PyPI; Microsoft ships it in this npm package.
SCHEMA = ("@microsoft/jest-sarif@1.0.0-beta.0", "package/lib/schemas/sarif-2.1.0-rtm.5.json")
SCHEMA_SHA256 = "2d99159ae54a3eea97f81781cff48780548657c35949f4b7f25e99a2ba4de4f8"


@pytest.fixture(scope="module")
def validator() -> Any:
    import jsonschema

    path = npm_file(*SCHEMA, SCHEMA_SHA256, "sarif-2.1.0-rtm.5.json")
    schema = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def sarif_of(*paths: Path) -> dict[str, Any]:
    report = Report([analyze_path(p) for p in paths], Config())
    data: dict[str, Any] = json.loads(sarif.render(report))
    return data


def test_real_traces_validate_against_the_official_schema(validator: Any, tmp_path: Path) -> None:
    data = sarif_of(*REAL_TRACES, write_hostile_trace(tmp_path / "evil.jsonl"))
    errors = sorted(validator.iter_errors(data), key=str)
    assert not errors, "\n".join(str(e) for e in errors[:5])
    assert data["runs"][0]["results"]


def test_the_validator_rejects_a_broken_log(validator: Any) -> None:
    data = sarif_of(RACE_188)
    data["runs"][0]["results"][0]["level"] = "fatal"
    del data["runs"][0]["tool"]["driver"]["name"]
    assert len(list(validator.iter_errors(data))) >= 2


def test_rules_results_and_regions() -> None:
    data = sarif_of(*REAL_TRACES)
    assert data["version"] == "2.1.0"
    run = data["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.id for r in RULES]
    assert [r["name"] for r in rules] == [r.slug for r in RULES]
    assert all(r["shortDescription"]["text"] and r["help"]["text"] for r in rules)
    assert [a["location"]["uri"] for a in run["artifacts"]] == [p.as_uri() for p in REAL_TRACES]
    expected = []
    for k, path in enumerate(REAL_TRACES):
        for f in analyze_path(path).findings:
            expected.append((f.rule, k, f.subject_line, list(f.lines)))
    got = [
        (
            r["ruleId"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["index"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
            [loc["physicalLocation"]["region"]["startLine"] for loc in r["relatedLocations"]],
        )
        for r in run["results"]
    ]
    assert got == expected
    for r in run["results"]:
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        assert r["level"] in ("error", "warning", "note")
    rt101 = next(r for r in run["results"] if r["ruleId"] == "RT101")
    start = rt101["locations"][0]["physicalLocation"]["region"]["startLine"]
    assert f"deleted at line {start} " in rt101["message"]["text"]  # the delete, not the ack that made it certain


def test_fingerprints_are_stable_and_survive_shifted_lines(tmp_path: Path) -> None:
    first = sarif_of(*REAL_TRACES)["runs"][0]["results"]
    second = sarif_of(*REAL_TRACES)["runs"][0]["results"]
    prints = [r["partialFingerprints"]["rtraceFinding/v1"] for r in first]
    assert prints == [r["partialFingerprints"]["rtraceFinding/v1"] for r in second]
    assert len(set(prints)) == len(prints)
    # The same session recorded with a header line: every line moves by one, the fingerprints stay.
    shifted = tmp_path / RACE_188.name
    shifted.write_bytes(b'{"rtrace": 1, "client": "livekit-agents"}\n' + RACE_188.read_bytes())
    a = sarif_of(RACE_188)["runs"][0]["results"]
    b = sarif_of(shifted)["runs"][0]["results"]
    assert [r["partialFingerprints"] for r in a] == [r["partialFingerprints"] for r in b]
    lines = [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in a]
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in b] == [n + 1 for n in lines]


def test_relative_paths_stay_relative() -> None:
    assert sarif.artifact_uri("traces/./a.jsonl") == "traces/a.jsonl"
    assert sarif.artifact_uri("-") == "stdin"


def test_no_secret_and_unreadable_input_is_a_notification(tmp_path: Path) -> None:
    evil = write_hostile_trace(tmp_path / "evil.jsonl")
    report = Report([analyze_path(evil)], Config())
    text = sarif.render(report).decode("utf-8")
    assert SECRET not in text
    from rtrace.engine.fold import TraceReport

    missing = TraceReport(str(tmp_path / "missing.jsonl"), 0, 0, 0.0, [], [], 0, unreadable="missing.jsonl: gone")
    data = json.loads(sarif.render(Report([missing], Config())))
    inv = data["runs"][0]["invocations"][0]
    assert inv["executionSuccessful"] is False
    assert inv["toolExecutionNotifications"][0]["message"]["text"] == "missing.jsonl: gone"
    assert data["runs"][0]["artifacts"][0]["location"]["uri"].startswith("file://")
