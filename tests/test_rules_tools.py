"""Tool-call rules on the real LiveKit traces and on small variants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rtrace.engine.fold import analyze_path
from rtrace.rules.base import Config, Finding
from rtrace.rules.calls import OutputForUnknownCall
from rtrace.rules.tools import DeletedFunctionCallOutput, UnansweredFunctionCall

from .conftest import REAL, SAMPLES


def by_slug(path: object, slug: str) -> list[Finding]:
    return [f for f in analyze_path(path).findings if f.slug == slug]  # type: ignore[arg-type]


def test_deleted_output_on_livekit_188_names_the_race() -> None:
    [finding] = by_slug(REAL / "tool-output-race.livekit-1.8.8.jsonl", "deleted-function-call-output")
    assert finding.rule == "RT101" and finding.severity == "error" and finding.conn == 1
    assert finding.lines == (15, 42, 43, 45, 46, 47)
    assert finding.explanation == (
        "Line 42 created function_call_output item_2cd9ef851886 (call_s1_0001_0); the server confirmed it at line 43; "
        "line 45 deleted it 1.7 ms later, in the same burst as the create of user message item_ea66f32fe7fc at "
        "line 46, while function_call item_s1_0001 (call_s1_0001_0) stayed. From line 47 on, every response is "
        "generated without the tool result."
    )
    assert finding.ids["call_ids"] == ("call_s1_0001_0",)
    assert finding.ids["items"] == ("item_2cd9ef851886", "item_s1_0001")
    assert finding.ids["event_ids"] == ("chat_ctx_delete_7074e9b013e2",)


def test_client_side_recording_gives_the_same_story() -> None:
    [finding] = by_slug(REAL / "tool-output-race.livekit-1.8.8.client-view.jsonl", "deleted-function-call-output")
    assert finding.lines == (14, 41, 42, 44, 45, 46)


def test_fixed_livekit_189_has_no_tool_error() -> None:
    report = analyze_path(REAL / "tool-output-race.livekit-1.8.9.jsonl")
    assert not [f for f in report.findings if f.severity == "error"]


def test_unanswered_call_is_reported_once_per_stretch() -> None:
    findings = by_slug(REAL / "tool-output-race.livekit-1.8.8.jsonl", "unanswered-function-call")
    # line 24: asked while the tool ran; line 50: asked after the output was deleted (line 63 is the same stretch)
    assert [f.at_line for f in findings] == [24, 50]
    assert "after its output was deleted" in findings[1].explanation


def test_a_call_whose_arguments_never_finished_is_no_call() -> None:
    path = SAMPLES / "rules/unanswered-function-call/negative-arguments-never-finished.jsonl"
    report = analyze_path(path)
    assert {f.slug for f in report.findings} == {"orphaned-generation"}  # neither RT103 nor RT105


def test_unanswered_call_names_the_rejected_output() -> None:
    path = SAMPLES / "rules/unanswered-function-call/positive-output-rejected.jsonl"
    [finding] = by_slug(path, "unanswered-function-call")
    assert finding.lines == (9, 15, 16, 17)
    assert (
        "has no confirmed function_call_output (the one sent at line 15 was rejected at line 16 with server_error)"
        in (finding.explanation)
    )
    assert "had no function_call_output" not in finding.explanation


def test_unanswered_call_names_the_output_unconfirmed_at_the_close() -> None:
    path = SAMPLES / "rules/unanswered-function-call/positive-output-unconfirmed-at-close.jsonl"
    [finding] = by_slug(path, "unanswered-function-call")
    assert finding.lines == (9, 15, 16)
    assert "(the one sent at line 15 was still unconfirmed) when connection 1 ended at line 16" in finding.explanation


def test_unanswered_call_mentions_an_output_a_later_connection_had_rejected() -> None:
    [finding] = [
        f
        for f in by_slug(REAL / "reconnect-during-tool.livekit-1.8.4.jsonl", "unanswered-function-call")
        if f.conn == 1
    ]
    assert finding.lines == (15, 21)  # the later connection's lines are named, not witnesses of this one
    assert "connection 2 sent one at line 31 and the server rejected it at line 32 with invalid_tool_call_id" in (
        finding.explanation
    )


def test_no_response_after_a_tool_output() -> None:
    path = SAMPLES / "rules/no-response-after-tool-output/positive-silent-after-output.jsonl"
    [finding] = by_slug(path, "no-response-after-tool-output")
    assert (finding.rule, finding.severity, finding.lines, finding.at_line) == ("RT125", "warning", (15, 16, 19), 19)
    assert "asked for no response in the 10.00 s that followed" in finding.explanation
    rules = SAMPLES / "rules/no-response-after-tool-output"
    for near_miss in ("negative-out-of-band-response.jsonl", "negative-trace-ends.jsonl"):
        assert not by_slug(rules / near_miss, "no-response-after-tool-output")


def test_the_reply_timeout_is_an_option() -> None:
    path = SAMPLES / "rules/no-response-after-tool-output/positive-silent-after-output.jsonl"
    assert not [f for f in analyze_path(path, Config(reply_timeout=20.0)).findings if f.rule == "RT125"]
    [finding] = [f for f in analyze_path(path, Config(reply_timeout=2.0)).findings if f.rule == "RT125"]
    assert "within 2.00 s" in finding.message


def test_a_response_asked_for_after_the_timeout_is_late(tmp_path: Path) -> None:
    """The agent was silent past the timeout even if it speaks later: reported at the first event after it."""
    from tests.tracebuilder import TraceBuilder

    from .make_samples import tool_output_confirmed

    b = TraceBuilder()
    b.open()
    tool_output_confirmed(b)
    late = b.response_create(dt=12.0)
    b.close(dt=1.0)
    [finding] = by_slug(b.write(tmp_path / "late.jsonl"), "no-response-after-tool-output")
    assert finding.at_line == late and late in finding.lines


@pytest.mark.source
def test_a_pipeline_of_calls_and_outputs_is_judged_in_linear_time() -> None:
    """Each output's call was looked for by walking every pending change (`Connection.expected_call`): from 100
    pipelined call + output pairs to 400, the lines executed grew 9.4 times (counted, not timed); now 4."""
    from rtrace.engine.fold import analyze_records

    from .counting import LINEAR, growth, pipelined_creates

    def fold(records: list[Any]) -> None:
        analyze_records(records, Config(), (OutputForUnknownCall, UnansweredFunctionCall, DeletedFunctionCallOutput))

    assert growth(lambda n: pipelined_creates(n, pairs=True), fold, 100) < LINEAR


def test_the_oldest_waiting_output_rejected_makes_the_next_one_the_clock(tmp_path: Path) -> None:
    """RT125 looks at the waiting outputs only once a fact comes `reply_timeout` after the oldest: when that one is
    rejected, the next one is the oldest, even one written with an earlier time (a recorder's clocks disagree), and
    its wait is reported at the first fact past its own timeout."""
    from tests.tracebuilder import TraceBuilder, fco

    from .make_samples import tool_turn

    b = TraceBuilder()
    b.open()
    tool_turn(b)
    b.t = 5.0
    first = b.create(fco("item_oa", "call_1"), prev="item_fc1")
    b.t = 1.0
    second = b.create(fco("item_ob", "call_2"), prev="item_fc1")
    b.t = 6.0
    b.client({"type": "session.update", "session": {}})
    b.error("invalid_tool_call_id", "Tool call ID 'call_1' not found in conversation.", b.event_id(first))
    b.t = 11.5
    past = b.client({"type": "session.update", "session": {}})
    b.close(dt=1.0)
    [finding] = by_slug(b.write(tmp_path / "late.jsonl"), "no-response-after-tool-output")
    assert finding.at_line == past and second in finding.lines and first not in finding.lines
