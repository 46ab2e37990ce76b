"""One pass over a trace: fold every record into the state and hand the facts to the rules.

Streaming: records are read, stepped and dropped; only the state (items without payloads) and the findings
stay. This module prints nothing; `rtrace.report` renders what it returns.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from .detectors import RULES, select_rules
from .detectors.base import Config, Finding, Rule
from .loader import TraceReader
from .reducer import finish, step
from .state import TraceState
from .trace import Header, Problem, Record


@dataclasses.dataclass
class TraceReport:
    """What `rtrace analyze` learned about one trace."""

    path: str
    events: int
    connections: int
    duration: float
    findings: list[Finding]
    problems: list[Problem]
    problem_count: int
    header: Header | None = None
    #: Records by direction.
    by_dir: dict[str, int] = dataclasses.field(default_factory=dict)
    #: Set when the trace could not be read at all.
    unreadable: str | None = None

    def counts(self) -> Counter[str]:
        return Counter(f.severity for f in self.findings)


@dataclasses.dataclass
class Report:
    """The report object every renderer takes."""

    traces: list[TraceReport]
    config: Config
    rules: Sequence[type[Rule]] = RULES

    @property
    def findings(self) -> list[Finding]:
        return [f for t in self.traces for f in t.findings]


def analyze_records(
    records: Iterable[Record], config: Config, rules: Sequence[type[Rule]] = RULES
) -> tuple[list[Finding], TraceState]:
    """Run `rules` over `records`. The core of `rtrace analyze`, free of files."""
    active = [cls(config) for cls in rules]
    subscribers: dict[str, list[Rule]] = {}
    for rule in active:
        for kind in rule.facts:
            subscribers.setdefault(kind, []).append(rule)
    state = TraceState()
    findings: list[Finding] = []
    get = subscribers.get
    for rec in records:
        _, facts = step(state, rec)
        for fact in facts:
            for rule in get(fact.kind, ()):
                out = rule.on_fact(fact, state)
                if out:
                    findings.extend(out)
    for fact in finish(state):
        for rule in get(fact.kind, ()):
            out = rule.on_fact(fact, state)
            if out:
                findings.extend(out)
    for rule in active:
        out = rule.finish(state)
        if out:
            findings.extend(out)
    findings.sort(key=Finding.sort_key)
    return findings, state


def analyze_path(
    path: str | os.PathLike[str],
    config: Config | None = None,
    rules: Sequence[type[Rule]] = RULES,
    **reader_kw: Any,
) -> TraceReport:
    """Analyze one trace file. Raises `loader.UnreadableInput` only when the file cannot be opened."""
    cfg = config or Config()
    with TraceReader.open(path, **reader_kw) as reader:
        by_dir: Counter[str] = Counter()

        def counted() -> Iterable[Record]:
            for rec in reader:
                by_dir[rec.dir] += 1
                yield rec

        findings, state = analyze_records(counted(), cfg, rules)
    first = state.first_t or 0.0
    return TraceReport(
        path=reader.path,
        events=reader.count,
        connections=len(state.conns),
        duration=max(0.0, state.last_t - first),
        findings=findings,
        problems=reader.problems,
        problem_count=reader.problem_count,
        header=reader.header,
        by_dir=dict(by_dir),
    )


__all__ = ["Report", "TraceReport", "analyze_path", "analyze_records", "select_rules"]
