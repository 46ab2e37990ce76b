"""Progress bars: only on a terminal, only after the delay, never a line left behind."""

from __future__ import annotations

import io
import time

import pytest

from rtrace.report.progress import Progress, wanted


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_bar_on_a_pipe_a_dumb_terminal_or_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RTRACE_NO_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert wanted(Tty()) and not wanted(io.StringIO())
    monkeypatch.setenv("TERM", "dumb")  # some CI shells: a terminal that cannot redraw a line
    assert not wanted(Tty())
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("RTRACE_NO_PROGRESS", "1")
    assert not wanted(Tty())
    stream = Tty()
    with Progress("work", stream=stream, delay=0.0) as p:
        time.sleep(0.1)
        p.advance()
        assert not p.shown
    assert stream.getvalue() == ""


def test_a_bar_appears_after_the_delay_on_a_terminal_and_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RTRACE_NO_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    stream = Tty()
    with Progress("redacting \x1b[31mbig.jsonl", total=10, stream=stream, delay=0.05) as p:
        deadline = time.monotonic() + 5
        while not p.shown and time.monotonic() < deadline:
            time.sleep(0.01)
        assert p.shown
        p.advance(5)
    assert not p.shown
    drawn = stream.getvalue()
    assert "redacting" in drawn and "\x1b[31mbig" not in drawn  # the name is shown escaped, never obeyed


def test_work_shorter_than_the_delay_draws_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RTRACE_NO_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    stream = Tty()
    with Progress("quick", stream=stream, delay=0.5) as p:
        p.advance()
    time.sleep(0.6)  # the timer was cancelled: it never draws after the work ended
    assert stream.getvalue() == "" and not p.shown


@pytest.mark.parametrize(("unit", "total", "done", "says"), [("bytes", 4_000_000, 1_000_000, "25%"),
                                                            ("traces", 40, 3, "3/40 traces")])  # fmt: skip
def test_a_bar_shows_the_fraction_read_or_the_traces_done_of_their_total(
    monkeypatch: pytest.MonkeyPatch, unit: str, total: int, done: int, says: str
) -> None:
    """It was a spinner with the time spent only."""
    monkeypatch.delenv("RTRACE_NO_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    stream = Tty()
    with Progress("analyzing big.jsonl", stream=stream, delay=0.05) as p:
        p.measure(total, unit)  # sized once the inputs are listed, before the bar is drawn
        p.update(done)
        deadline = time.monotonic() + 5
        while not p.shown and time.monotonic() < deadline:
            time.sleep(0.01)
        assert p.shown
        p._bar.refresh()  # type: ignore[attr-defined]
        drawn = stream.getvalue()
    assert says in drawn, drawn
    if unit == "bytes":
        assert "1.0/4.0 MB" in drawn
