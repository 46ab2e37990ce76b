"""livekit-agents logs (`LK_OPENAI_DEBUG=1`) read as traces: both formatters, found by content, every event once,
connections from the connect lines and `session.created`, the log's own line numbers, and what a log cannot show
marked so that no rule judges it. The logs in tests/golden/livekit-logs are real (livekit-agents 1.8.8 and 1.8.9
against `rtrace serve`, both formatters on one run, with serve's recording beside them)."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

from rtrace.core.livekit_log import UNSEEN, LogReader, sniff
from rtrace.core.trace import Record
from rtrace.engine.fold import analyze_path, analyze_reader

LOGS = Path(__file__).resolve().parent / "golden" / "livekit-logs"
ESC = "\x1b"


def json_line(message: str, t: float, level: str = "DEBUG", **extra: Any) -> str:
    stamp = f"2026-12-01T08:57:{52 + t:09.6f}+00:00"
    record = {"message": message, "level": level, "name": "livekit.agents", **extra, "pid": 1, "timestamp": stamp}
    return json.dumps(record)


def dev_line(message: str, t: float, level: str = "DEBUG", **extra: Any) -> str:
    ms = round(t * 1000)
    stamp = f"2026-12-01 08:57:{52 + ms // 1000:02d},{ms % 1000:03d}"
    colour = {"DEBUG": 36, "ERROR": 31, "WARNING": 33}[level]
    rendered = json.dumps(extra) if extra else ""
    return f"{stamp} - {ESC}[{colour}m{level}{ESC}[0m livekit.agents - {message} {ESC}[90m{rendered}{ESC}[0m"


URL = "ws://127.0.0.1:41229/v1/realtime?model=gpt-realtime"


def session(line: Any) -> list[str]:
    """A connection, a turn, a repeated `unhandled event:`, a reconnect (no replay logged), the session's end."""
    created = {"type": "session.created", "event_id": "e1", "session": {"id": "s1"}}
    create = {"type": "conversation.item.create", "event_id": "c1", "item": {"id": "u1", "type": "message"}}
    added = {"type": "conversation.item.added", "event_id": "e2", "item": {"id": "u1", "type": "message"}}
    audio = {"type": "response.output_audio.delta", "event_id": "e3", "item_id": "a1", "delta": "..."}
    return [
        "not a log record at all",
        line(f"connecting to Realtime API: {URL}", 0.0),
        line("<<<", 0.01, **{"lk.pii.event": created}),
        line("unhandled event: session.created", 0.011, **{"lk.pii.event": created}),
        line(">>>", 0.02, **{"lk.pii.event": create}),
        line("<<<", 0.07, **{"lk.pii.event": added}),
        line("<<<", 0.08, **{"lk.pii.event": audio}),
        line("failed to handle event", 0.081, "ERROR", **{"lk.pii.event": {**audio, "delta": "AAEAAQABAA..."}}),
        line("Error in _recv_task", 0.1, "ERROR"),
        line("connecting to Realtime API: " + URL, 0.2),
        line("reconnecting to OpenAI Realtime API", 0.21, max_session_duration=1200),
        line("reconnected to OpenAI Realtime API", 0.22),
        line("<<<", 0.23, **{"lk.pii.event": {**created, "event_id": "e9"}}),
        line("session closed", 0.5, reason="user_initiated", error=None),
    ]


def read(text: str) -> tuple[list[Record], LogReader]:
    reader = LogReader(io.BytesIO(text.encode()), "agent.log")
    return list(reader), reader


@pytest.mark.parametrize(("line", "kind"), [(json_line, "json"), (dev_line, "dev")])
def test_both_formatters_give_the_same_records_at_the_logs_lines(line: Any, kind: str) -> None:
    lines = session(line)
    assert sniff("\n".join(lines).encode()) == kind
    records, reader = read("\n".join(lines) + "\n")
    assert reader.log_format == kind and reader.header is not None
    assert reader.header.fields["source_format"] == "livekit-log"
    assert reader.header.fields["unseen"] == sorted(UNSEEN)
    got = [(r.line, r.dir, r.conn, r.type) for r in records]
    assert got == [
        (2, "meta", 1, "connection.opened"),
        (3, "server", 1, "session.created"),  # line 4 repeats it: not counted
        (5, "client", 1, "conversation.item.create"),
        (6, "server", 1, "conversation.item.added"),
        (7, "server", 1, "response.output_audio.delta"),  # line 8 repeats it
        (9, "meta", 1, "connection.closed"),
        (10, "meta", 2, "connection.opened"),
        (11, "meta", 2, "note"),
        (13, "server", 2, "session.created"),
        (14, "meta", 2, "connection.closed"),
    ]
    assert records[0].event == {"type": "connection.opened", "path": "/v1/realtime?model=gpt-realtime"}
    assert records[6].event["replay_visible"] is False  # the reconnect's replay is never logged
    assert "delta" not in records[4].event  # the logged payload is a placeholder: no audio bytes from it
    assert [r.t for r in records][:3] == [0.0, 0.01, 0.02]
    assert reader.problems == []


