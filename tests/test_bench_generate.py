"""bench.generate: the same seed gives the same bytes, and every workload is a clean, loadable trace."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bench.generate import fleet_plan, generate, text_session, voice_call
from rtrace.core.loader import TraceReader
from rtrace.engine.fold import analyze_path, analyze_records
from rtrace.rules.base import Config

KINDS = {"voice": voice_call, "text": text_session}


def make(kind: str, seed: int, seconds: float, faults: tuple[str, ...] = ()) -> bytes:
    buf = io.BytesIO()
    KINDS[kind](buf, seed, seconds, faults)
    return buf.getvalue()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_same_seed_same_bytes(kind: str) -> None:
    assert make(kind, 5, 60) == make(kind, 5, 60)
    assert make(kind, 5, 60) != make(kind, 6, 60)


@pytest.mark.parametrize(("kind", "seconds"), [("voice", 60), ("text", 4000)])
def test_workload_loads_without_problems_and_is_clean(kind: str, seconds: float) -> None:
    data = make(kind, 11, seconds)
    reader = TraceReader(io.BytesIO(data), "<gen>")
    records = list(reader)
    assert reader.problem_count == 0 and reader.problems == []
    assert reader.shapes == {"native": len(records)} and len(records) == data.count(b"\n")
    assert records[-1].t >= seconds
    findings, state = analyze_records(records, Config())
    assert findings == []
    if kind == "text":
        assert len(state.conns) == 2  # a new connection every hour, replaying the conversation
    types = {r.type for r in records}
    expected = {"response.output_audio.delta", "input_audio_buffer.append"} if kind == "voice" else set()
    assert expected | {"response.function_call_arguments.done", "conversation.item.create"} <= types


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_injected_fault_is_found(kind: str) -> None:
    records = list(TraceReader(io.BytesIO(make(kind, 3, 120, ("unanswered-call",))), "<gen>"))
    findings, _ = analyze_records(records, Config())
    assert [f.rule for f in findings] == ["RT103"]


def test_generate_writes_the_workloads_once(tmp_path: Path) -> None:
    first = generate(tmp_path, seed=2, scale=0.005, fleet_size=4)
    assert set(first["files"]) == {
        "audio-call.jsonl",
        "event-heavy.jsonl",
        *(f"fleet/{name}" for name, *_ in fleet_plan(2, 4, 0.005)),
    }
    stamp = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.jsonl")}
    assert generate(tmp_path, seed=2, scale=0.005, fleet_size=4) == first
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*.jsonl")} == stamp  # cached, not rewritten
    for name, info in first["files"].items():
        report = analyze_path(tmp_path / name)
        assert report.problem_count == 0 and report.events == info["lines"]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_fast_path_of_analyze_path_agrees_with_analyze_records(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(make(kind, 9, 4000 if kind == "text" else 120, ("unanswered-call",)))
    records = list(TraceReader.open(path))
    findings, state = analyze_records(records, Config())
    report = analyze_path(path)
    assert report.findings == findings and [f.rule for f in findings] == ["RT103"]
    assert report.events == len(records) and report.connections == len(state.conns)
    assert report.duration == state.last_t - (state.first_t or 0.0)
    assert report.by_dir == {d: sum(1 for r in records if r.dir == d) for d in {r.dir for r in records}}
