"""The search of `rtrace hunt` (rtrace/net/search.py): the systematic phase and the seeded random phase, pinned
as sequences so a refactoring of the fault vocabulary draws exactly the schedules it drew before."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from rtrace.net.schedule import Generator, Schedule, Surface, systematic

#: A surface that meets every kind: audio, server VAD, transcriptions, calls, several responses.
RICH = Surface(
    client=(("session.update", 2), ("conversation.item.create:user", 3), ("response.create", 3),
            ("conversation.item.create:function_call_output", 2), ("input_audio_buffer.append", 40),
            ("conversation.item.delete", 1)),
    server=(("session.created", 1), ("session.updated", 2), ("conversation.item.added:user", 3),
            ("response.created", 3), ("response.output_audio.delta", 30), ("response.done", 2),
            ("response.done:function_call", 1), ("conversation.item.input_audio_transcription.completed", 2),
            ("input_audio_buffer.speech_started", 2)),
    connections=2, reconnects=True, responses=3, duration=4.5, server_vad=True,
)  # fmt: skip
TEXT = Surface(client=(("session.update", 1), ("response.create", 2)),
               server=(("session.updated", 1), ("response.done", 2)), connections=1, responses=2, duration=1.0)


def _said(schedules: list[Schedule]) -> list[Any]:
    return [[s.to_json(), s.describe(), s.cost] for s in schedules]


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _generated(surface: Surface, seed: int, n: int) -> list[Schedule]:
    """The first `n` schedules of a generator told that every 3rd run showed something new."""
    gen = Generator(surface, seed)
    out = []
    for i in range(n):
        s = gen.next()
        out.append(s)
        if i % 3 == 0:
            gen.observe(s, [i])
    return out


def test_the_systematic_phase_is_pinned() -> None:
    rich = systematic(RICH, 7)
    assert len(rich) == 60
    assert [f.kind for f in rich[0].faults] == ["latency"] and rich[-1].faults[0].kind == "burst"
    assert _digest(_said(rich)) == "a0b0d0718f46af03"
    assert _digest(_said(systematic(TEXT))) == "a14cb262d8a674d2"


def test_the_random_phase_is_pinned_for_a_seed() -> None:
    assert _digest(_said(_generated(RICH, 1234, 200))) == "a74b16ab546e810d"
    assert _digest(_said(_generated(TEXT, 99, 100))) == "56ce349e38c13d9a"


def test_the_scripts_of_the_searched_schedules_are_pinned() -> None:
    """The bug scripts a hunt writes for the user, by the scripts' one writer (`script.render`; before issue 38 the
    hunt wrote its own TOML: `500ms` where it now writes `0.5s`, and no `times` but a delay's)."""
    schedules = systematic(RICH, 7) + _generated(RICH, 1234, 60)
    assert _digest([s.script_toml() for s in schedules]) == "56b18c1a8ec3841e"
    assert _digest([s.serve_args() for s in schedules]) == "fb04f11a60746f0d"


def test_a_schedule_is_its_turns_as_values_and_its_script_reads_back_as_them() -> None:
    """The hunt runs `Schedule.script()`, built from the faults' actions with no TOML read; the script written
    for the user (`script_toml`) reads back as the same turns, each at its line."""
    from rtrace.net.script import parse_script

    for s in systematic(RICH, 7) + _generated(RICH, 1234, 120) + _generated(TEXT, 5, 40):
        if not s.turn_faults():
            continue
        assert parse_script(s.script_toml(), "<schedule>") == s.script(), s.describe()
        assert len(s.script().turns) == len(s.turn_faults())