def test_a_connection_without_a_connect_line_starts_at_its_session_created() -> None:
    created = {"type": "session.created", "event_id": "e1"}
    lines = [json_line("<<<", 0.0, **{"lk.pii.event": created}), json_line("<<<", 0.5, **{"lk.pii.event": created})]
    records, _ = read("\n".join(lines))
    assert [(r.line, r.conn, r.type) for r in records] == [
        (1, 1, "connection.opened"),
        (1, 1, "session.created"),
        (2, 2, "connection.opened"),
        (2, 2, "session.created"),
    ]
    assert records[2].event == {"type": "connection.opened", "replay_visible": False}


def test_tracebacks_and_foreign_lines_are_skipped_and_bad_records_are_problems() -> None:
    lines = [
        dev_line("Error in _recv_task", 0.0, "ERROR"),
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        dev_line(">>>", 0.1, other="no event"),
        dev_line("<<<", 0.2, **{"lk.pii.event": {"no": "type"}}),
        dev_line("<<<", 0.3, **{"lk.pii.event": {"type": "no.such.event"}}),
    ]
    records, reader = read("\n".join(lines))
    assert [(r.line, r.type) for r in records] == [(6, "connection.opened"), (6, "no.such.event")]
    assert [(p.line, p.message.split(";")[0]) for p in reader.problems] == [
        (4, "a `>>>` record without an `lk.pii.event` object"),
        (5, "event has no `type`"),
        (6, "unknown event type 'no.such.event'"),
    ]


def test_sniff_needs_a_livekit_record() -> None:
    assert sniff(b'{"t": 0, "dir": "client", "conn": 1, "event": {"type": "session.update"}}\n') is None
    assert sniff(json_line("hello", 0.0).replace("livekit.agents", "myapp").encode()) is None
    assert sniff(b"2026-12-01 08:57:52,830 - INFO root - started\n") is None
    assert sniff(b"\x1f\x8b\x08") is None


@pytest.mark.parametrize("name", ["1.8.8-race", "1.8.9-reconnect"])
def test_real_logs_in_both_formats_read_as_serves_recording(name: str) -> None:
    served = analyze_path(LOGS / f"{name}.serve.jsonl")
    for kind in ("json", "dev"):
        with LogReader.open(LOGS / f"{name}-{kind}.log") as reader:
            report = analyze_reader(reader)
        assert report.problems == []
        assert report.connections == served.connections
        if "race" in name:  # every event once, the same findings (apart from line numbers)
            assert report.by_dir["client"] == served.by_dir["client"]
            assert report.by_dir["server"] == served.by_dir["server"]
            assert [(f.rule, f.ids) for f in report.findings] == [(f.rule, f.ids) for f in served.findings]
            assert {f.rule for f in report.findings} == {"RT101", "RT102", "RT103"}
        else:  # the replay is not in the log: the rules that judge it say so, and nothing false is found
            assert report.by_dir["client"] < served.by_dir["client"]
            assert report.findings == [] == served.findings
            assert {"RT105", "RT106", "RT123", "RT124"} <= {r for n in report.not_judged for r in n.rules}


def test_a_compressed_log_is_read_the_same(tmp_path: Path) -> None:
    packed = tmp_path / "agent.log.gz"
    packed.write_bytes(gzip.compress((LOGS / "1.8.8-race-json.log").read_bytes()))
    with LogReader.open(packed) as reader:
        records = list(reader)
    with LogReader.open(LOGS / "1.8.8-race-json.log") as plain:
        assert [(r.line, r.type) for r in records] == [(r.line, r.type) for r in plain]


def test_a_log_of_several_jobs_reads_the_first_and_says_so() -> None:
    created = {"type": "session.created", "event_id": "e1"}
    lines = [
        json_line("<<<", 0.0, job_id="AJ_1", **{"lk.pii.event": created}),
        json_line("<<<", 0.1, job_id="AJ_2", **{"lk.pii.event": created}),
        json_line(">>>", 0.2, job_id="AJ_1", **{"lk.pii.event": {"type": "response.create"}}),
        json_line(">>>", 0.3, job_id="AJ_2", **{"lk.pii.event": {"type": "response.create"}}),
    ]
    records, reader = read("\n".join(lines))
    read_ = [(r.line, r.type) for r in records]
    assert read_ == [(1, "connection.opened"), (1, "session.created"), (3, "response.create")]
    assert reader.job == "AJ_1" and [p.line for p in reader.problems] == [2]
    assert "another job (AJ_2; job AJ_1 is read)" in reader.problems[0].message


def test_another_loggers_lines_before_a_json_log_decide_no_formatter() -> None:
    """Dev-rendered lines of another program before a JSON log made the reader take the log as `dev`, and
    its records were lost."""
    log = (LOGS / "1.8.8-race-json.log").read_bytes()
    other = b"".join(b"2025-01-01 10:00:%02d,000 - INFO myapp - hello\n" % k for k in range(30))
    with LogReader(io.BytesIO(log), "a.log") as plain, LogReader(io.BytesIO(other + log), "b.log") as after:
        want, got = [r[5] for r in plain.rows()], [r[5] for r in after.rows()]
    assert got == want and len(want) > 10 and after.log_format == "json"
