"""Severities of findings and the levels a run fails on, declared once: `SEVERITY_RANK`, `FAIL_ON_LEVELS` and
`failing`, the one reading of "at or above". Imports nothing (the pytest plugin reads it at start-up)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

#: A finding's severity, lowest first.
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "error": 2}
#: What a run may fail on (`--fail-on`, the settings' `fail-on`, the pytest plugin's `fail_on`): a severity, or
#: `never` (no finding fails it).
FAIL_ON_LEVELS = ("error", "warning", "info", "never")


class Severe(Protocol):
    @property
    def severity(self) -> str: ...


S = TypeVar("S", bound=Severe)


def failing(findings: Iterable[S], fail_on: str) -> list[S]:
    """The findings at or above `fail_on` (one of `FAIL_ON_LEVELS`; `never`: none)."""
    floor = SEVERITY_RANK.get(fail_on)
    return [] if floor is None else [f for f in findings if SEVERITY_RANK[f.severity] >= floor]
