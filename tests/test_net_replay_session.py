"""The sans-I/O replay session, driven on a fake clock with hand-made answers (no socket, no event loop): every
pace keeps the recording's causality and its pauses, server ids are learned and rewritten across connections, and
each divergence (an acknowledgement that did not come, an error the recording lacks, an early close) names its line
in both traces. The whole module runs in well under a second; `tests/test_net_replay_runner.py` keeps the few replays
over real sockets."""

from __future__ import annotations

import heapq
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rtrace.core.loader import TraceReader
from rtrace.core.trace import Record
from rtrace.net.replay.session import (
    MAX_THINK,
    PACES,
    SETTLE,
    Done,
    ReplaySession,
    Send,
    Wait,
    client_ids,
    learn_ids,
    plan,
    rewrite_ids,
    server_event,
)

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "sample_traces" / "real"
TRACES = sorted(p.name for p in REAL.glob("*.jsonl"))
#: What an endpoint answers to one client event (None: to the connection opening); CLOSE in it closes.
Answer = Callable[[dict[str, Any] | None], list[dict[str, Any]]]
CLOSE: dict[str, Any] = {"type": "(the endpoint closes)"}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Run:
    """What a driven session did: the replayed trace (time, dir, event), line n at index n - 1."""

    def __init__(self) -> None:
        self.trace: list[tuple[float, str, dict[str, Any]]] = []

    def sent(self) -> list[tuple[float, dict[str, Any]]]:
        return [(t, e) for t, d, e in self.trace if d == "client"]


def drive(session: ReplaySession, clock: Clock, answer: Answer, latency: float = 0.01, run: Run | None = None) -> Run:
    """Run `session` as `rtrace.net.replay.runner` does, on the fake clock: each event sent is answered by `answer`, the
    answers arriving `latency` later in order; a `Wait` moves the clock to the next arrival or to its time."""
    run = run or Run()
    due: list[tuple[float, int, dict[str, Any]]] = []
    order = itertools.count()
    closed = False

    def schedule(events: list[dict[str, Any]]) -> None:
        for event in events:
            heapq.heappush(due, (clock.now + latency, next(order), event))

    schedule(answer(None))
    for _ in range(100_000):
        action = session.next()
        if isinstance(action, Done):
            return run
        if isinstance(action, Send):
            if closed:
                session.closed()  # the send found the connection closed
                continue
            run.trace.append((clock.now, "client", action.event))
            session.sent(len(run.trace))
            schedule(answer(action.event))
            continue
        assert isinstance(action, Wait) and action.until > clock.now
        if due and due[0][0] <= action.until and not closed:
            t, _, event = heapq.heappop(due)
            clock.now = max(clock.now, t)
            if event is CLOSE:
                closed = True
                session.closed()
            else:
                run.trace.append((clock.now, "server", event))
                session.receive(event, len(run.trace))
        else:
            clock.now = action.until
    raise AssertionError("the session never finished")


def as_recorded(records: list[Record], change: Callable[[dict[str, Any]], dict[str, Any]] = lambda e: e) -> Answer:
    """An endpoint that answers as the recording did: the server events between one client event and the next
    come after it (those before the first, on opening), each through `change`."""
    groups: list[list[dict[str, Any]]] = [[]]
    for rec in records:
        if rec.dir == "client":
            groups.append([])
        elif rec.dir == "server":
            groups[-1].append(change(rec.event))
    answers = iter(groups)
    return lambda event: next(answers, [])


def by_conn(name: str) -> dict[int, list[Record]]:
    out: dict[int, list[Record]] = {}
    for rec in TraceReader.open(REAL / name):
        out.setdefault(rec.conn, []).append(rec)
    return out


