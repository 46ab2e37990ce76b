"""The trace model: records, the header line, problems, and how a record is written back."""

from __future__ import annotations

import io

import orjson

from rtrace.core.loader import TraceReader
from rtrace.core.trace import DIRECTIONS, FORMAT_VERSION, Header, Problem, Record, dumps_header, dumps_record


def _rec() -> Record:
    event = {"type": "response.text.delta", "delta": "hé"}
    return Record(4, 7, 1.5, "server", 2, event, "response.output_text.delta", "response.text.delta")


def test_record_fields_and_repr() -> None:
    rec = _rec()
    assert (rec.seq, rec.line) == (4, 7)
    assert repr(rec) == "Record(line=7, t=1.5, dir=server, conn=2, type='response.output_text.delta')"
    assert rec.to_json() == {"t": 1.5, "dir": "server", "conn": 2, "event": rec.event}


def test_dumps_record_is_one_native_line_with_the_raw_event() -> None:
    line = dumps_record(_rec())
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert orjson.loads(line) == {"t": 1.5, "dir": "server", "conn": 2, "event": _rec().event}
    # The wire event keeps its beta name: normalisation lives in Record.type only.
    assert b'"response.text.delta"' in line
    assert dumps_record({"t": 0.0, "dir": "meta", "conn": 1, "event": {"type": "note"}}).startswith(b'{"t":0.0')


def test_written_record_reads_back_equal() -> None:
    rec = _rec()
    back = list(TraceReader(io.BytesIO(dumps_header({"model": "m"}) + dumps_record(rec)), "x"))
    assert len(back) == 1
    got = back[0]
    assert (got.t, got.dir, got.conn, got.event, got.type, got.raw_type) == (
        rec.t,
        rec.dir,
        rec.conn,
        rec.event,
        rec.type,
        rec.raw_type,
    )


def test_header_line() -> None:
    line = dumps_header({"recorder": "r", "model": "gpt-realtime"})
    assert orjson.loads(line) == {"rtrace": FORMAT_VERSION, "recorder": "r", "model": "gpt-realtime"}
    reader = TraceReader(io.BytesIO(line), "x")
    assert list(reader) == [] and reader.header == Header(1, {"recorder": "r", "model": "gpt-realtime"})


def test_problem_format() -> None:
    p = Problem("a/b.jsonl", 12, 5, "malformed JSON: x; skipped")
    assert str(p) == "a/b.jsonl:12:5: malformed JSON: x; skipped"
    assert p.severity == "warning" and p.excerpt == ""


def test_directions() -> None:
    assert DIRECTIONS == ("client", "server", "meta", "local")
