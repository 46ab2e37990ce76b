"""The values of a hunt's search (rtrace/net/faults/schedule.py): a schedule renders as a script serve reads, its
latency and jitter as flags, and it reads back from JSON."""

from __future__ import annotations

from rtrace.net.faults.schedule import Fault, Schedule
from rtrace.net.faults.script import parse_script
from rtrace.net.hunt.keys import acted
from rtrace.net.hunt.search import surface_of, systematic

from .test_net_hunt_search import CLEAN, rec


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