def replay_all(
    name: str, change: Callable[[dict[str, Any]], dict[str, Any]] = lambda e: e, **kw: Any
) -> tuple[list[ReplaySession], Run]:
    """Every connection of a real trace replayed against an endpoint answering as recorded (through `change`),
    one after the other, sharing the ids learned."""
    conns = by_conn(name)
    clock, run, ids = Clock(), Run(), {}
    keep = client_ids([r for recs in conns.values() for r in recs])
    sessions = []
    for n, records in conns.items():
        session = ReplaySession(n, records, clock=clock, ids=ids, keep=keep, line=len(run.trace), **kw)
        drive(session, clock, as_recorded(records, change), run=run)
        sessions.append(session)
    return sessions, run


def rec(line: int, t: float, dir: str, etype: str, **fields: Any) -> Record:
    event = {"type": etype, **fields}
    return Record(line - 1, line, t, dir, 1, event, etype, etype)  # type: ignore[arg-type]


#: A hand-made connection: A follows session.created by 1.0 s, B follows A's ack by 2.0 s, C comes 8.5 s after
#: B's ack (more than MAX_THINK).
STORY = [
    rec(1, 0.0, "server", "session.created"),
    rec(2, 1.0, "client", "conversation.item.create", event_id="A", item={"id": "a", "type": "message"}),
    rec(3, 1.5, "server", "conversation.item.added", item={"id": "a"}),
    rec(4, 3.5, "client", "conversation.item.create", event_id="B", item={"id": "b", "type": "message"}),
    rec(5, 4.0, "server", "conversation.item.added", item={"id": "b"}),
    rec(6, 12.5, "client", "response.create", event_id="C"),
    rec(7, 12.6, "server", "response.created", response={"id": "resp_1"}),
    rec(8, 13.0, "server", "response.done", response={"id": "resp_1"}),
]


def send_times(pace: str, speed: float, latency: float = 0.01) -> list[float]:
    clock = Clock()
    session = ReplaySession(1, STORY, clock=clock, pace=pace, speed=speed)
    run = drive(session, clock, as_recorded(STORY), latency=latency)
    assert session.divergences == [] and session.result.timeouts == 0
    return [t for t, _ in run.sent()]


# -- pacing ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("speed", [1.0, 2.0])
def test_reactive_waits_the_recorded_think_time_after_what_each_event_followed(speed: float) -> None:
    a, b, c = send_times("reactive", speed)
    assert a == pytest.approx(0.01 + 1.0 / speed)  # session.created came at 0.01
    assert b == pytest.approx(a + 0.01 + 2.0 / speed)  # A's ack came 0.01 after A
    assert c == pytest.approx(b + 0.01 + MAX_THINK / speed)  # 8.5 s of thought shortened to MAX_THINK


@pytest.mark.parametrize("speed", [1.0, 2.0])
def test_recorded_sends_at_the_recorded_offset_or_once_its_anchor_came(speed: float) -> None:
    assert send_times("recorded", speed) == pytest.approx([1.0 / speed, 3.5 / speed, 12.5 / speed])
    # At a latency longer than the recorded gaps, each event waits for the answer it followed, never sent before.
    a, b, c = send_times("recorded", 1.0, latency=3.0)
    assert a == pytest.approx(3.0) and b == pytest.approx(6.0) and c == pytest.approx(12.5)


def test_asap_sends_as_soon_as_what_each_event_followed_has_come() -> None:
    assert send_times("asap", 1.0) == pytest.approx([0.01, 0.02, 0.03])


def test_once_everything_is_sent_the_session_waits_for_the_acks_then_a_quiet_time() -> None:
    clock = Clock()
    session = ReplaySession(1, STORY, clock=clock, pace="asap")
    run = drive(session, clock, as_recorded(STORY))
    last_arrival = run.trace[-1][0]
    assert [e["type"] for _, d, e in run.trace if d == "server"][-1] == "response.done"
    assert clock.now == pytest.approx(last_arrival + SETTLE)


