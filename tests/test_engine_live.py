"""Live findings (`rtrace.engine.live`): each finding is told once its line has been folded, before the next line is
read; what is told live, then at the end, is what `analyze` reports afterwards (same rule, line, message)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from rtrace.core.loader import TraceReader
from rtrace.engine.fold import analyze_path
from rtrace.engine.live import FollowFile, LiveFold, Pipe, finding_line, fold_live
from rtrace.rules.base import Finding

from .conftest import REAL, SAMPLES

TRACES = sorted(REAL.glob("*.jsonl")) + sorted(SAMPLES.glob("rules/*/*.jsonl"))
RACE = REAL / "tool-output-race.livekit-1.8.8.jsonl"


class Dribble:
    """A trace handed over one line per `read`, counting the lines given so far."""

    def __init__(self, path: Path) -> None:
        self.lines = path.read_bytes().splitlines(keepends=True)
        self.given = 0
        self._head = b""

    def peek(self, n: int = 1) -> bytes:
        while len(self._head) < n and self.given < len(self.lines):
            self._head += self.lines[self.given]
            self.given += 1
        return self._head[:n]

    def read(self, n: int = -1) -> bytes:
        if self._head:
            data, self._head = self._head, b""
            return data
        if self.given >= len(self.lines):
            return b""
        self.given += 1
        return self.lines[self.given - 1]


def told_live(path: Path) -> tuple[list[tuple[Finding, bool, int]], object]:
    stream = Dribble(path)
    told: list[tuple[Finding, bool, int]] = []
    report = fold_live(TraceReader(stream, str(path)), lambda f, at_end: told.append((f, at_end, stream.given)))  # type: ignore[arg-type]
    return told, report


def key(f: Finding) -> tuple[str, int, str]:
    return (f.rule, f.at_line, f.message)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name if p.parent == REAL else f"{p.parent.name}/{p.name}")
def test_what_is_told_live_then_at_the_end_is_what_analyze_reports(path: Path) -> None:
    told, report = told_live(path)
    after = analyze_path(path)
    assert sorted(key(f) for f, _, _ in told) == sorted(key(f) for f in after.findings)
    assert [key(f) for f in report.findings] == [key(f) for f in after.findings]  # type: ignore[attr-defined]
    lines = len(path.read_bytes().splitlines())
    seen = first_seen(path)
    for finding, at_end, given in told:
        if not at_end:
            # told once the line that made it certain was folded, before any later line was read
            assert given == seen[key(finding)] >= finding.at_line, (finding.rule, finding.at_line, given)
        else:
            assert given == lines and key(finding) not in seen


def first_seen(path: Path) -> dict[tuple[str, int, str], int]:
    """The line after which a fold of one record at a time (no fast path) first holds each finding."""
    from rtrace.core.loader import load
    from rtrace.engine.fold import Fold
    from rtrace.rules import RULES
    from rtrace.rules.base import Config

    fold = Fold(Config(), RULES)
    seen: dict[tuple[str, int, str], int] = {}
    records, _ = load(path)
    for rec in records:
        fold.records([rec])
        for f in fold.dispatch.findings:
            seen.setdefault(key(f), rec.line)
    return seen


def test_the_race_is_told_at_line_47_while_the_trace_goes_on() -> None:
    told, _ = told_live(RACE)
    live = {f.rule: given for f, at_end, given in told if not at_end}
    assert live["RT101"] == 47 and live["RT102"] == 46
    line = finding_line(next(f for f, _, _ in told if f.rule == "RT101"))
    assert line.startswith("error RT101 deleted-function-call-output conn 1 line 47: function_call_output item_")


def test_findings_only_the_end_makes_certain_are_told_at_the_end_and_said_so() -> None:
    """A trace that stops with a function call open: RT103 can only be sure once the trace has ended."""
    path = SAMPLES / "rules" / "unanswered-function-call" / "positive-connection-ends.jsonl"
    told, _ = told_live(path)
    ends = [f for f, at_end, _ in told if at_end]
    assert [f.rule for f in ends] == ["RT103"]
    assert finding_line(ends[0], True).endswith("(certain at the end of the trace)")


def test_a_pipe_hands_over_what_was_written_in_order_and_ends_when_closed() -> None:
    pipe = Pipe()
    got: list[bytes] = []

    def read() -> None:
        while chunk := pipe.read(1 << 18):
            got.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    for k in range(500):
        pipe.write(b"%d\n" % k)
    pipe.close()
    reader.join(5)
    assert b"".join(got) == b"".join(b"%d\n" % k for k in range(500))
    assert pipe.peek(4) == b"" and pipe.read() == b""


def test_a_live_fold_fed_by_a_writer_tap_reports_as_the_file_would(tmp_path: Path) -> None:
    told: list[str] = []
    live = LiveFold(str(tmp_path / "t.jsonl"), lambda f, at_end: told.append(f.rule)).start()
    for line in RACE.read_bytes().splitlines(keepends=True):
        live.tap(line)
    report = live.close()
    assert [key(f) for f in report.findings] == [key(f) for f in analyze_path(RACE).findings]
    assert sorted(told) == sorted(f.rule for f in report.findings)


def test_following_a_growing_file_until_it_is_idle_or_stopped(tmp_path: Path) -> None:
    path = tmp_path / "growing.jsonl"
    path.write_bytes(b"")
    lines = RACE.read_bytes().splitlines(keepends=True)
    told: list[tuple[str, int]] = []
    written = [0]

    def grow() -> None:
        with path.open("ab") as fp:
            for line in lines:
                fp.write(line)
                fp.flush()
                written[0] += 1
                time.sleep(0.001)

    writer = threading.Thread(target=grow)
    writer.start()
    stream = FollowFile(path, threading.Event(), idle=0.5, poll=0.005)
    report = fold_live(TraceReader(stream, str(path)), lambda f, at_end: told.append((f.rule, written[0])))  # type: ignore[arg-type]
    writer.join()
    stream.close()
    assert [key(f) for f in report.findings] == [key(f) for f in analyze_path(RACE).findings]
    # RT101 became certain at line 47 and was told while the file was still growing
    assert dict(told)["RT101"] < len(lines)
    # a stop ends the trace at once, whatever the idle time
    stop = threading.Event()
    stop.set()
    follow = FollowFile(path, stop, idle=None, poll=0.005)
    assert len(fold_live(TraceReader(follow, str(path)), lambda f, e: None).findings) == len(report.findings)  # type: ignore[arg-type]
    follow.close()


def test_follow_waits_on_an_injected_clock_and_never_spins() -> None:
    """Nothing new: each wait is one `poll` sleep; the idle time ends it."""
    now = [0.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    path = RACE
    stream = FollowFile(path, threading.Event(), idle=1.0, poll=0.25, sleep=sleep, clock=lambda: now[0])
    data = stream.read(1 << 20)
    assert data == path.read_bytes()
    assert stream.read(1 << 20) == b""
    assert sleeps == [0.25] * 4
    stream.close()


def test_the_pipe_lets_lines_gather_after_a_wait_so_the_fold_runs_on_batches() -> None:
    """The recorder's loop and the fold share the interpreter: after waiting for a line, the reader lets more
    arrive (`gather`) and reads them at once, so it wakes once per batch, not once per frame."""
    from rtrace.engine.live import Pipe

    slept: list[float] = []

    def more_arrive(seconds: float) -> None:  # what the recorder writes while the reader gathers
        slept.append(seconds)
        pipe.write(b"b\n")
        pipe.write(b"c\n")

    pipe = Pipe(gather=0.02, sleep=more_arrive)
    pipe.write(b"a\n")
    assert pipe.read() == b"a\nb\nc\n" and slept == [0.02]
    pipe.close()
    assert pipe.read() == b""
