"""Importers: HAR websocket captures, JSON-array event logs and mitmproxy dumps become native traces with the same
events, secrets removed; `rtrace analyze` reads a .har directly; `rtrace convert` writes the native format."""

from __future__ import annotations

import datetime
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rtrace.cli import ExitCode, main
from rtrace.core.importers import ImportFailed, detect, native_path, records
from rtrace.core.loader import TraceReader
from rtrace.engine.fold import analyze_path

REAL = Path(__file__).resolve().parent.parent / "sample_traces" / "real"
RACE = REAL / "tool-output-race.livekit-1.8.8.jsonl"
RECONNECT = REAL / "reconnect-during-tool.livekit-1.8.4.jsonl"
KEY = "sk-proj-IMPORTKEY0123456789SECRET"
T0 = 1_764_500_000.0


def har_of(trace: Path) -> dict[str, Any]:
    """What Chrome devtools exports for the trace's websocket connections."""
    entries: dict[int, dict[str, Any]] = {}
    for rec in TraceReader.open(trace):
        entry = entries.setdefault(
            rec.conn,
            {
                "startedDateTime": "2025-11-30T10:00:00.000Z",
                "request": {
                    "method": "GET",
                    "url": f"wss://api.openai.com/v1/realtime?model=gpt-realtime&api-key={KEY}",
                    "headers": [{"name": "Authorization", "value": f"Bearer {KEY}"}],
                },
                "response": {"status": 101},
                "_resourceType": "websocket",
                "_webSocketMessages": [],
            },
        )
        if rec.dir in ("client", "server"):
            kind = "send" if rec.dir == "client" else "receive"
            data = json.dumps(rec.event)
            entry["_webSocketMessages"].append({"type": kind, "time": T0 + rec.t, "opcode": 1, "data": data})
    return {"log": {"version": "1.2", "creator": {"name": "WebInspector"}, "entries": list(entries.values())}}


def wire(trace: Path) -> list[tuple[int, str, dict[str, Any]]]:
    return [(r.conn, r.dir, r.event) for r in TraceReader.open(trace) if r.dir in ("client", "server")]


def rules_of(path: Path | str) -> Counter[str]:
    return Counter(f.rule for f in analyze_path(path).findings)


@pytest.mark.parametrize("trace", [RACE, RECONNECT])
def test_har_converts_to_the_same_events_and_findings(trace: Path, tmp_path: Path) -> None:
    har = tmp_path / "capture.har"
    har.write_text(json.dumps(har_of(trace)))
    out = tmp_path / "converted.jsonl"
    assert main(["convert", str(har), "-o", str(out)]) == 0
    assert wire(out) == wire(trace)
    assert rules_of(out) == rules_of(trace)
    text = out.read_text()
    assert KEY not in text and "IMPORTKEY" not in text
    opened = [r.event for r in TraceReader.open(out) if r.type == "connection.opened"]
    assert opened[0]["path"] == "/v1/realtime?model=gpt-realtime"


def test_analyze_reads_a_har_directly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    har = tmp_path / "capture.har"
    har.write_text(json.dumps(har_of(RACE)))
    assert main(["analyze", str(har)]) == ExitCode.FINDINGS
    out = capsys.readouterr().out
    assert "deleted-function-call-output" in out and "capture.har" in out


def test_json_array_log_of_the_realtime_console(tmp_path: Path) -> None:
    log = [
        {
            "time": datetime.datetime.fromtimestamp(T0 + r.t, datetime.timezone.utc).isoformat(),
            "source": r.dir,
            "event": r.event,
        }
        for r in TraceReader.open(RACE)
        if r.dir in ("client", "server")
    ]
    path = tmp_path / "realtime-console.json"
    path.write_text(json.dumps(log, indent=2))
    assert detect(str(path)) == "json-array"
    converted = list(records(str(path)))
    assert [(r["dir"], r["event"]) for r in converted] == [(d, e) for _, d, e in wire(RACE)]
    assert all(r["t"] >= 0 for r in converted)
    with native_path(str(path)) as native:
        assert rules_of(native)["RT101"] == 1