def test_a_wait_over_the_timeout_is_counted_and_the_replay_goes_on() -> None:
    clock = Clock()
    session = ReplaySession(1, STORY, clock=clock, pace="asap", timeout=2.0)
    run = drive(session, clock, lambda event: [])  # an endpoint that never answers
    assert [e["event_id"] for _, e in run.sent()] == ["A", "B", "C"]
    assert session.result.timeouts == 3  # each event waited 2 s for what it followed
    assert [t for t, _ in run.sent()] == pytest.approx([2.0, 4.0, 6.0])
    missing = [(d.message, d.original_line) for d in session.divergences]
    first = "session.created #1 of the recording did not come before sending recording line 2 (got 0 of 1)"
    assert missing[0] == (first, 1)
    by_end = [m for m in missing if "by the end" in m[0]]
    assert [line for _, line in by_end] == [1, 3, 7, 8]  # each kind of ack, at its first line missing
    assert clock.now == pytest.approx(8.0)  # the settling waited one more timeout, then no quiet time (no event)


def test_an_unknown_pace_is_refused() -> None:
    with pytest.raises(ValueError, match="reactive, recorded, asap"):
        ReplaySession(1, STORY, clock=Clock(), pace="sideways")


# -- real traces ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pace", PACES)
@pytest.mark.parametrize("name", TRACES)
def test_every_real_trace_replays_against_its_recording_without_divergence(name: str, pace: str) -> None:
    for speed in (1.0, 4.0):
        sessions, _ = replay_all(name, pace=pace, speed=speed)
        for session, records in zip(sessions, by_conn(name).values(), strict=True):
            assert session.divergences == [] and session.result.timeouts == 0
            assert session.result.sent == sum(1 for r in records if r.dir == "client")
            assert session.answers == [r.type for r in records if r.dir == "server"]


def renamed(event: dict[str, Any]) -> dict[str, Any]:
    """The event as if another server had assigned other ids to its responses, generated items and calls."""
    text = json.dumps(event)
    for old, new in (("call_s1_", "call_OTHER_"), ("item_s", "item_OTHERs"), ("resp_fake", "resp_OTHER")):
        text = text.replace(old, new)
    return dict(json.loads(text))


@pytest.mark.parametrize("name", TRACES)
def test_server_ids_are_learned_and_rewritten_in_what_is_sent_across_connections(name: str) -> None:
    sessions, run = replay_all(name, renamed)
    assert all(s.divergences == [] for s in sessions)
    sent = json.dumps([e for _, e in run.sent()])
    recorded = json.dumps([r.event for recs in by_conn(name).values() for r in recs if r.dir == "client"])
    assert "call_s1_" in recorded and "call_s1_" not in sent and "call_OTHER_" in sent
    if len(sessions) > 1:  # the reconnect traces: conn 2 sends the outputs of calls conn 1 learned
        assert any("call_OTHER_" in json.dumps(e) for t, e in run.sent() if t >= sessions[1].started)


def test_ids_learn_and_rewrite() -> None:
    ids: dict[str, str] = {}
    rec = {"type": "response.output_item.added", "response_id": "r1", "item": {"id": "i1", "call_id": "c1"}}
    rep = {"type": "response.output_item.added", "response_id": "r9", "item": {"id": "i9", "call_id": "c9"}}
    learn_ids(rec, rep, {"mine"}, ids)
    assert ids == {"r1": "r9", "i1": "i9", "c1": "c9"}
    learn_ids({"item": {"id": "mine"}}, {"item": {"id": "other"}}, {"mine"}, ids)
    assert "mine" not in ids
    event = {"type": "conversation.item.create", "event_id": "r1", "previous_item_id": "i1", "item": {"call_id": "c1"}}
    assert rewrite_ids(event, ids) == {
        "type": "conversation.item.create",
        "event_id": "r1",  # not an id key: the client's own event ids stay
        "previous_item_id": "i9",
        "item": {"call_id": "c9"},
    }


