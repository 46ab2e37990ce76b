"""Shrinking a hunt's schedule (rtrace/net/hunt/shrink.py): what it returns still reproduces and is 1-minimal; each kind
of value moves toward its smallest as its action says, k toward 1."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rtrace.net.faults.schedule import Fault, Schedule
from rtrace.net.hunt.search import random_fault, surface_of
from rtrace.net.hunt.shrink import shrink

from .test_net_hunt_search import CLEAN, VOICE

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
