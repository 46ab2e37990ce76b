"""The reader's per-line path (`core.rowpath.entries`): a well-formed native line becomes its row inline, every other
line goes to the reader's slow path, and the reader's counters move as each record is handed on."""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest

from rtrace.core.loader import TraceReader
from rtrace.core.records import LineRecords
from rtrace.core.rowpath import GA_NAMES, entries

from .test_core_loader import OK


def rows_of(lines: list[bytes | int], until_line: int | None = None) -> tuple[list[Any], TraceReader]:
    """The entries of one block of `lines` (no scanner), on a reader that reads nothing itself."""
    reader = TraceReader(io.BytesIO(b""), "t.jsonl")
    return list(entries(reader, iter([(1, lines, True)]), None, {}, until_line, 0, False)), reader


def test_a_native_line_is_its_row_and_every_other_goes_to_the_slow_path() -> None:
    bare = b'{"type": "response.create"}'
    beta = OK.replace(b"response.create", b"conversation.item.created")
    out, reader = rows_of([OK, bare, b"", b"[1]", beta])
    assert [row[:5] for row in out] == [(0, 1, 0.5, "client", 1), (1, 2, 0.5, "client", 1), (2, 5, 0.5, "client", 1)]
    assert out[2][6:] == ("conversation.item.added", "conversation.item.created")
    assert out[2][6] is GA_NAMES["conversation.item.created"]  # the catalogue's own string, not the line's
    assert reader.count == 3 and reader.shapes == {"native": 2, "bare": 1}
    assert [(p.line, p.message) for p in reader.problems] == [(4, "expected a JSON object, got an array; skipped")]


@pytest.mark.parametrize(
    "fields",
    [
        {"t": 1},  # an integer time: the slow path makes it a float
        {"conn": 0},
        {"conn": True},
        {"dir": "sideways"},
        {"dir": ["client"]},
        {"event": {"type": "no.such.type"}},
        {"event": {"type": ["response.create"]}},
        {"event": "response.create"},
    ],
)
def test_a_line_the_inline_path_does_not_take_reads_as_the_slow_path_reads_it(fields: dict[str, Any]) -> None:
    line = orjson.dumps({**orjson.loads(OK), **fields})
    out, reader = rows_of([line])
    alone = TraceReader(io.BytesIO(line + b"\n"), "t.jsonl")
    slow = LineRecords._record(alone, 1, orjson.loads(line))
    assert out == ([] if slow is None else [slow]) and all(type(row[2]) is float for row in out)
    assert (reader.problems, reader.shapes, reader.count) == (alone.problems, alone.shapes, alone.count)


def test_until_line_ends_the_rows_and_an_early_close_still_counts_them() -> None:
    out, reader = rows_of([OK, OK, OK], until_line=2)
    assert [row[1] for row in out] == [1, 2] and reader.shapes == {"native": 2}
    reader = TraceReader(io.BytesIO(b""), "t.jsonl")
    it = entries(reader, iter([(1, [OK, OK, OK], True)]), None, {}, None, 0, False)
    next(it)
    it.close()
    assert reader.count == 1 and reader.shapes == {"native": 1}


def test_a_read_error_is_a_problem_and_the_rest_is_skipped() -> None:
    def blocks() -> Any:
        yield 1, [OK], True
        raise OSError(5, "Input/output error")

    reader = TraceReader(io.BytesIO(b""), "t.jsonl")
    out = list(entries(reader, blocks(), None, {}, None, 0, False))
    assert len(out) == 1
    assert [(p.line, p.message) for p in reader.problems] == [
        (2, "read error: Input/output error; the rest of the file is skipped")
    ]
