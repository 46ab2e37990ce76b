"""The output of `rtrace replay`: connections, each divergence with its line in both traces, findings side by side."""

from __future__ import annotations

from rtrace.engine.fold import TraceReport
from rtrace.net.replay.runner import ReplayResult
from rtrace.net.replay.session import ConnResult, Divergence
from rtrace.report.replay import render
from rtrace.rules.base import Finding, Witness


def finding(*lines: int) -> Finding:
    witness = tuple(Witness(n, 1.0, "client", 1, "conversation.item.delete", "delete") for n in lines)
    return Finding("RT101", "deleted-function-call-output", "error", 1, "m", "e", witness, {}, "fix", lines[-1])


def report(*findings: Finding) -> TraceReport:
    return TraceReport("t.jsonl", 10, 1, 1.0, list(findings), [], 0)


def lines_of(result: ReplayResult) -> list[str]:
    out: list[str] = []
    render(result, out.append)
    return out


def test_divergences_name_both_lines() -> None:
    divergence = Divergence(1, "error", "an error the recording does not have: fault_injected", 30, 31, "", '{"x"}')
    result = ReplayResult("a.jsonl", "b.jsonl", "fake (rtrace serve)", [ConnResult(1, 5, 9, 1)], [divergence])
    lines = lines_of(result)
    assert lines[0] == "replayed a.jsonl against fake (rtrace serve) -> b.jsonl"
    assert lines[1] == "  conn 1: 5 sent, 9 received, 1 wait(s) timed out"
    assert any("original line" in line and "replay line" in line for line in lines)
    assert (
        "  conn 1 error: an error the recording does not have: fault_injected (original line 30, replay line 31)"
        in lines
    )
    assert '    replay:   {"x"}' in lines


def test_findings_of_the_original_next_to_the_replay() -> None:
    result = ReplayResult("a", "b", "t", [], [], report(finding(43, 45)), report())
    lines = lines_of(result)
    assert "the endpoint answered every acknowledgement the recording has" in lines
    assert "findings (original | replay):" in lines
    assert "  RT101 deleted-function-call-output: lines 43,45 | -" in lines
    assert lines_of(ReplayResult("a", "b", "t", [], []))[-1] == "  none in either"
