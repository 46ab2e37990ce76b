"""`TraceWriter`: records timed by the caller's clock, each line whole, a failing disk reported once and never
raised."""

from __future__ import annotations

import errno
import io
import os

import orjson

from rtrace.core.loader import TraceReader
from rtrace.core.trace import encode
from rtrace.core.writer import TraceWriter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines(data: bytes) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in data.splitlines()]


def test_records_are_timed_by_the_given_clock_from_the_writer_creation() -> None:
    clock, out, failures = Clock(), io.BytesIO(), []
    w = TraceWriter(out, {"recorder": "test"}, clock, lambda *a: failures.append(a))
    clock.now = 100.25
    w.write("client", 1, {"type": "response.create"})
    clock.now = 99.0  # a clock that goes back never gives a negative time
    w.write("server", 2, {"type": "response.created"}, raw=encode({"type": "response.created"}))
    got = lines(out.getvalue())
    assert got[0]["rtrace"] is not None and got[0]["recorder"] == "test"
    assert got[1] == {"t": 0.25, "dir": "client", "conn": 1, "event": {"type": "response.create"}}
    assert got[2] == {"t": 0.0, "dir": "server", "conn": 2, "event": {"type": "response.created"}}
    assert w.lines == 3 and w.failed is None and failures == []


def test_raw_and_encoded_lines_are_the_same_bytes() -> None:
    a, b = io.BytesIO(), io.BytesIO()
    event = {"type": "conversation.item.added", "item": {"id": "A", "content": ["é"]}}
    TraceWriter(a, None, lambda: 0.0, print).write("server", 3, event)
    TraceWriter(b, None, lambda: 0.0, print).write("server", 3, event, raw=encode(event))
    assert a.getvalue() == b.getvalue()


class FullDisk(io.BytesIO):
    """Takes `room` bytes, then every write fails with ENOSPC."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, data: bytes) -> int:  # type: ignore[override]
        if len(data) > self.room:
            super().write(data[: self.room])  # a partial line reaches the file before the error
            self.room = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return super().write(data)


def test_a_failing_write_cuts_the_trace_at_its_last_whole_line_and_is_reported_once(tmp_path: object) -> None:
    disk = FullDisk(room=200)
    failures: list[tuple[str, int]] = []
    w = TraceWriter(disk, {"recorder": "test"}, lambda: 0.0, lambda reason, n: failures.append((reason, n)))
    for k in range(20):
        w.write("client", 1, {"type": "conversation.item.create", "event_id": f"e{k}"})
    assert failures == [(os.strerror(errno.ENOSPC), w.lines)]
    assert w.failed == os.strerror(errno.ENOSPC)
    data = disk.getvalue()
    assert data.endswith(b"\n") and len(data.splitlines()) == w.lines
    reader = TraceReader(io.BytesIO(data), "disk")
    assert len(list(reader)) == w.lines - 1 and not reader.problems


def test_open_writes_a_file_and_close_makes_it_durable(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(os.fspath(tmp_path), "t.jsonl")
    w = TraceWriter.open(path, {"recorder": "test"}, lambda: 0.0, print)
    w.write("meta", 1, {"type": "connection.opened"})
    w.close()
    w.close()  # twice is harmless
    with TraceReader.open(path) as reader:
        assert [r.type for r in reader] == ["connection.opened"]


def test_the_tap_gets_what_reached_the_file_in_order_buffered_or_not() -> None:
    for buffered in (False, True):
        tapped: list[bytes] = []
        fp = io.BytesIO()
        w = TraceWriter(fp, {"recorder": "test"}, lambda: 0.0, print, buffered=buffered, tap=tapped.append)
        for k in range(5):
            w.write("client", 1, {"type": "conversation.item.create", "event_id": f"e{k}"})
            if k == 2:
                w.flush()
        w.flush()
        assert b"".join(tapped) == fp.getvalue() and fp.getvalue().count(b"\n") == 6
        assert all(chunk.endswith(b"\n") for chunk in tapped)
        assert len(tapped) == (2 if buffered else 6)  # buffered: what each flush wrote, the header in the first
    # a write that failed is not handed on
    tapped = []
    disk = FullDisk(room=200)
    w = TraceWriter(disk, None, lambda: 0.0, lambda reason, n: None, tap=tapped.append)
    for k in range(20):
        w.write("client", 1, {"type": "conversation.item.create", "event_id": f"e{k}"})
    assert b"".join(tapped) == disk.getvalue()
