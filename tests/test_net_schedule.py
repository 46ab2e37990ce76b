"""The fault space of `rtrace hunt` (rtrace/net/schedule.py): the surface of a clean run, the systematic phase, the
seeded random phase, the shrinker and the bug keys, with property tests for the last three."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rtrace.net.schedule import (
    SURVIVAL,
    BugKey,
    Fault,
    Generator,
    Schedule,
    Surface,
    acted,
    bug_key,
    error_code,
    item_calls_of,
    item_kinds,
    item_kinds_of,
    linked,
    random_fault,
    reaction,
    shrink,
    single_faults,
    surface_of,
    systematic,
)
from rtrace.net.script import parse_script


def rec(direction: str, event: dict[str, Any], conn: int = 1, t: float = 0.0) -> dict[str, Any]:
    return {"t": t, "dir": direction, "conn": conn, "event": event}


CLEAN = [
    rec("meta", {"type": "connection.opened"}),
    rec("server", {"type": "session.created"}),
    rec("client", {"type": "session.update", "session": {}}, t=0.1),
    rec("server", {"type": "session.updated"}, t=0.1),
    rec("client", {"type": "conversation.item.create", "item": {"id": "u1", "type": "message", "role": "user"}}),
    rec("server", {"type": "conversation.item.added", "item": {"id": "u1", "type": "message", "role": "user"}}),
    rec("client", {"type": "response.create"}),
    rec("server", {"type": "response.created"}),
    rec("server", {"type": "response.output_text.delta"}),
    rec("server", {"type": "response.done", "response": {"output": [{"id": "c1", "type": "function_call"}]}}),
    rec("client", {"type": "conversation.item.create", "item": {"id": "o1", "type": "function_call_output"}}),
    rec("server", {"type": "conversation.item.added", "item": {"id": "o1", "type": "function_call_output"}}, t=2.0),
]


def test_the_surface_is_what_the_client_did_in_order_of_first_appearance() -> None:
    s = surface_of(CLEAN)
    assert [spec for spec, _ in s.client] == [
        "session.update",
        "conversation.item.create:user",
        "response.create",
        "conversation.item.create:function_call_output",
    ]
    assert dict(s.server)["response.done:function_call"] == 1
    assert (s.connections, s.reconnects, s.responses, s.duration) == (1, False, 1, 2.0)


def test_every_schedule_renders_as_a_script_serve_reads() -> None:
    for schedule in systematic(surface_of(CLEAN)):
        script = parse_script(schedule.script_toml())
        assert len(script.turns) == len(schedule.turn_faults()), schedule
    latency = Schedule((Fault("latency", "all", "*", 0.05), Fault("latency", "all", "session.updated", 0.2)), 7)
    assert latency.serve_args() == ["--latency", "50ms", "--latency", "session.updated=200ms", "--seed", "7"]
    drop = Schedule((Fault("drop", "event", "conversation.item.create:function_call_output", 1006),))
    (turn,) = parse_script(drop.script_toml()).turns
    assert (turn.moment, turn.event, turn.close, turn.times) == (
        "event", "conversation.item.create:function_call_output", 1006, 1
    )  # fmt: skip
    assert Schedule.from_json(latency.to_json()) == latency
    third = Schedule((Fault("close", "sent", "response.done", 1011, 3),))
    (turn,) = parse_script(third.script_toml()).turns
    assert (turn.moment, turn.sent, turn.nth, turn.close) == ("sent", "response.done", 3, 1011)


def test_error_answers_use_the_codes_the_real_api_sends() -> None:
    assert error_code("conversation.item.create:function_call_output") == "invalid_tool_call_id"
    assert error_code("conversation.item.delete") == "item_delete_invalid_item_id"
    assert error_code("response.create") == "conversation_already_has_active_response"
    assert error_code("input_audio_buffer.append") == "server_error"


surfaces = st.builds(
    Surface,
    client=st.lists(
        st.tuples(st.sampled_from(["session.update", "response.create", "conversation.item.create:user",
                                   "conversation.item.create:function_call_output", "conversation.item.delete"]),
                  st.integers(1, 4)),
        max_size=5, unique_by=lambda t: t[0],
    ).map(tuple),
    server=st.lists(
        st.tuples(st.sampled_from(["session.updated", "conversation.item.added:user", "response.created",
                                   "response.done", "response.done:function_call", "response.output_text.delta",
                                   "response.output_audio.delta",
                                   "conversation.item.input_audio_transcription.completed"]),
                  st.integers(1, 4)),
        max_size=8, unique_by=lambda t: t[0],
    ).map(tuple),
    connections=st.integers(1, 3),
    responses=st.integers(0, 4),
    duration=st.floats(0, 10),
    server_vad=st.booleans(),
)  # fmt: skip


@given(surfaces)
def test_the_systematic_phase_covers_every_point_of_the_surface_once(surface: Surface) -> None:
    faults = single_faults(surface)
    assert len(set(faults)) == len(faults)
    by_kind: dict[str, list[tuple[str, str]]] = {}
    for f in faults:
        counted = f.moment in ("response", "transcription")  # a point of these is the k-th one
        by_kind.setdefault(f.kind, []).append(("r", str(f.k)) if counted else (f.moment, f.target))
    for kind, points in by_kind.items():
        assert len(points) == len(set(points)), kind  # each point once per kind
    clients = {spec for spec, _ in surface.client}
    sent = {spec for spec, _ in surface.server if not spec.partition(":")[0].endswith(".delta")}
    assert {t for m, t in by_kind.get("drop", [])} == clients
    assert {t for m, t in by_kind.get("error", [])} == clients
    assert {t for m, t in by_kind.get("close", []) if m == "sent"} == sent
    assert {t for m, t in by_kind.get("close", []) if m == "r"} == {str(n) for n in range(1, surface.responses + 1)}
    assert {t for m, t in by_kind.get("delay", [])} == clients | sent
    numbers = {str(n) for n in range(1, surface.responses + 1)}
    for kind in ("cancel", "rate_limit"):
        assert {t for m, t in by_kind.get(kind, [])} == numbers, kind
    # the server's own behaviours only where the client's surface meets them
    transcribed = dict(surface.server).get("conversation.item.input_audio_transcription.completed", 0)
    assert sorted(f.k for f in faults if f.kind == "transcription") == list(range(1, transcribed + 1))
    audio = "response.output_audio.delta" in dict(surface.server)
    for kind in ("pace", "burst"):
        assert {t for m, t in by_kind.get(kind, [])} == (numbers if audio else set()), kind
    assert {t for m, t in by_kind.get("barge_in", [])} == (numbers if audio and surface.server_vad else set())
    assert by_kind["jitter"] == [("all", "*")]
    # cheapest first: the kinds never go back to a cheaper one
    costs = [f.cost[0] for f in faults]
    assert costs == sorted(costs)
    assert faults[0] == Fault("latency", "all", "*", 0.05)


@given(surfaces, st.integers(0, 2**31), st.lists(st.integers(0, 5), max_size=12))
@settings(max_examples=50, deadline=None)
def test_two_generators_with_one_seed_told_the_same_draw_the_same_schedules(
    surface: Surface, seed: int, outcomes: list[int]
) -> None:
    a, b = Generator(surface, seed), Generator(surface, seed)
    for outcome in outcomes:
        x, y = a.next(), b.next()
        assert x == y
        assert not x.clean and 1 <= len(x.faults) <= 3
        parse_script(x.script_toml())  # every draw is a script serve runs
        assert not {f.kind for f in x.faults} & _unmet(surface)
        a.observe(x, [outcome])
        b.observe(y, [outcome])
    assert a.corpus == b.corpus


def test_novelty_puts_a_schedule_in_the_corpus_once_per_new_signal() -> None:
    g = Generator(surface_of(CLEAN), 1)
    s = g.next()
    assert g.observe(s, [("rule", "RT101")]) and g.corpus == [s]
    assert not g.observe(g.next(), [("rule", "RT101")])
    assert len(g.corpus) == 1


def _unmet(surface: Surface) -> set[str]:
    """The kinds of fault a surface cannot meet."""
    unmet = set()
    if not surface.transcriptions:
        unmet.add("transcription")
    if not surface.audio:
        unmet |= {"pace", "burst", "barge_in"}
    if not surface.server_vad:
        unmet.add("barge_in")
    return unmet


SERVER_VAD = {"type": "server_vad"}
#: A voice client's clean run: server VAD, audio answers, transcribed user audio.
VOICE = [
    rec("meta", {"type": "connection.opened"}),
    rec("server", {"type": "session.created", "session": {"audio": {"input": {"turn_detection": None}}}}),
    rec("server", {"type": "session.updated", "session": {"audio": {"input": {"turn_detection": SERVER_VAD}}}}),
    rec("client", {"type": "input_audio_buffer.append"}),
    rec("server", {"type": "input_audio_buffer.committed"}),
    rec("server", {"type": "response.created"}),
    rec("server", {"type": "conversation.item.input_audio_transcription.completed"}),
    rec("server", {"type": "response.output_audio.delta"}),
    rec("server", {"type": "response.done"}),
    rec("server", {"type": "response.created"}, t=1.0),
    rec("server", {"type": "conversation.item.input_audio_transcription.completed"}),
    rec("server", {"type": "response.done"}, t=1.5),
]
faults = st.builds(random_fault, st.sampled_from([surface_of(CLEAN), surface_of(VOICE)]),
                   st.integers(0, 10**6).map(random.Random))  # fmt: skip


def run_shrink(schedule: Schedule, holds: Any, allow_clean: bool = False) -> tuple[Schedule, list[Schedule]]:
    steps = shrink(schedule, allow_clean)
    tried = []
    try:
        candidate = next(steps)
        while True:
            tried.append(candidate)
            candidate = steps.send(holds(candidate))
    except StopIteration as stop:
        return stop.value, tried


@given(st.lists(faults, min_size=1, max_size=4), st.data())
@settings(max_examples=60)
def test_a_shrunk_schedule_still_reproduces_and_no_single_step_of_it_does(fs: list[Fault], data: st.DataObject) -> None:
    """The oracle: the bug needs one of the faults (its kind and point) with a value at or above some threshold."""
    schedule = Schedule(tuple(fs), 3)
    needed = data.draw(st.sampled_from(schedule.faults))
    floor = data.draw(st.floats(0, 1)) if isinstance(needed.value, float) else 0

    def holds(s: Schedule) -> bool:
        return any(f.kind == needed.kind and f.point == needed.point and (not isinstance(f.value, float) or
                   f.value >= floor * float(needed.value)) for f in s.faults)  # fmt: skip

    final, tried = run_shrink(schedule, holds)
    assert holds(final)
    assert len(final.faults) == 1 and final.seed == schedule.seed
    assert not any(c.clean for c in tried)
    again, _ = run_shrink(final, holds)
    assert again == final  # 1-minimal: nothing smaller reproduces


def test_shrinking_moves_latency_toward_0_and_may_reach_the_clean_schedule_when_the_clean_run_had_it() -> None:
    s = Schedule((Fault("latency", "all", "*", 0.2), Fault("drop", "event", "response.create", 1006)))
    final, _ = run_shrink(s, lambda c: c.latency()[0] >= 0.02)
    assert final.faults == (Fault("latency", "all", "*", 0.025),)
    assert run_shrink(s, lambda c: True, allow_clean=True)[0].clean
    assert not run_shrink(s, lambda c: True)[0].clean


def test_k_shrinks_toward_1() -> None:
    s = Schedule((Fault("close", "response", "", 1011, 4),))
    final, _ = run_shrink(s, lambda c: c.faults[0].k >= 2)
    assert final.faults[0].k == 2


# -- what a finding is about -------------------------------------------------------------------------------------


def test_the_key_names_kinds_not_ids_or_lines() -> None:
    kinds = item_kinds_of(CLEAN)
    assert kinds == {"u1": "user", "c1": "function_call", "o1": "function_call_output"}
    assert item_kinds({"items": ("o1", "zz")}, kinds) == ("function_call_output",)
    assert item_kinds({"call_ids": ("call_1",)}, kinds) == ("function_call",)
    a = bug_key("RT101", {"items": ("o1",)}, kinds, ("latency",), "continued")
    b = bug_key("RT101", {"items": ("o9",)}, {"o9": "function_call_output"}, ("latency",), "continued")
    assert a == b and a.finding == ("RT101", ("function_call_output",))


@given(st.lists(st.sampled_from(["o1", "o2", "u1"]), min_size=1), st.sampled_from(["drop", "close"]),
       st.sampled_from(["conversation.item.create:user", "response.create"]), st.integers(1, 3))  # fmt: skip
def test_dedup_is_by_rule_item_kind_fault_kind_and_reaction_never_by_id_target_or_count(
    ids: list[str], kind: str, target: str, k: int
) -> None:
    kinds = {"o1": "function_call_output", "o2": "function_call_output", "u1": "user"}
    fault = Fault(kind, "event", target, 1006, k)  # type: ignore[arg-type]
    key = bug_key("RT106", {"items": tuple(ids)}, kinds, (fault.signature,), "reconnected")
    other = bug_key("RT106", {"items": tuple(reversed(ids))}, kinds,
                    (dataclasses.replace(fault, target="session.update", k=1).signature,), "reconnected")  # fmt: skip
    assert key == other
    assert key != dataclasses.replace(key, reaction="gave up")
    assert key != dataclasses.replace(key, rule="RT105")


def test_the_reaction_is_what_the_client_did_after_the_fault() -> None:
    fault = rec("meta", {"type": "fault.injected", "fault": "script", "spec": "turn 1"})
    closed = rec("meta", {"type": "connection.closed"})
    again = [rec("meta", {"type": "connection.opened"}, conn=2), rec("client", {"type": "session.update"}, conn=2)]
    assert reaction([*CLEAN, fault, closed, *again]) == ("reconnected", ("connect", "session.update"))
    assert reaction([*CLEAN, fault, closed])[0] == "gave up"
    assert reaction([*CLEAN, fault, rec("client", {"type": "response.create"})]) == ("continued", ("response.create",))
    assert reaction(CLEAN) == ("continued", ())
    # a fault that did not close: the client went on and closed at its own end (continued), or closed at once
    went_on = rec("client", {"type": "response.create"})
    by_client = rec("meta", {"type": "connection.closed", "by": "client", "code": 1000})
    by_server = rec("meta", {"type": "connection.closed", "by": "server", "code": 1011})
    assert reaction([*CLEAN, fault, went_on, by_client])[0] == "continued"
    assert reaction([*CLEAN, fault, by_client])[0] == "gave up"
    assert reaction([*CLEAN, fault, went_on, by_server])[0] == "gave up"


def test_acted_names_the_faults_whose_notes_are_in_the_trace() -> None:
    s = Schedule((Fault("latency", "all", "*", 0.05), Fault("drop", "event", "response.create", 1006),
                  Fault("error", "event", "session.update", "invalid_value")))  # fmt: skip
    turns = s.turn_faults()
    second = turns.index(Fault("error", "event", "session.update", "invalid_value")) + 1
    note = rec("meta", {"type": "fault.injected", "fault": "script", "spec": f"turn {second}"})
    assert acted(s, [*CLEAN, note]) == ("error event", "latency")


def test_a_survival_key_reads_as_the_client_not_surviving() -> None:
    key = BugKey(SURVIVAL, ("exit 1",), ("drop event",), "gave up")
    assert key.text() == "client-did-not-survive on exit 1 under drop event, client gave up"


_ids = st.dictionaries(
    st.sampled_from(["items", "call_ids", "event_ids"]), st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=2),
    max_size=2,
)  # fmt: skip


def _names(ids: dict[str, list[str]], calls: dict[str, str]) -> set[tuple[str, str]]:
    out = {(kind, v) for kind, values in ids.items() for v in values}
    return out | {("call_ids", calls[v]) for v in ids.get("items", ()) if v in calls}


@given(st.lists(_ids, max_size=8), st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["c", "d"])),
       st.randoms(use_true_random=False))  # fmt: skip
def test_linked_groups_findings_that_name_one_item_or_call_and_no_others(
    ids: list[dict[str, list[str]]], calls: dict[str, str], rnd: random.Random
) -> None:
    groups = linked(ids, calls)
    # a partition of the findings, each group in input order, the groups in order of their first member
    assert sorted(i for g in groups for i in g) == list(range(len(ids)))
    assert all(g == sorted(g) for g in groups) and [g[0] for g in groups] == sorted(g[0] for g in groups)
    group_of = {i: n for n, g in enumerate(groups) for i in g}
    for i in range(len(ids)):
        for j in range(len(ids)):
            if _names(ids[i], calls) & _names(ids[j], calls):  # one id in common (an item's call counts): one group
                assert group_of[i] == group_of[j]
    for g in groups:  # and a group is held together by such links only (connected, not merged by chance)
        reached, frontier = {g[0]}, [g[0]]
        while frontier:
            i = frontier.pop()
            for j in g:
                if j not in reached and _names(ids[i], calls) & _names(ids[j], calls):
                    reached.add(j)
                    frontier.append(j)
        assert reached == set(g)
    # what the findings name decides, not the order they came in
    order = list(range(len(ids)))
    rnd.shuffle(order)
    shuffled = linked([ids[i] for i in order], calls)
    assert {frozenset(order[i] for i in g) for g in shuffled} == {frozenset(g) for g in groups}


def test_an_output_and_its_call_are_linked_through_the_call_id() -> None:
    records = [rec("server", {"type": "response.done", "response": {"output": [
                   {"type": "function_call", "id": "fc1", "call_id": "c1"}]}}),
               rec("client", {"type": "conversation.item.create", "item": {
                   "type": "function_call_output", "id": "out1", "call_id": "c1"}})]  # fmt: skip
    calls = item_calls_of(records)
    assert calls == {"fc1": "c1", "out1": "c1"}
    unanswered = {"call_ids": ["c1"], "items": ["fc1"]}
    output_lost = {"items": ["out1"]}
    other = {"items": ["u1"]}
    assert linked([unanswered, output_lost, other], calls) == [[0, 1], [2]]
    assert linked([unanswered, output_lost, other]) == [[0], [1], [2]]


# -- the server's own behaviours: jitter, cancels, rate limits, transcriptions, barge-ins, audio pacing -----------


def test_a_voice_clients_surface_says_audio_transcriptions_and_server_vad() -> None:
    voice, text = surface_of(VOICE), surface_of(CLEAN)
    assert (voice.audio, voice.transcriptions, voice.server_vad, voice.responses) == (True, 2, True, 2)
    assert (text.audio, text.transcriptions, text.server_vad) == (False, 0, False)
    assert voice.to_json()["server_vad"] is True
    kinds = {f.kind for f in single_faults(text)}
    assert {"jitter", "cancel", "rate_limit"} <= kinds and not kinds & {"transcription", "barge_in", "pace", "burst"}
    assert {"transcription", "barge_in", "pace", "burst"} <= {f.kind for f in single_faults(voice)}
    off = Surface(voice.client, voice.server, 1, False, 2, 1.5, server_vad=False)  # the client commits its turns
    assert "barge_in" not in {f.kind for f in single_faults(off)}
    assert {random_fault(text, random.Random(n)).kind for n in range(400)}.isdisjoint(_unmet(text))


def test_the_new_kinds_render_as_scripts_serve_reads_and_jitter_as_its_flag() -> None:
    s = Schedule((
        Fault("jitter", "all", "*", 0.02), Fault("jitter", "all", "conversation.item.added", 0.01),
        Fault("latency", "all", "*", 0.05), Fault("cancel", "response", "", "turn_detected", 2),
        Fault("rate_limit", "response", "", "requests", 1),
        Fault("transcription", "transcription", "", "server_error", 3),
        Fault("barge_in", "response", "", 0.2, 1), Fault("pace", "response", "", 2.0, 2),
        Fault("burst", "response", "", 1.0, 3),
    ), 5)  # fmt: skip
    assert s.serve_args() == ["--latency", "50ms", "--jitter", "20ms", "--jitter", "conversation.item.added=10ms",
                              "--seed", "5"]  # fmt: skip
    assert s.jitter() == (0.02, {"conversation.item.added": 0.01})
    turns = {t.index: t for t in parse_script(s.script_toml()).turns}
    by_kind = {f.kind: turns[i + 1] for i, f in enumerate(s.turn_faults())}
    assert (by_kind["cancel"].response, by_kind["cancel"].cancel) == (2, "turn_detected")
    assert (by_kind["rate_limit"].response, by_kind["rate_limit"].rate_limit) == (1, "requests")
    assert (by_kind["transcription"].transcription, by_kind["transcription"].fail) == (3, "server_error")
    assert (by_kind["barge_in"].barge_in, by_kind["pace"].audio_pace, by_kind["burst"].audio_burst) == (0.2, 2.0, 1.0)
    assert {t.times for t in turns.values()} == {1}
    assert Schedule.from_json(s.to_json()) == s
    words = s.describe()
    for said in ("ack jitter +/-20ms on every server event", "response 2 cancelled by the server (turn_detected)",
                 "response 1 rate-limited (no requests remaining)", "input audio transcription 3 failed",
                 "the user speaks 200ms into response 1's audio", "response 2's output audio at 2x real time",
                 "response 3's output audio held 1s, then at once"):  # fmt: skip
        assert said in words, said
    assert {f.signature for f in s.faults} == {"jitter", "latency", "cancel response", "rate_limit response",
                                               "transcription transcription", "barge_in response", "pace response",
                                               "burst response"}  # fmt: skip
    note = rec("meta", {"type": "fault.injected", "fault": "script", "spec": "turn 1"})
    assert acted(s, [note]) == tuple(sorted(("jitter", "latency", s.turn_faults()[0].signature)))


def test_shrinking_moves_a_barge_in_toward_0_a_burst_toward_0_a_pace_toward_real_time_and_k_toward_1() -> None:
    barge = Schedule((Fault("barge_in", "response", "", 0.4, 3),))
    final, _ = run_shrink(barge, lambda c: True)
    assert final.faults == (Fault("barge_in", "response", "", 0.0, 1),)
    pace = Schedule((Fault("pace", "response", "", 4.0, 2),))
    final, _ = run_shrink(pace, lambda c: True)
    assert final.faults == (Fault("pace", "response", "", 1.0, 1),)  # no slower than real time: still a fault
    burst = Schedule((Fault("burst", "response", "", 2.0, 1),))
    final, _ = run_shrink(burst, lambda c: c.faults[0].value >= 0.3)
    assert final.faults == (Fault("burst", "response", "", 0.5, 1),)
    jitter = Schedule((Fault("jitter", "all", "*", 0.1), Fault("cancel", "response", "", "turn_detected", 2)))
    final, _ = run_shrink(jitter, lambda c: any(f.kind == "cancel" for f in c.faults))
    assert final.faults == (Fault("cancel", "response", "", "turn_detected", 1),)


def test_parallel_connections_are_not_reconnects() -> None:
    from rtrace.net.schedule import surface_of

    def rec(conn: int, kind: str, side: str = "meta") -> dict[str, Any]:
        return {"t": 0.0, "dir": side, "conn": conn, "event": {"type": kind}}

    parallel = [rec(1, "connection.opened"), rec(2, "connection.opened"), rec(1, "session.created", "server"),
                rec(2, "session.created", "server"), rec(1, "connection.closed"),
                rec(2, "connection.closed")]  # fmt: skip
    again = [rec(1, "connection.opened"), rec(1, "connection.closed"), rec(2, "connection.opened"),
             rec(2, "connection.closed")]  # fmt: skip
    assert surface_of(parallel).connections == 2 and not surface_of(parallel).reconnects
    assert surface_of(again).reconnects
