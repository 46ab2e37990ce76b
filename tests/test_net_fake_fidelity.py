"""The differential check against the real server's recordings (`rtrace.net.fake.fidelity`, `make fidelity`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from bench.fidelity import error_findings, find_realapi, read_case
from rtrace.engine.fold import analyze_path
from rtrace.net.fake.fidelity import (
    KNOWN,
    CaseResult,
    Difference,
    Known,
    async_differences,
    compare,
    has_client_events,
    id_shape,
    judge,
    order_differences,
    serve_session,
    shape_differences,
    value_differences,
    walk,
)

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}


def session() -> list[tuple[str, dict[str, Any]]]:
    """A text session as serve itself answers it: the recording every check must find identical."""
    client = [
        {"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"]}},
        {"type": "conversation.item.create", "item": USER},
        {"type": "response.create"},
    ]
    return serve_session([("client", e) for e in client])


def test_ids_have_shapes() -> None:
    assert id_shape("item_Dz2piXGFPhsEX41kr8w86") == "item_<alnum 21>"
    assert id_shape("event_fd8cb17ab18a4a3f") == "event_<hex 16>"
    assert id_shape("item_s1_0001") == "item_<2>_<4>"
    assert id_shape("sess_u0_E6mH7YwmYXwYY0iVKLojm") == "sess_<2>_<21>"


def test_paths_fold_arrays_and_stop_at_opaque_subtrees() -> None:
    ev = {"a": [{"b": 1}, {"c": None}], "metadata": {"anything": 1}}
    assert [p for p, _ in walk(ev)] == ["", "a", "a[]", "a[].b", "a[]", "a[].c", "metadata"]


def test_serve_against_itself_has_no_difference() -> None:
    recorded = session()
    assert has_client_events(recorded)
    result = compare("self", recorded)
    assert result.differences == []


def test_the_check_finds_an_order_a_field_a_type_and_a_value() -> None:
    """What the check is for: each kind of difference, planted in a copy of the recording, is found and named."""
    recorded = session()
    real = [(d, dict(e)) for d, e in recorded]
    kinds = [e["type"] for _, e in real]
    # conversation.item.done after response.output_item.done, as serve used to send them
    i = kinds.index("conversation.item.done", kinds.index("response.created"))
    real[i], real[i + 1] = real[i + 1], real[i]
    j = kinds.index("response.output_text.delta")
    real[j] = ("server", {**real[j][1], "logprobs": []})
    k = kinds.index("response.created")
    real[k] = ("server", {**real[k][1], "response": {**real[k][1]["response"], "usage": 3}})
    found = {(d.kind, d.event_type, d.path) for d in order_differences(real, recorded)}
    assert ("missing", "response.output_item.done", "") in found or ("missing", "conversation.item.done", "") in found
    shapes = {(d.kind, d.event_type, d.path) for d in shape_differences(real, recorded)}
    assert ("missing-field", "response.output_text.delta", "logprobs") in shapes
    assert ("json-type", "response.created", "response.usage") in shapes
    first = real[0][1]
    real[0] = ("server", {**first, "session": {**first["session"], "voice_x": 1, "model": "gpt-other"}})
    values = {(d.kind, d.path) for d in value_differences(real, recorded)}
    assert ("value", "session.model") in values


def test_events_on_the_servers_own_clock_are_compared_by_count_and_by_what_they_follow() -> None:
    recorded = session()  # with the rate limits after response.done, as the real server sends them
    rate = next(r for r in recorded if r[1]["type"] == "rate_limits.updated")
    without = [r for r in recorded if r is not rate]
    found = {(d.kind, d.event_type, d.path) for d in async_differences(recorded, without)}
    assert found == {("count", "rate_limits.updated", "")}
    early = [*without[:3], rate, *without[3:]]
    found = {(d.kind, d.event_type, d.path) for d in async_differences(recorded, early)}
    assert [k for k, t, _ in found if t == "rate_limits.updated"] == ["position"]
    assert order_differences(recorded, early) == []  # left out of the alignment


def test_a_difference_is_explained_only_by_an_entry_that_matches_and_an_unused_entry_is_stale() -> None:
    d = Difference("missing", "rate_limits.updated", "", "sent", "not sent", "case-a", "response.create")
    table = (
        Known("missing", "rate_limits.*", "", "why", case="case-a"),
        Known("extra", "*", "", "never used"),
    )
    verdict = judge([compare_result("case-a", [d])], table)
    assert [k.reason for _, k in verdict.explained] == ["why"] and [k.reason for k in verdict.stale] == ["never used"]
    verdict = judge([compare_result("case-b", [d])], table[:1])
    assert [x.case for x in verdict.unexplained] == ["case-b"] and not verdict.ok


def compare_result(case: str, found: list[Difference]) -> CaseResult:
    return CaseResult(case, [dataclasses.replace(d, case=case) for d in found])


REALAPI = find_realapi(None)


@pytest.mark.skipif(REALAPI is None, reason="no ../shared/realapi recordings beside the clone")
def test_the_recordings_differ_from_serve_only_as_the_table_says_and_give_no_error_finding() -> None:
    assert REALAPI is not None
    cases = sorted((REALAPI / "cases").glob("*.jsonl"))
    results = []
    for path in cases:
        records = read_case(path)
        if has_client_events(records):
            results.append(compare(path.name, records))
    verdict = judge(results, KNOWN)
    assert [d.line() for d in verdict.unexplained] == [] and verdict.stale == []
    assert [line for path in cases for line in error_findings(path)] == []


@pytest.mark.skipif(REALAPI is None, reason="no ../shared/realapi recordings beside the clone")
def test_serve_answers_a_message_and_a_call_in_one_response_as_gpt_realtime_2_1_did() -> None:
    """The recording where gpt-realtime-2.1 said a preamble and called in one response: serve, on that model, answers
    with the same events in the same order (the client's output names the call serve made), same fields; only the
    default instructions' value differs."""
    assert REALAPI is not None
    path = REALAPI / "cases" / "realapi.pydantic-ai.text-and-tool-one-response.gpt-realtime-2.1.jsonl"
    result = compare(path.name, read_case(path))
    assert [d.line() for d in result.differences] == [
        d.line() for d in result.differences if d.path == "session.instructions"
    ]


@pytest.mark.skipif(REALAPI is None, reason="no ../shared/realapi recordings beside the clone")
def test_the_rejected_item_error_is_joined_to_the_create_it_names() -> None:
    """The error comes ahead of the acks of the first create and names `item.content[0].type` = 'text': it answers
    the second create (the assistant message), not the oldest."""
    assert REALAPI is not None
    path = REALAPI / "cases" / "realapi.pydantic-ai.history-seed-rejected-item.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    named = next(n for n, line in enumerate(lines, 1) if '"role":"assistant","content":[{"type":"text"' in line)
    report = analyze_path(path)
    [found] = [f for f in report.findings if f.rule == "RT112"]
    assert f"answering line {named}" in found.message, found.message


def test_an_error_finding_is_reported() -> None:
    """The analyzer half of the check can fail: the bundled 1.8.8 race is two error findings."""
    race = Path(__file__).resolve().parent.parent / "sample_traces" / "real" / "tool-output-race.livekit-1.8.8.jsonl"
    assert [line.split(": ")[1].split()[0] for line in error_findings(race)] == ["RT102", "RT101"]
