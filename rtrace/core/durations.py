"""The one duration grammar of every option and file that takes a time (`--latency`, `--jitter`, `--timeout`,
`--ack-timeout`, a script's `delay`, ...): text -> seconds, with messages that name the option and the fix. Pure.

The grammar:

- a duration is a non-negative decimal number and a unit, `50ms`, `1.5s`, `2m` (spaces between them allowed):
  `us` (or `µs`), `ms`, `s`, `m`, `h`, in any case. No sign, no exponent, no compound (`1m30s`: write `90s`).
- a bare number is refused, whatever it is, with the two readings it could have had (`--latency 50: a duration
  needs a unit: 50ms or 50s`), except `0` (and `0.0`), which is zero in every unit.
- a list (`sweep --latency 0,10,50,200ms`, `pytest --rtrace-latency`) is comma-separated; the unit of its last
  item applies to each bare number of the list (`0,10,50,200ms` is 0, 10, 50 and 200 ms; `5,1s,200ms` is 5 ms,
  1 s and 200 ms); a bare last item (`0,10,50`) is refused like a bare number.
"""

from __future__ import annotations

import math
import re

#: Seconds per unit, longest suffix first so that `ms` is not read as `m` + `s`.
UNITS: dict[str, float] = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}

_DURATION = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[a-zµ]*)", re.IGNORECASE)


class DurationError(ValueError):
    """A text that is not a duration; the message names the option (when given), the text, and what to write
    instead (`why`, alone)."""

    def __init__(self, option: str | None, text: str, why: str) -> None:
        quoted = text if text and len(text) <= 60 and text.isprintable() and " " not in text else repr(text[:60])
        super().__init__(f"{option} {quoted}: {why}" if option else f"{quoted}: {why}")
        self.why = why


def _fail(option: str | None, text: str, why: str) -> DurationError:
    return DurationError(option, text, why)


def parse_duration(text: str, option: str | None = None, default_unit: str | None = None) -> float:
    """`50ms`, `1.5s`, `2m` -> seconds; `0` -> 0. `default_unit` is the unit of a bare number (a list's trailing
    unit); without it a bare number other than 0 is refused. Raises DurationError naming `option`."""
    if not isinstance(text, str):
        raise _fail(option, str(text), "a duration is a number and a unit, e.g. 50ms, 1.5s, 2m")
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        hint = "no sign: a duration is at least 0" if text.strip().startswith("-") else "e.g. 50ms, 1.5s, 2m"
        raise _fail(option, text, f"not a duration ({hint})")
    number, unit = found["number"], found["unit"].lower()
    value = float(number)
    if not unit:
        if value == 0:
            return 0.0
        if default_unit is None:
            bare = number.rstrip(".")
            raise _fail(option, text, f"a duration needs a unit: {bare}ms or {bare}s")
        unit = default_unit
    if unit not in UNITS:
        known = ", ".join(u for u in UNITS if u != "µs")
        raise _fail(option, text, f"unknown unit {unit!r} (units: {known}; e.g. 50ms, 1.5s, 2m)")
    seconds = value * UNITS[unit]
    if not math.isfinite(seconds):
        raise _fail(option, text, "too long a duration")
    return seconds


def unit_of(text: str) -> str | None:
    """The unit a duration is written in (`200ms` -> `ms`), or None for a bare number or no duration."""
    found = _DURATION.fullmatch(text.strip())
    if found is None or not found["unit"]:
        return None
    unit = found["unit"].lower()
    return unit if unit in UNITS else None


def parse_duration_list(text: str, option: str | None = None) -> list[float]:
    """`0,10,50,200ms` -> seconds: the last item's unit applies to every bare number of the list. Raises
    DurationError (an empty list, a bare last item other than 0, an item that is not a duration)."""
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise _fail(option, text, "give at least one duration, e.g. 0,10,50,200ms")
    if not all(parts):
        raise _fail(option, text, "an empty item in the list (write e.g. 0,10,50,200ms)")
    unit = unit_of(parts[-1])
    if unit is None and len(parts) > 1 and not all(_zero(p) or unit_of(p) for p in parts):
        raise _fail(option, text, f"a list of durations needs a unit, on its last item at least: {','.join(parts)}ms")
    return [parse_duration(p, option, unit) for p in parts]


def _zero(text: str) -> bool:
    found = _DURATION.fullmatch(text.strip())
    return found is not None and not found["unit"] and float(found["number"]) == 0


def format_duration(seconds: float) -> str:
    """Seconds as people read them, in the grammar: `0`, `250us`, `50ms`, `1.5s`, `2m`, `1.5h`."""
    if seconds == 0:
        return "0"
    for unit, scale, below in (("us", 1e-6, 1e-3), ("ms", 1e-3, 1.0), ("s", 1.0, 120.0), ("m", 60.0, 7200.0)):
        if seconds < below:
            return f"{round(seconds / scale, 3):g}{unit}"
    return f"{round(seconds / 3600.0, 3):g}h"


def parse_latencies(values: list[str], option: str = "--latency") -> tuple[float, dict[str, float]]:
    """`--latency 50ms --latency conversation.item.added=120ms` (repeated, or comma-separated) -> (the default
    delay, per event type). The types are not checked here (`rtrace.net.faults.flags.check_spec` does, against the
    catalog). Raises DurationError."""
    default = 0.0
    by_type: dict[str, float] = {}
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            if "=" in part:
                etype, _, text = part.partition("=")
                try:
                    by_type[etype.strip()] = parse_duration(text)
                except DurationError as e:
                    raise DurationError(option, part, e.why) from None
            else:
                default = parse_duration(part, option)
    return default, by_type


__all__ = [
    "UNITS",
    "DurationError",
    "format_duration",
    "parse_duration",
    "parse_duration_list",
    "parse_latencies",
    "unit_of",
]