def console_log(trace: Path) -> list[dict[str, Any]]:
    return [
        {
            "time": datetime.datetime.fromtimestamp(T0 + r.t, datetime.timezone.utc).isoformat(),
            "source": r.dir,
            "event": r.event,
        }
        for r in TraceReader.open(trace)
        if r.dir in ("client", "server")
    ]


def test_a_json_array_is_analyzed_in_place_at_the_lines_of_the_users_file(tmp_path: Path) -> None:
    """Findings and problems of a JSON-array log point into the file the user has (the line where each element
    starts, a problem at its line and column), not into a converted trace they never saw."""
    from rtrace.core.importers import reader as reader_of
    from rtrace.core.loader import DEFAULT_MAX_LINE_BYTES
    from rtrace.engine.parallel import analyze_local
    from rtrace.rules import RULES, Config

    log = console_log(RACE)
    log.insert(3, {"time": log[3]["time"], "source": "client", "event": {"type": 5}})  # one element without a type
    path = tmp_path / "realtime-console.json"
    path.write_text(json.dumps(log, indent=2))
    text = path.read_text().splitlines()
    starts = [n for n, line in enumerate(text, 1) if line == "  {"]  # where each element of the array begins
    assert len(starts) == len(log)
    (report,) = analyze_local([str(path)], Config(), RULES, DEFAULT_MAX_LINE_BYTES)
    assert report.path == str(path) and report.unreadable is None
    (rt101,) = [f for f in report.findings if f.rule == "RT101"]
    delete = next(k for k, e in enumerate(log) if e["event"].get("type") == "conversation.item.delete")
    assert rt101.subject_line == starts[delete] and f"deleted at line {starts[delete]} " in rt101.message
    assert set(rt101.lines) <= set(starts)
    (problem,) = report.problems
    assert (problem.path, problem.line, problem.col) == (str(path), starts[3], 3) and "no `type`" in problem.message
    # All on one line, the elements are told apart by their column.
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps(log))
    with reader_of(str(flat)) as one_line:  # type: ignore[union-attr]
        rows = list(one_line)
        (bad,) = one_line.problems
    assert {r.line for r in rows} == {1} and bad.line == 1
    assert bad.col == len(json.dumps(log[:3])[:-1]) + 3  # `[`, three elements and `, `: the fourth's `{`


def test_binary_and_non_json_frames_become_notes() -> None:
    from rtrace.core.importers import har_records

    doc = {
        "log": {
            "entries": [
                {
                    "request": {"url": "wss://x/v1/realtime"},
                    "_webSocketMessages": [
                        {"type": "receive", "time": 1.0, "opcode": 1, "data": '{"type":"session.created"}'},
                        {"type": "send", "time": 1.5, "opcode": 2, "data": "AAAA"},
                        {"type": "send", "time": 2.0, "opcode": 1, "data": "not json"},
                    ],
                }
            ]
        }
    }
    out = list(har_records(doc))
    assert [r["dir"] for r in out] == ["meta", "server", "meta", "meta", "meta"]
    assert out[1]["t"] == 0.0 and out[3]["t"] == 1.0


@pytest.mark.parametrize(
    ("content", "message"),
    [('{"log": {"entries": []}}', "no websocket messages"), ("{not json", "not valid JSON"), ('{"x": 1}', "not a HAR")],
)
def test_bad_har_is_exit_3_without_output(tmp_path: Path, content: str, message: str) -> None:
    har = tmp_path / "bad.har"
    har.write_text(content)
    out = tmp_path / "out.jsonl"
    with pytest.raises(ImportFailed, match=message):
        list(records(str(har)))
    assert main(["convert", str(har), "-o", str(out)]) == ExitCode.UNREADABLE
    assert not out.exists()
    assert main(["analyze", str(har)]) == ExitCode.UNREADABLE


