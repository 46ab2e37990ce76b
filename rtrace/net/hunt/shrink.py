"""Shrinking a hunt's schedule (`shrink`): a coroutine-like generator of candidates (drop a fault, its value one
step smaller as its action says - a latency, a jitter, a delay, a barge-in's moment or a burst's hold toward 0, a
slow pace toward real time - k toward 1), told by `send` whether each still reproduces; what it returns reproduces
and no single step of it does (1-minimal over those steps). Pure: the runs stay outside.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator as GeneratorType
from collections.abc import Iterable

from ..faults.actions import ACTION_BY_KIND
from ..faults.schedule import KIND_COST, Fault, Schedule

# -- shrinking -------------------------------------------------------------------------------------------------


def _smaller_values(f: Fault) -> list[Fault]:
    """The one-step-smaller variants of a fault: its value one step smaller as its action says
    (`rtrace.net.faults.actions.Action.smaller`: a latency or a delay halved, not below a floor; a close code stays: a
    normal close and a drop are different faults), k one less."""
    out = [dataclasses.replace(f, value=v) for v in ACTION_BY_KIND[f.kind].smaller(f.value)]
    if f.k > 1:
        out.append(dataclasses.replace(f, k=1))
        if f.k > 2:
            out.append(dataclasses.replace(f, k=f.k - 1))
    return out


def shrink(
    schedule: Schedule, allow_clean: bool = False, exclude: Iterable[Schedule] = ()
) -> GeneratorType[Schedule, bool, Schedule]:
    """Shrink `schedule`: yields candidates, each answered with whether it still reproduces (`send`); returns the
    smallest that did (greedy, restarting after each success: drop a fault, then make one smaller). The result is
    1-minimal: no single step from it reproduces. A clean schedule is a candidate only with `allow_clean` (the
    finding was in the clean run). `exclude`: candidates never yielded (steps that held only by chance before)."""
    current = schedule
    tried: set[Schedule] = {schedule, *exclude}
    while True:
        moved = False
        for candidate in _candidates(current):
            if candidate in tried or (candidate.clean and not allow_clean):
                continue
            tried.add(candidate)
            if (yield candidate):
                current = candidate
                moved = True
                break
        if not moved:
            return current


def _candidates(schedule: Schedule) -> list[Schedule]:
    out = [schedule.without(f) for f in sorted(schedule.faults, key=lambda f: -KIND_COST[f.kind])]
    for f in schedule.faults:
        out += [schedule.replacing(f, g) for g in _smaller_values(f)]
    return out


__all__ = ["shrink"]