def test_plan_anchors_each_client_event_on_the_server_event_before_it() -> None:
    records = list(TraceReader.open(REAL / "tool-output-race.livekit-1.8.9.jsonl"))
    steps, server = plan([r for r in records if r.conn == 1])
    assert steps[0].anchor_type == "session.created" and steps[0].anchor_k == 1
    assert all(s.anchor_type is None or (s.anchor_line is not None and s.anchor_line < s.rec.line) for s in steps)
    assert all(s.think >= 0 for s in steps) and server


def test_a_server_frame_that_is_not_a_json_object_is_not_an_event() -> None:
    assert server_event(b'{"type":"error"}') == {"type": "error"}
    assert server_event("[1, 2]") is None and server_event("not json") is None and server_event(b"\xff") is None


# -- divergences ----------------------------------------------------------------------------------------------------

RACE = "tool-output-race.livekit-1.8.8.jsonl"


def test_an_ack_that_does_not_come_is_missing_at_the_recordings_line() -> None:
    records = by_conn(RACE)[1]
    deleted = next(r for r in records if r.type == "conversation.item.deleted")
    clock = Clock()
    session = ReplaySession(1, records, clock=clock, timeout=1.0)
    drop = as_recorded(records)
    run = drive(session, clock, lambda event: [e for e in drop(event) if e["type"] != "conversation.item.deleted"])
    missing = [d for d in session.divergences if d.kind == "missing"]
    assert missing and all(d.original_line == deleted.line for d in missing)
    assert "conversation.item.deleted #1 of the recording did not come" in missing[0].message
    first = missing[0]
    assert first.replay_line is not None and run.trace[first.replay_line - 1][1] == "client"  # the last event sent
    assert session.result.sent == sum(1 for r in records if r.dir == "client")


def test_an_error_the_recording_lacks_names_its_cause_in_the_recording_and_itself_in_the_replay() -> None:
    records = by_conn(RACE)[1]
    delete = next(r for r in records if r.type == "conversation.item.delete")
    recorded = as_recorded(records)

    def refuse_deletes(event: dict[str, Any] | None) -> list[dict[str, Any]]:
        answers = [e for e in recorded(event) if e["type"] != "conversation.item.deleted"]
        if event is not None and event["type"] == "conversation.item.delete":
            return [{"type": "error", "error": {"code": "refused", "event_id": event.get("event_id")}}, *answers]
        return answers

    clock = Clock()
    session = ReplaySession(1, records, clock=clock, timeout=1.0)
    run = drive(session, clock, refuse_deletes)
    errors = [d for d in session.divergences if d.kind == "error"]
    assert len(errors) == 1
    (error,) = errors
    assert error.original_line == delete.line
    assert error.replay_line is not None and run.trace[error.replay_line - 1][2]["type"] == "error"
    assert error.message == "an error the recording does not have: refused" and '"refused"' in error.replay_text
    assert any(d.kind == "missing" and d.original_line and "conversation.item.deleted" in d.message
               for d in session.divergences)  # fmt: skip


def test_a_close_before_every_event_is_sent_says_how_many_were_not() -> None:
    records = by_conn(RACE)[1]
    recorded = as_recorded(records)
    answered = itertools.count()

    def close_after_the_third(event: dict[str, Any] | None) -> list[dict[str, Any]]:
        return [*recorded(event), CLOSE] if next(answered) == 3 else recorded(event)

    clock = Clock()
    session = ReplaySession(1, records, clock=clock, timeout=1.0)
    run = drive(session, clock, close_after_the_third)
    (closed,) = [d for d in session.divergences if d.kind == "closed"]
    clients = [r for r in records if r.dir == "client"]
    sent = session.result.sent  # the third and those that followed it without waiting for an answer
    assert 3 <= sent < len(clients) and len(run.sent()) == sent
    assert closed.message == f"the endpoint closed the connection; {len(clients) - sent} client event(s) not sent"
    assert closed.original_line == clients[sent].line and closed.replay_line == len(run.trace)
    assert clock.now < 1.0  # a closed connection is waited for no longer
