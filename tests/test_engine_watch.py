"""The split's second opinion: the watch's verdict on scripted clocks, and the gate that reads on past the cut."""

from __future__ import annotations

import io
import os

from rtrace.engine import watch
from rtrace.engine.watch import Gate, Watch, run_share


class Clocks:
    """Scripted wall and CPU clocks, and the child's CPU time in ns (None: not readable)."""

    def __init__(self) -> None:
        self.wall, self.cpu, self.child_ns = 0.0, 0.0, 0
        self.child_ns_readable = True

    def child(self, pid: int) -> int | None:
        return self.child_ns if self.child_ns_readable else None


def watched(c: Clocks) -> Watch:
    return Watch(4242, clock=lambda: c.wall, own_cpu=lambda: c.cpu, child_cpu=c.child)


def test_the_run_share_is_the_cpu_the_two_had_of_the_wall_time() -> None:
    assert run_share(0.02, 0.02, 20_000_000) == 1.0  # each had a core
    assert run_share(0.02, 0.01, 10_000_000) == 0.5  # two busy neighbours on 2 cores
    assert run_share(0.02, 0.02, 0) == 0.5  # the child never ran
    assert run_share(0.02, 0.015, None) == 0.75  # no schedstat: this process's share alone
    assert run_share(0.0, 0.0, 0) == 1.0


def test_the_watch_answers_once_after_its_time_on_what_the_two_ran() -> None:
    after = watch.WATCH_AFTER_S
    for own, child_ns, alone in (
        (after, int(after * 1e9), False),  # a core each
        (after * 0.95, int(after * 0.9e9), False),
        (after / 2, int(after / 2 * 1e9), True),  # two busy processes beside them on 2 cores
        (after * 2 / 3, int(after * 2 / 3 * 1e9), True),  # one
        (after, 0, True),  # the child was not scheduled at all
    ):
        c = Clocks()
        w = watched(c)
        c.wall += after / 2
        assert w.alone() is None  # too early to tell
        c.wall += after / 2
        c.cpu += own
        c.child_ns = child_ns
        assert w.alone() is alone, (own, child_ns)
        assert w.share is not None
        c.cpu += 1.0
        assert w.alone() is None  # asked once


def test_without_the_childs_schedstat_the_watch_judges_by_this_process() -> None:
    c = Clocks()
    c.child_ns_readable = False
    w = watched(c)
    c.wall += watch.WATCH_AFTER_S
    c.cpu += watch.WATCH_AFTER_S / 2
    assert w.alone() is True


def test_the_childs_cpu_time_is_read_from_proc() -> None:
    ns = watch.cpu_ns(os.getpid())
    if ns is not None:  # Linux with schedstat
        assert ns > 0
    assert watch.cpu_ns(2**22 + 12345) is None  # no such process


def test_the_gate_stops_at_the_cut_unless_told_to_read_on() -> None:
    data = b"".join(b"line %d\n" % k for k in range(1000))
    cut = data.index(b"\n", len(data) // 2) + 1
    asked: list[int] = []

    def never() -> bool | None:
        asked.append(1)
        return False if len(asked) == 2 else None

    gate = Gate(io.BufferedReader(io.BytesIO(data)), cut, never)
    assert gate.peek(4)[:4] == b"line"
    got = b""
    while chunk := gate.read(1000):
        got += chunk
        assert gate.tell() == len(got)
    assert got == data[:cut] and not gate.alone and len(asked) == 2  # not asked after its answer
    for verdict_at in (1, 3, 100):  # the last: never answered, the part ends at the cut
        answers = iter([None] * (verdict_at - 1) + [True])
        gate = Gate(io.BufferedReader(io.BytesIO(data)), cut, lambda a=answers: next(a, None))
        got = b""
        while chunk := gate.read(1000):
            got += chunk
        assert got == (data if verdict_at < 100 else data[:cut]) and gate.alone is (verdict_at < 100)
    short = Gate(io.BufferedReader(io.BytesIO(data)), 3, lambda: None)
    assert short.peek(10) == b"lin" and short.read() == b"lin" and short.read() == b""


def test_a_reader_of_a_gated_file_stops_at_the_cut_and_counts_its_lines() -> None:
    """The first part of a split is what a `TraceReader` reads through the gate: up to the cut (a byte offset of the
    file, its BOM included), with the header read and every line before the cut counted."""
    import orjson

    from rtrace.core.loader import TraceReader

    event = {"type": "session.updated", "session": {}}
    native = [{"t": float(k), "dir": "server", "conn": 1, "event": event} for k in range(3)]
    lines = [b'{"rtrace": 1}\n', *(orjson.dumps(obj) + b"\n" for obj in native), b"\n"]
    data = b"\xef\xbb\xbf" + b"".join(lines)
    first_two = 3 + len(lines[0]) + len(lines[1])
    gated = Gate(io.BufferedReader(io.BytesIO(data)), first_two, lambda: None)
    reader = TraceReader(gated, "x")  # type: ignore[arg-type]
    assert [r.line for r in reader] == [2] and reader.header is not None and reader.lines == 2
    whole = TraceReader(io.BytesIO(data), "x")
    assert [r.line for r in whole] == [2, 3, 4] and whole.lines == 5
