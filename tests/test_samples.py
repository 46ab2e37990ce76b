"""Golden traces: every `sample_traces/**/X.jsonl` gives exactly the findings of its `X.expected.json`.

Regenerate with `python -m tests.make_samples` (review the diff: it is the rules' specification). Besides the
goldens: a positive sample of rule R must show R and a negative one must not (the intent of the file), and two
properties over all samples: a finding is certain at its `at_line` (it depends only on the lines up to it,
except for the rules that need the end of the trace), inserting unknown event types changes no finding but
its line numbers, and so does swapping a new connection's `connection.opened` with the `connection.closed` of the
connection before it (a client may open its new socket before the recorder notes the old one's close).
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from rtrace.core.loader import load
from rtrace.core.trace import Record
from rtrace.engine.fold import analyze_path, analyze_records
from rtrace.rules.base import Config

from . import make_samples

TRACES = make_samples.all_sample_traces()
RULE_SAMPLES = [p for p in TRACES if p.parent.parent == make_samples.RULES_DIR]
#: Rules whose findings may be decided only when a connection or the trace ends.
NEEDS_END = {
    "unconfirmed-item-lost-on-reconnect",
    "failed-response-not-retried",
    "changes-lost-at-final-close",
    "response-create-lost-on-reconnect",
}


def ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(make_samples.ROOT)) for p in paths]


def test_every_rule_has_positive_and_negative_samples() -> None:
    from rtrace.rules import RULES

    for rule in RULES:
        folder = make_samples.RULES_DIR / rule.slug
        names = [p.name for p in folder.glob("*.jsonl")]
        assert any(n.startswith("positive-") for n in names), rule.slug
        assert any(n.startswith("negative-") for n in names), rule.slug


def test_samples_are_up_to_date() -> None:
    """The committed sample traces are exactly what the generator writes."""
    for name, build in make_samples.SCENARIOS.items():
        path = make_samples.RULES_DIR / f"{name}.jsonl"
        assert path.read_bytes() == build().dumps(), f"{name}: run python -m tests.make_samples"


@pytest.mark.parametrize("trace", TRACES, ids=ids(TRACES))
def test_golden(trace: Path) -> None:
    expected = orjson.loads(make_samples.expected_path(trace).read_bytes())
    assert make_samples.expected_of(trace) == expected


@pytest.mark.parametrize("trace", RULE_SAMPLES, ids=ids(RULE_SAMPLES))
def test_intent(trace: Path) -> None:
    slug = trace.parent.name
    found = {f.slug for f in analyze_path(trace).findings}
    if trace.name.startswith("positive-"):
        assert slug in found
    else:
        assert slug not in found


def _records(trace: Path) -> list[Record]:
    records, reader = load(trace)
    assert reader.problem_count == 0
    return records


def _key(finding: object) -> tuple[object, ...]:
    return (finding.rule, finding.conn, finding.lines, finding.message)  # type: ignore[attr-defined]


@pytest.mark.parametrize("trace", TRACES, ids=ids(TRACES))
def test_finding_depends_only_on_lines_up_to_it(trace: Path) -> None:
    records = _records(trace)
    findings, _ = analyze_records(records, Config())
    for finding in findings:
        assert max(finding.lines) <= finding.at_line
        if finding.slug in NEEDS_END:
            continue
        prefix = [r for r in records if r.line <= finding.at_line]
        again, _ = analyze_records(prefix, Config())
        assert _key(finding) in {_key(f) for f in again}, (finding.slug, finding.at_line)


@pytest.mark.parametrize("trace", TRACES, ids=ids(TRACES))
def test_unknown_events_change_only_line_numbers(trace: Path, tmp_path: Path) -> None:
    raw = trace.read_bytes().splitlines(keepends=True)
    out: list[bytes] = []
    mapping: dict[int, int] = {}
    for k, line in enumerate(raw, start=1):
        if k % 3 == 1:
            t = orjson.loads(line)["t"]
            out.append(orjson.dumps({"t": t, "dir": "server", "conn": 1, "event": {"type": "x.unknown"}}) + b"\n")
        out.append(line)
        mapping[k] = len(out)
    mutated = tmp_path / trace.name
    mutated.write_bytes(b"".join(out))
    original = [(f.rule, [mapping[n] for n in f.lines]) for f in analyze_path(trace).findings]
    report = analyze_path(mutated)
    assert report.problem_count == sum(1 for k in range(1, len(raw) + 1) if k % 3 == 1)
    assert [(f.rule, list(f.lines)) for f in report.findings] == original


def swap_points(raw: list[bytes]) -> list[int]:
    """0-based k where line k+1 closes a connection and line k+2 opens another one."""
    out = []
    for k in range(len(raw) - 1):
        a, b = orjson.loads(raw[k]), orjson.loads(raw[k + 1])
        if (
            a.get("event", {}).get("type") == "connection.closed"
            and b.get("event", {}).get("type") == "connection.opened"
            and a.get("conn") != b.get("conn")
        ):
            out.append(k)
    return out


SWAPPABLE = [p for p in TRACES if swap_points(p.read_bytes().splitlines(keepends=True))]


def _shape(finding: object, mapping: dict[int, int] | None = None) -> tuple[object, ...]:
    """A finding without its line numbers: rule, connection, severity, witness lines (mapped), ids, and the
    explanation with every number blanked."""
    lines = [mapping.get(n, n) if mapping else n for n in finding.lines]  # type: ignore[attr-defined]
    text = re.sub(r"\d+", "#", finding.explanation)  # type: ignore[attr-defined]
    return (finding.rule, finding.conn, finding.severity, sorted(lines), finding.ids, text)  # type: ignore[attr-defined]


def test_there_are_reconnects_to_swap() -> None:
    assert len(SWAPPABLE) >= 10


@pytest.mark.parametrize("trace", SWAPPABLE, ids=ids(SWAPPABLE))
def test_opened_before_the_previous_close_changes_only_line_numbers(trace: Path, tmp_path: Path) -> None:
    raw = trace.read_bytes().splitlines(keepends=True)
    original = sorted(_shape(f) for f in analyze_path(trace).findings)
    for k in swap_points(raw):
        swapped = [*raw[:k], raw[k + 1], raw[k], *raw[k + 2 :]]
        mutated = tmp_path / f"{k}-{trace.name}"
        mutated.write_bytes(b"".join(swapped))
        mapping = {k + 1: k + 2, k + 2: k + 1}  # 1-based: the close moved down one line, the open up one
        again = sorted(_shape(f, mapping) for f in analyze_path(mutated).findings)
        assert again == original, (trace.name, k + 1)
