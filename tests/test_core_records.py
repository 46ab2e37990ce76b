"""The reader's slow path (`core.records`): each input shape read whole, and every problem of a parsed line as a
`file:line:col` message."""

from __future__ import annotations

import orjson
import pytest

from .test_core_loader import OK, lines_of, only_problem, read


def test_native_record_fields() -> None:
    recs, reader = read(OK + b"\n")
    assert len(recs) == 1 and reader.problems == [] and reader.count == 1
    rec = recs[0]
    assert (rec.seq, rec.line, rec.t, rec.dir, rec.conn, rec.type, rec.raw_type) == (
        0,
        1,
        0.5,
        "client",
        1,
        "response.create",
        "response.create",
    )
    assert rec.event == {"type": "response.create"}
    assert reader.shapes == {"native": 1}


def test_seq_and_line_are_not_mixed() -> None:
    recs, _ = read(b"\n" + OK + b"\n\nnot json\n" + OK + b"\n")
    assert [(r.seq, r.line) for r in recs] == [(0, 2), (1, 5)]


def test_src_is_a_synonym_of_dir() -> None:
    recs, reader = read(OK.replace(b'"dir"', b'"src"') + b"\n")
    assert reader.problems == [] and recs[0].dir == "client"


def test_header_kept_with_unknown_keys() -> None:
    head = b'{"rtrace": 1, "recorder": "rtrace-record 0.1", "model": "gpt-realtime", "x-custom": {"a": [1]}}\n'
    recs, reader = read(head + OK + b"\n")
    assert reader.problems == []
    assert reader.header is not None and reader.header.version == 1
    assert reader.header.fields == {"recorder": "rtrace-record 0.1", "model": "gpt-realtime", "x-custom": {"a": [1]}}
    assert lines_of(recs) == [2]


def test_header_of_a_newer_version_is_read_with_a_warning() -> None:
    _, reader = read(b'{"rtrace": 2}\n' + OK + b"\n")
    assert reader.header is not None and reader.header.version == 2
    assert "rtrace format 2" in only_problem(reader).message


def test_integer_time_and_missing_conn() -> None:
    recs, reader = read(b'{"t": 3, "dir": "server", "event": {"type": "session.created"}}\n')
    assert reader.problems == [] and recs[0].t == 3.0 and isinstance(recs[0].t, float) and recs[0].conn == 1


def test_bad_dir_is_a_problem() -> None:
    recs, reader = read(OK.replace(b'"client"', b'"sideways"') + b"\n")
    assert recs == []
    p = only_problem(reader)
    assert (p.line, p.col) == (1, 1) and "`dir`" in p.message and "sideways" in p.message


def test_malformed_json_line_col_and_the_rest_is_read() -> None:
    bad = b'{"t": 1, "dir": "client", oops}'
    recs, reader = read(OK + b"\n" + bad + b"\n" + OK + b"\n")
    assert lines_of(recs) == [1, 3]
    p = only_problem(reader)
    assert (p.line, p.col) == (2, bad.index(b"oops") + 1)
    assert str(p).startswith(f"t.jsonl:2:{bad.index(b'oops') + 1}: malformed JSON")
    assert "oops" in p.excerpt


@pytest.mark.parametrize(
    ("line", "kind"),
    [(b"[1, 2]", "an array"), (b'"x"', "a string"), (b"3", "a number"), (b"null", "null"), (b"true", "a boolean")],
)
def test_non_object_line(line: bytes, kind: str) -> None:
    recs, reader = read(line + b"\n" + OK + b"\n")
    assert lines_of(recs) == [2]
    p = only_problem(reader)
    assert (p.line, p.col) == (1, 1) and f"expected a JSON object, got {kind}" in p.message


@pytest.mark.parametrize(
    "event",
    [b'{"no": "type"}', b'{"type": ""}', b'{"type": 5}', b'{"type": null}'],
    ids=["none", "empty", "int", "null"],
)
def test_event_with_no_type(event: bytes) -> None:
    recs, reader = read(b'{"t": 1, "dir": "client", "conn": 1, "event": ' + event + b"}\n" + OK + b"\n")
    assert lines_of(recs) == [2]
    p = only_problem(reader)
    assert (p.line, p.col) == (1, 1) and "no `type`" in p.message


def test_event_that_is_not_an_object() -> None:
    recs, reader = read(b'{"t": 1, "dir": "client", "conn": 1, "event": [1]}\n' + OK + b"\n")
    assert lines_of(recs) == [2]
    assert "`event` is an array" in only_problem(reader).message


def test_unknown_event_type_kept_and_warned() -> None:
    recs, reader = read(b'{"t": 1, "dir": "server", "conn": 1, "event": {"type": "response.brand_new"}}\n')
    assert [r.type for r in recs] == ["response.brand_new"]
    p = only_problem(reader)
    assert str(p) == "t.jsonl:1:1: unknown event type 'response.brand_new'; kept, not interpreted"


def test_truncated_last_line() -> None:
    cut = b'{"t": 2, "dir": "server", "conn": 1, "event": {"type": "respo'
    recs, reader = read(OK + b"\n" + cut)
    assert lines_of(recs) == [1]
    p = only_problem(reader)
    assert p.line == 2 and p.col == len(cut) + 1
    assert "truncated last line" in p.message


