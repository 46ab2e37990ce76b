"""`TraceWriter`: records timed by the caller's clock, each line whole, a failing disk reported once and never
raised."""

from __future__ import annotations

import contextlib
import errno
import io
import os
from pathlib import Path

import orjson
import pytest

from rtrace.core.loader import TraceReader
from rtrace.core.trace import encode
from rtrace.core.writer import Replacing, TraceWriter, check_writable, same_file, write_replacing


def traces_onto_a_full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every trace written from now on (the writer's new files) goes onto a full disk (`/dev/full`): the hunt's
    tests of a disk that fills under --out, with a link or without."""
    from rtrace.core import writer

    real = writer._new_file

    def full(path: str) -> tuple[object, str]:
        fp, tmp = real(path)
        fp.close()
        return open("/dev/full", "wb"), tmp

    monkeypatch.setattr(writer, "_new_file", full)


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


# -- nothing lost: no half-written output, no output replaced by nothing (`make harden` class 3) --------------------


def test_replacing_renames_a_complete_file_and_leaves_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b"old")
    out.chmod(0o640)
    with Replacing(out) as fp:
        fp.write(b"new")
        assert out.read_bytes() == b"old"  # not until the block ends
    assert out.read_bytes() == b"new" and (out.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


@pytest.mark.parametrize("how", ["raise", "discard"])
def test_replacing_an_output_with_nothing_leaves_it_as_it_was(tmp_path: Path, how: str) -> None:
    out = tmp_path / "out.json"
    out.write_bytes(b"old")
    replacing = Replacing(out)
    with contextlib.suppress(RuntimeError), replacing as fp:
        fp.write(b"half")
        if how == "raise":
            raise RuntimeError("interrupted")
        replacing.discard()
    assert out.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_replacing_never_follows_a_planted_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    link = tmp_path / "out.json"
    link.symlink_to(victim)
    write_replacing(link, b"report")
    assert victim.read_bytes() == b"precious" and not link.is_symlink() and link.read_bytes() == b"report"


def test_replacing_a_device_writes_it_in_place() -> None:
    write_replacing(os.devnull, b"x")
    assert os.path.exists(os.devnull) and not os.path.isfile(os.devnull)


def test_same_file_through_links_and_spellings(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    a.write_bytes(b"")
    (tmp_path / "link").symlink_to(a)
    assert same_file(a, tmp_path / "link") and same_file(a, tmp_path / "." / "a.jsonl")
    assert not same_file(a, tmp_path / "b.jsonl") and same_file(tmp_path / "new", tmp_path / "new")


def test_check_writable_raises_what_opening_would(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        check_writable(tmp_path / "no" / "x.jsonl")
    with pytest.raises(IsADirectoryError):
        check_writable(tmp_path)
    check_writable(tmp_path / "new.jsonl")
    assert not (tmp_path / "new.jsonl").exists()


def test_a_recorder_that_records_nothing_leaves_an_existing_trace(tmp_path: Path) -> None:
    trace = tmp_path / "rec.jsonl"
    trace.write_bytes(b"an earlier session\n")
    w = TraceWriter.open(trace, {"recorder": "test"}, Clock(), print)
    w.close()
    assert trace.read_bytes() == b"an earlier session\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.jsonl"]


def test_a_recorder_trace_appears_at_the_first_record_and_grows_line_by_line(tmp_path: Path) -> None:
    trace = tmp_path / "rec.jsonl"
    trace.write_bytes(b"an earlier session\n")
    w = TraceWriter.open(trace, {"recorder": "test"}, Clock(), print)
    w.write("meta", 1, {"type": "connection.opened", "path": "/v1/realtime"})
    assert [x.get("recorder") or x["event"]["type"] for x in lines(trace.read_bytes())] == ["test", "connection.opened"]
    w.write("server", 1, {"type": "session.created"})
    # Not closed (a killed recorder): every line so far is on disk, under the name asked for.
    with TraceReader.open(trace) as reader:
        assert [r.type for r in reader] == ["connection.opened", "session.created"] and reader.problems == []
    assert w.lines == 3 and w.path == str(trace)
    w.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.jsonl"]


SPLIT_KEY = "sk-proj-SPLITKEY0123456789abcdefghij"
#: A key streamed over three text deltas, between others; each followed by an audio append.
SPLIT_PIECES = ["your key: ", SPLIT_KEY[:6], SPLIT_KEY[6:18], SPLIT_KEY[18:], " bye"]


def _write_split_key(w: TraceWriter, flush_after: tuple[int, ...] = ()) -> None:
    for n, piece in enumerate(SPLIT_PIECES):
        w.write("server", 1, {"type": "response.output_text.delta", "response_id": "r", "item_id": "i", "delta": piece})
        w.write("client", 1, {"type": "input_audio_buffer.append", "audio": "AAAA"})
        if n in flush_after:
            w.flush()


def _assert_split_key_masked(trace: Path) -> None:
    got = lines(trace.read_bytes())
    joined = "".join(x["event"]["delta"] for x in got if x.get("event", {}).get("type", "").endswith("text.delta"))
    assert SPLIT_KEY[3:] not in joined and "SPLITKEY" not in joined and joined.startswith("your key: sk-")
    assert joined.endswith(" bye") and len(joined) == len("".join(SPLIT_PIECES))
    assert joined == "your key: sk-" + "*" * len(SPLIT_KEY[3:]) + " bye"  # every piece of it masked, no more
    assert len(got) == 1 + 2 * len(SPLIT_PIECES)


def test_a_secret_split_across_deltas_is_masked_in_the_lines_already_written(tmp_path: Path) -> None:
    """Each delta is written as it passes; when a secret completes across deltas, the earlier lines are rewritten
    in place, byte for byte the same length, so a killed recorder leaves a trace without it."""
    trace = tmp_path / "rec.jsonl"
    w = TraceWriter.open(trace, {"recorder": "test"}, Clock(), print)
    _write_split_key(w)
    _assert_split_key_masked(trace)  # not closed: what a killed recorder leaves
    w.close()
    with TraceReader.open(trace) as reader:
        assert len(list(reader)) == 2 * len(SPLIT_PIECES) and reader.problems == []


@pytest.mark.parametrize("flush_after", [(), (0,), (1,), (0, 2), (0, 1, 2, 3, 4)])
def test_a_buffered_writer_masks_a_split_secret_in_waiting_and_written_lines(
    tmp_path: Path, flush_after: tuple[int, ...]
) -> None:
    """`buffered` (serve --record) with the rewrites of `DeltaWindows`: an earlier delta still waiting is masked in
    memory, one already flushed in the file at its offset; the offsets of waiting lines are those they get."""
    trace = tmp_path / "rec.jsonl"
    w = TraceWriter.open(trace, {"recorder": "test"}, Clock(), print, buffered=True)
    _write_split_key(w, flush_after)
    w.flush()  # what a killed server leaves of the frames it sent
    _assert_split_key_masked(trace)
    assert w.lines == 1 + 2 * len(SPLIT_PIECES)
    w.close()
    with TraceReader.open(trace) as reader:
        assert len(list(reader)) == 2 * len(SPLIT_PIECES) and reader.problems == []


def test_a_buffered_writer_writes_nothing_until_flushed(tmp_path: Path) -> None:
    trace = tmp_path / "rec.jsonl"
    w = TraceWriter.open(trace, {"recorder": "test"}, Clock(), print, buffered=True)
    w.write("meta", 1, {"type": "connection.opened", "path": "/v1/realtime"})
    assert trace.read_bytes() == b"" and w.lines == 0
    w.flush()
    assert len(lines(trace.read_bytes())) == 2 and w.lines == 2


@pytest.mark.parametrize(
    ("name", "codec"),
    [("t.jsonl.gz", "gzip"), ("t.jsonl.bz2", "bzip2"), ("t.jsonl.xz", "xz"), ("t.jsonl.zst", "zstd"), ("t", None)],
)
def test_a_trace_written_to_a_compressed_name_is_compressed_and_reads_back(
    tmp_path: Path, name: str, codec: str | None
) -> None:
    from rtrace.core.loader import compression_of_file, open_trace
    from rtrace.core.writer import compression_for, replacing_trace

    path = tmp_path / name
    data = b'{"t":0.0,"dir":"client","conn":1,"event":{"type":"response.create"}}\n' * 1000
    with replacing_trace(path) as fp:
        fp.write(data)
        fp.seek(0)  # seekable while written: a split secret is masked where it stands
        fp.write(data[:10])
        fp.seek(0, os.SEEK_END)
    assert compression_for(path) == codec == compression_of_file(path)
    with open_trace(path) as f:
        assert f.read() == data
    # an output that fails leaves what was there
    with pytest.raises(RuntimeError), replacing_trace(path) as fp:
        fp.write(b"half")
        raise RuntimeError
    with open_trace(path) as f:
        assert f.read() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


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


class FullOnFlush:
    """A real file whose writes are taken in memory and whose flush (and so its close) fails with ENOSPC: a disk
    that fills between the last write and the close."""

    def __init__(self, path: Path) -> None:
        self._fp = open(path, "wb")
        self.held = b""

    def write(self, data: bytes) -> int:
        self.held += data
        return len(data)

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fileno(self) -> int:
        return self._fp.fileno()

    def truncate(self, size: int) -> int:
        return self._fp.truncate(size)

    def close(self) -> None:
        self._fp.close()
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_disk_that_fills_at_the_close_is_told_once_and_the_close_never_raises(tmp_path: Path) -> None:
    failures: list[tuple[str, int]] = []
    disk = FullOnFlush(tmp_path / "t.jsonl")
    w = TraceWriter(disk, None, lambda: 0.0, lambda reason, n: failures.append((reason, n)))  # type: ignore[arg-type]
    w.close()  # nothing written yet: the close's flush is the first to fail
    assert failures == [(os.strerror(errno.ENOSPC), 0)] and w.failed == os.strerror(errno.ENOSPC)
    w.close()  # twice: nothing more
    assert len(failures) == 1


def test_dev_full_is_a_failure_told_once_never_an_exception() -> None:
    failures: list[tuple[str, int]] = []
    w = TraceWriter.open("/dev/full", {"recorder": "test"}, lambda: 0.0, lambda r, n: failures.append((r, n)),
                         buffered=True)  # fmt: skip
    for k in range(5):
        w.write("client", 1, {"type": "response.create", "event_id": f"e{k}"})
    w.flush()
    w.close()
    assert failures == [(os.strerror(errno.ENOSPC), 0)]
