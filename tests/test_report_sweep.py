"""The output of `rtrace sweep`: the latency x rule table, one trace per finding, a line per run."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from rtrace.net.hunt.sweep import RunResult, SweepResult
from rtrace.report.sweep import progress, render
from rtrace.rules.base import Finding, Witness


def finding(line: int) -> Finding:
    w = Witness(line, 1.0, "client", 1, "conversation.item.delete", "delete item_x")
    return Finding("RT101", "deleted-function-call-output", "error", 1, "m", "e", (w,), {}, "fix", line)


def result(tmp_path: Path) -> SweepResult:
    runs = [
        RunResult(0.0, 1, tmp_path / "latency-0ms-run1.jsonl", 0, []),
        RunResult(0.0, 2, tmp_path / "latency-0ms-run2.jsonl", 0, []),
        RunResult(0.1, 1, tmp_path / "latency-100ms-run1.jsonl", 0, [finding(43)]),
        RunResult(0.1, 2, tmp_path / "latency-100ms-run2.jsonl", 3, [finding(47)]),
    ]
    return SweepResult([0.0, 0.1], 2, runs)


def text_of(result: SweepResult) -> str:
    console = Console(record=True, width=120, color_system=None)
    render(result, console)
    return console.export_text()


def test_the_table_shows_the_threshold(tmp_path: Path) -> None:
    text = text_of(result(tmp_path))
    row = next(line for line in text.splitlines() if "RT101" in line and "/2" in line)
    assert row.split()[-2:] == ["0/2", "2/2"]
    failed = next(line for line in text.splitlines() if "(command failed)" in line)
    assert failed.split()[-2:] == ["0/2", "1/2"]
    assert "latency-100ms-run1.jsonl" in text
    assert f"RT101 deleted-function-call-output at 100ms: {tmp_path}/latency-100ms-run1.jsonl:43" in text


def test_no_finding_at_any_latency(tmp_path: Path) -> None:
    quiet = SweepResult([0.0], 1, [RunResult(0.0, 1, tmp_path / "t.jsonl", 0, [])])
    assert "no finding at any latency" in text_of(quiet)


def test_a_progress_line_per_run(tmp_path: Path) -> None:
    console = Console(record=True, width=200, color_system=None)
    progress(RunResult(0.05, 3, tmp_path / "t.jsonl", None, [finding(1)]), console)
    progress(RunResult(0.0, 1, tmp_path / "u.jsonl", 0, []), console)
    lines = console.export_text().splitlines()
    assert lines == [
        f"50ms run 3: timeout, RT101  {tmp_path}/t.jsonl",
        f"0ms run 1: exit 0, no finding  {tmp_path}/u.jsonl",
    ]


def test_a_command_that_failed_in_every_run_is_told_how(tmp_path: Path) -> None:
    from rtrace.report.sweep import failure

    assert failure(result(tmp_path)) == []  # some runs passed: not a failed sweep
    runs = [
        RunResult(0.0, 1, tmp_path / "a.jsonl", -11, [], stderr_tail=["Fatal Python error: Segmentation fault"]),
        RunResult(0.05, 1, tmp_path / "b.jsonl", None, [], stderr_tail=["waiting...", "still \x1b[31mwaiting"]),
    ]
    lines = failure(SweepResult([0.0, 0.05], 1, runs))
    assert lines == [
        "the command failed in every run (2 of 2: killed by SIGSEGV, timeout): the sweep shows nothing of the client",
        "last lines of its stderr (50ms run 1):",
        "  waiting...",
        "  still \\x1b[31mwaiting",  # the command's output is shown, never obeyed
    ]
    silent = failure(SweepResult([0.0], 1, [RunResult(0.0, 1, tmp_path / "c.jsonl", 1, [])]))
    assert silent[-1] == "it wrote nothing to stderr"


def test_each_latency_is_announced_in_words(tmp_path: Path) -> None:
    from rtrace.net.link.server import options_from_cli
    from rtrace.report.sweep import announce

    console = Console(record=True, width=300, color_system=None)
    options = options_from_cli(jitter="2ms", error_on=["response.create"], fault_times=0)
    options.latency = 0.2
    announce(options, console)
    assert console.export_text().strip() == (
        "at 200ms: latency 200ms on every server event, jitter +/-2ms (order kept); faults (every time each): "
        "answer response.create with an error"
    )
