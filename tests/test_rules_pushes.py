"""Push rules: stale snapshots (with the thresholds as options), ack timeouts, truncates, divergence."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.facts import ChangeAnswered
from rtrace.core.state import Change, TraceState
from rtrace.core.trace import Record
from rtrace.engine.fold import analyze_path
from rtrace.rules.base import Config
from rtrace.rules.pushes import StaleSnapshotDelete

from .conftest import REAL, SAMPLES

RACE = REAL / "tool-output-race.livekit-1.8.8.jsonl"


def slugs(path: object, config: Config | None = None) -> list[str]:
    return [f.slug for f in analyze_path(path, config).findings]  # type: ignore[arg-type]


def test_stale_snapshot_on_livekit_188_reports_window_and_gap() -> None:
    [finding] = [f for f in analyze_path(RACE).findings if f.slug == "stale-snapshot-delete"]
    assert finding.lines == (42, 43, 45, 46)
    assert "1.7 ms after the server confirmed it at line 43" in finding.explanation
    assert "round-trip (50 ms, line 42 to line 43)" in finding.explanation
    assert "between t=0.719898 s and t=0.770304 s" in finding.explanation


def test_burst_window_is_an_option() -> None:
    # lines 45 and 46 are 42 microseconds apart: a 10 microsecond window splits them, so no burst, no finding
    assert "stale-snapshot-delete" not in slugs(RACE, Config(burst_window=0.00001))
    assert "stale-snapshot-delete" in slugs(RACE, Config(burst_window=0.001))


def test_ack_timeout_is_an_option() -> None:
    assert "ack-timeout" not in slugs(RACE)
    strict = [f for f in analyze_path(RACE, Config(ack_timeout=0.04)).findings if f.slug == "ack-timeout"]
    assert strict and all("answered only after" in f.explanation for f in strict)


def test_ack_never_answered_while_connection_open() -> None:
    path = SAMPLES / "rules/ack-timeout/positive-never-answered.jsonl"
    [finding] = [f for f in analyze_path(path).findings if f.slug == "ack-timeout"]
    assert "never answered" in finding.explanation


def test_truncate_beyond_audio_measures_the_audio() -> None:
    path = SAMPLES / "rules/truncate-beyond-audio/positive-past-the-audio.jsonl"
    [finding] = [f for f in analyze_path(path).findings if f.slug == "truncate-beyond-audio"]
    assert "audio_end_ms 2500 is past the 1000 ms of audio" in finding.explanation


def test_local_divergence_needs_nothing_pending() -> None:
    path = SAMPLES / "rules/local-server-divergence/positive-output-never-on-server.jsonl"
    [finding] = [f for f in analyze_path(path).findings if f.slug == "local-server-divergence"]
    assert "only the client has item_out1" in finding.explanation


def _push_session(tmp_path: Path) -> Path:
    """Two deletes of a response's item, each in a burst with a create. The reference for the first is the median
    of one create's ack delay (10 ms); a slow create (200 ms) acked between them moves it to 105 ms, which the
    second delete, 50 ms after its item, is inside of."""
    lines: list[dict[str, Any]] = [{"t": 0.0, "dir": "meta", "conn": 1, "event": {"type": "connection.opened"}}]

    def event(t: float, d: str, e: dict[str, Any]) -> None:
        lines.append({"t": t, "dir": d, "conn": 1, "event": e})

    def user(t: float, ack: float, n: int, prev: str | None) -> None:
        content = [{"type": "input_text", "text": "hi"}]
        item = {"id": f"item_u{n}", "type": "message", "role": "user", "content": content}
        event(t, "client", {"type": "conversation.item.create", "item": item, "previous_item_id": prev})
        event(t + ack, "server", {"type": "conversation.item.added", "previous_item_id": prev, "item": item})

    def answer(t: float, n: int, prev: str) -> None:
        item = {"id": f"item_a{n}", "type": "message", "role": "assistant", "status": "completed", "content": []}
        resp = {"id": f"resp_{n}", "status": "in_progress", "output": []}
        event(t, "server", {"type": "response.created", "response": resp})
        event(t + 0.001, "server", {"type": "conversation.item.added", "previous_item_id": prev, "item": item})
        event(t + 0.002, "server", {"type": "response.done", "response": {**resp, "status": "completed"}})

    user(0.1, 0.01, 1, None)
    answer(1.0, 1, "item_u1")
    event(1.006, "client", {"type": "conversation.item.delete", "item_id": "item_a1"})  # 5 ms after: < 10 ms
    user(1.0061, 0.2, 2, "item_u1")
    answer(2.0, 2, "item_u2")
    event(2.051, "client", {"type": "conversation.item.delete", "item_id": "item_a2"})  # 50 ms after: < 105 ms
    user(2.0511, 0.01, 3, "item_u2")
    path = tmp_path / "pushes.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


def test_stale_snapshot_reference_follows_the_acks_between_deletes(tmp_path: Path) -> None:
    found = [f for f in analyze_path(_push_session(tmp_path)).findings if f.slug == "stale-snapshot-delete"]
    assert [f.explanation.count("item_a1") > 0 for f in found] == [True, False]
    assert "item_a2" in found[1].explanation
    assert "median ack delay (105 ms)" in found[1].explanation


@given(st.lists(st.sampled_from([0.0, -0.0, 0.01, 0.5, math.inf, math.nan]) | st.floats(), min_size=1, max_size=150))
def test_stale_snapshot_median_is_statistics_median_of_the_latest_64(delays: list[float]) -> None:
    rule = StaleSnapshotDelete(Config())
    rec = Record(0, 1, 0.0, "server", 1, {}, "conversation.item.added", "conversation.item.added")
    for i, delay in enumerate(delays):
        change = Change("conversation.item.create", 1, i, 1, 0.0, status="confirmed", answer_t=delay)  # latency: delay
        rule.answered(ChangeAnswered(rec, change, "item-id"), TraceState())
        got, want = rule._median_rtt(1), statistics.median(delays[max(0, i - 63) : i + 1])
        same = got == want and math.copysign(1, got) == math.copysign(1, want)
        assert same or (math.isnan(got) and math.isnan(want)), (got, want)


_Line = tuple[float, str, dict[str, Any]]


def _update_in_place(tmp_path: Path, before: list[_Line], after: tuple[_Line, ...] = ()) -> list[str]:
    """item_x created and added (a 50 ms round-trip), then, in one burst, what `before` sends or answers, a delete of
    item_x 10 ms after its add, what `after` sends, and a create of item_y: the stale-snapshot findings."""
    item = {"id": "item_x", "type": "message", "role": "user", "content": []}
    other = {**item, "id": "item_y"}
    lines: list[tuple[float, str, dict[str, Any]]] = [
        (0.0, "meta", {"type": "connection.opened"}),
        (0.1, "client", {"type": "conversation.item.create", "item": item}),
        (0.15, "server", {"type": "conversation.item.added", "item": item}),
        *before,
        (0.1605, "client", {"type": "conversation.item.delete", "item_id": "item_x"}),
        *after,
        (0.1607, "client", {"type": "conversation.item.create", "item": other, "previous_item_id": "item_x"}),
    ]
    path = tmp_path / "update.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"t": t, "dir": d, "conn": 1, "event": e}) + b"\n" for t, d, e in lines))
    return [f.message for f in analyze_path(path).findings if f.slug == "stale-snapshot-delete"]


def test_a_delete_in_a_burst_that_creates_the_same_id_is_an_update_in_place(tmp_path: Path) -> None:
    """The burst creates item_x again, its create still waiting or answered already: an update in place, whatever
    the burst keeps of its creates (an answered one's id; a waiting one is in its connection's pending changes)."""
    item = {"id": "item_x", "type": "message", "role": "user", "content": []}
    create = (0.16, "client", {"type": "conversation.item.create", "item": item})
    assert _update_in_place(tmp_path, [(0.16, "client", {"type": "session.update", "session": {}})])  # the control
    assert _update_in_place(tmp_path, [create]) == []  # waiting
    assert _update_in_place(tmp_path, [], ((0.1606, *create[1:]),)) == []  # sent after the delete
    assert (
        _update_in_place(tmp_path, [create, (0.1603, "server", {"type": "conversation.item.added", "item": item})])
        == []
    )