def test_native_traces_pass_through(tmp_path: Path) -> None:
    assert detect(str(RACE)) == "native"
    with native_path(str(RACE)) as p:
        assert p == str(RACE)
    out = tmp_path / "copy.jsonl"
    assert main(["convert", str(RACE), "-o", str(out)]) == 0
    assert wire(out) == wire(RACE)


def test_mitmproxy_dump(tmp_path: Path) -> None:
    pytest.importorskip("mitmproxy", reason="mitmproxy is an optional extra (pip install 'rtrace-cli[mitmproxy]')")
    from mitmproxy import io as mitm_io
    from mitmproxy.test import tflow
    from mitmproxy.websocket import WebSocketMessage

    flow = tflow.twebsocketflow()
    flow.request.url = f"wss://api.openai.com/v1/realtime?model=gpt-realtime&api-key={KEY}"
    wire_events = [(r.dir == "client", r.t, r.event) for r in TraceReader.open(RACE) if r.dir in ("client", "server")]
    flow.websocket.messages = [
        WebSocketMessage(1, from_client, json.dumps(event).encode(), timestamp=T0 + t)
        for from_client, t, event in wire_events
    ]
    path = tmp_path / "flows.mitm"
    with open(path, "wb") as f:
        mitm_io.FlowWriter(f).add(flow)
    out = tmp_path / "converted.jsonl"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    assert wire(out) == wire(RACE)
    assert KEY not in out.read_text()
    assert rules_of(out) == rules_of(RACE)


LOGS = Path(__file__).resolve().parent / "golden" / "livekit-logs"


def test_a_livekit_log_is_detected_by_content_and_read_in_place(tmp_path: Path) -> None:
    import gzip

    from rtrace.core.importers import reader

    log = LOGS / "1.8.8-race-dev.log"
    packed = tmp_path / "agent.txt"  # any name, compressed too
    packed.write_bytes(gzip.compress(log.read_bytes()))
    for path in (log, packed):
        assert detect(str(path)) == "livekit-log"
        with native_path(str(path)) as readable:
            assert readable == str(path)  # read in place: findings at the log's own lines
        log_reader = reader(str(path))
        assert log_reader is not None
        with log_reader:
            assert sum(1 for _ in log_reader) == 76
    assert reader(str(LOGS / "1.8.8-race.serve.jsonl")) is None
    out = tmp_path / "converted.jsonl"
    assert main(["convert", str(packed), "-o", str(out)]) == 0
    with TraceReader.open(out) as converted:
        assert sum(1 for _ in converted) == 76
        assert converted.header is not None and converted.header.fields["source_format"] == "livekit-log"
        assert "reconnect-replay" in converted.header.fields["unseen"]


def test_compressed_captures_are_detected_through_the_compression(tmp_path: Path) -> None:
    import bz2

    har = tmp_path / "capture.bin"
    har.write_bytes(bz2.compress(json.dumps({"log": {"entries": []}}).encode()))
    assert detect(str(har)) == "har"
    array = tmp_path / "array.bin"
    array.write_bytes(bz2.compress(b'[{"type": "session.created"}]'))
    assert detect(str(array)) == "json-array"
    assert [r["event"]["type"] for r in records(str(array))] == ["session.created"]


@pytest.mark.parametrize("content", [b"", b'{"name": "x",\n "version": "1"}\n', bytes(range(256)) * 8])
def test_convert_of_what_is_not_a_trace_exits_3_and_writes_nothing(tmp_path: Path, content: bytes) -> None:
    import gzip

    for data in (content, gzip.compress(content)):
        src, out = tmp_path / "package.json", tmp_path / "out.jsonl.gz"
        src.write_bytes(data)
        assert main(["convert", str(src), "-o", str(out)]) == ExitCode.UNREADABLE
        assert not out.exists()