def test_invalid_utf8_in_a_string_col_of_the_bad_byte() -> None:
    line = '{"t": 1, "dir": "client", "conn": 1, "event": {"type": "response.create", "x": "é'.encode() + b'\xff"}}'
    recs, reader = read(line + b"\n")
    assert len(recs) == 1 and recs[0].event["x"] == "é\ufffd"
    p = only_problem(reader)
    # Columns count characters: "é" is two bytes but one column.
    assert (p.line, p.col) == (1, line.index(b"\xff"))
    assert "invalid UTF-8 (byte 0xff)" in p.message and "replacement" in p.message


def test_invalid_utf8_outside_a_string_skips_the_line() -> None:
    line = b'{"t": 1, \xfe"dir": "client"}'
    recs, reader = read(line + b"\n" + OK + b"\n")
    assert lines_of(recs) == [2]
    p = only_problem(reader)
    assert (p.line, p.col) == (1, line.index(b"\xfe") + 1) and "0xfe" in p.message and "skipped" in p.message


def test_problems_beyond_the_cap_are_counted() -> None:
    recs, reader = read(b"x\n" * 1500 + OK + b"\n")
    assert len(recs) == 1 and len(reader.problems) == 1000 and reader.problem_count == 1500


def test_bare_events_direction_from_catalog_connection_from_session_created() -> None:
    data = b"\n".join(
        [
            b'{"type": "session.update", "event_id": "e0"}',
            b'{"type": "session.created"}',
            b'{"type": "conversation.item.create", "item": {"id": "a"}}',
            b'{"type": "conversation.item.created", "item": {"id": "a"}}',
            b'{"type": "session.created"}',
            b'{"type": "response.create"}',
            b'{"type": "no.such.event"}',
            b'{"type": "connection.closed"}',
        ]
    )
    recs, reader = read(data + b"\n")
    got = [(r.line, r.dir, r.conn, r.type) for r in recs]
    assert got == [
        (1, "client", 1, "session.update"),
        (2, "server", 2, "session.created"),
        (3, "client", 2, "conversation.item.create"),
        (4, "server", 2, "conversation.item.added"),
        (5, "server", 3, "session.created"),
        (6, "client", 3, "response.create"),
        (8, "meta", 3, "connection.closed"),
    ]
    p = only_problem(reader)
    assert p.line == 7 and "side unknown" in p.message
    assert reader.shapes == {"bare": 8}


def test_bare_events_starting_with_session_created_are_connection_1() -> None:
    recs, _ = read(b'{"type": "session.created"}\n{"type": "response.create"}\n')
    assert [r.conn for r in recs] == [1, 1]


def test_rtb_records_iso_times() -> None:
    data = [
        {"time": "2024-11-07T10:00:00.000Z", "source": "client", "event": {"type": "response.create"}},
        {"time": "2024-11-07T10:00:01.250Z", "source": "server", "event": {"type": "session.created"}},
        {"time": "2024-11-07T10:00:02.500+00:00", "source": "server", "event": {"type": "response.text.delta"}},
    ]
    recs, reader = read(b"".join(orjson.dumps(d) + b"\n" for d in data))
    assert reader.problems == [] and reader.shapes == {"rtb": 3}
    assert [(r.t, r.dir, r.type) for r in recs] == [
        (0.0, "client", "response.create"),
        (1.25, "server", "session.created"),
        (2.5, "server", "response.output_text.delta"),
    ]


def test_rtb_records_epoch_ms_and_seconds() -> None:
    data = [
        {"time": 1730973600000, "source": "server", "event": {"type": "session.created"}},
        {"time": 1730973600750, "source": "server", "event": {"type": "response.audio.delta"}},
    ]
    recs, _ = read(b"".join(orjson.dumps(d) + b"\n" for d in data))
    assert [r.t for r in recs] == [0.0, 0.75]
    data = [
        {"time": 1730973600.0, "source": "client", "event": {"type": "response.create"}},
        {"time": 1730973600.5, "source": "client", "event": {"type": "response.cancel"}},
    ]
    recs, _ = read(b"".join(orjson.dumps(d) + b"\n" for d in data))
    assert [r.t for r in recs] == [0.0, 0.5]


def test_rtb_unknown_source_guessed_from_type() -> None:
    recs, reader = read(b'{"time": "bad", "source": "?", "event": {"type": "conversation.item.deleted"}}\n')
    assert reader.problems == [] and recs[0].dir == "server" and recs[0].t == 0.0


@pytest.mark.parametrize(
    ("beta", "ga"),
    [
        ("conversation.item.created", "conversation.item.added"),
        ("response.text.delta", "response.output_text.delta"),
        ("response.text.done", "response.output_text.done"),
        ("response.audio.delta", "response.output_audio.delta"),
        ("response.audio.done", "response.output_audio.done"),
        ("response.audio_transcript.delta", "response.output_audio_transcript.delta"),
        ("response.audio_transcript.done", "response.output_audio_transcript.done"),
    ],
)
def test_beta_names_normalised_raw_kept(beta: str, ga: str) -> None:
    for line in (
        {"t": 0, "dir": "server", "conn": 1, "event": {"type": beta}},
        {"type": beta},
        {"time": 0, "source": "server", "event": {"type": beta}},
    ):
        recs, reader = read(orjson.dumps(line) + b"\n")
        assert reader.problems == []
        assert (recs[0].type, recs[0].raw_type, recs[0].event["type"]) == (ga, beta, beta)


def test_records_that_borrow_from_earlier_lines_are_counted() -> None:
    data = b'{"type":"session.created","session":{}}\n{"dir":"server","event":{"type":"session.updated"}}\n'
    records, reader = read(data)
    assert len(records) == 2 and reader.inferred == 2
