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
from .redact import scrub_text
from .reducer import TRANSITIONS, Fact, finish, step, tick
from .state import TraceState
from .trace import DIRECTIONS, Header, Problem, Record


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


class _Dispatch:
    """The rules of one analysis and the facts they subscribe to."""

    def __init__(self, config: Config, rules: Sequence[type[Rule]]) -> None:
        self.active = [cls(config) for cls in rules]
        self.subscribers: dict[str, list[Rule]] = {}
        for rule in self.active:
            for kind in rule.facts:
                self.subscribers.setdefault(kind, []).append(rule)
        self.findings: list[Finding] = []

    def feed(self, facts: Iterable[Fact], state: TraceState) -> None:
        get = self.subscribers.get
        for fact in facts:
            for rule in get(fact.kind, ()):
                out = rule.on_fact(fact, state)
                if out:
                    self.findings.extend(out)

    def finish(self, state: TraceState) -> list[Finding]:
        self.feed(finish(state), state)
        for rule in self.active:
            out = rule.finish(state)
            if out:
                self.findings.extend(out)
        self.findings.sort(key=Finding.sort_key)
        return self.findings


def analyze_records(
    records: Iterable[Record], config: Config, rules: Sequence[type[Rule]] = RULES
) -> tuple[list[Finding], TraceState]:
    """Run `rules` over `records`. The core of `rtrace analyze`, free of files."""
    dispatch = _Dispatch(config, rules)
    state = TraceState()
    for rec in records:
        _, facts = step(state, rec)
        if facts:
            dispatch.feed(facts, state)
    return dispatch.finish(state), state


def analyze_path(
    path: str | os.PathLike[str],
    config: Config | None = None,
    rules: Sequence[type[Rule]] = RULES,
    **reader_kw: Any,
) -> TraceReport:
    """Analyze one trace file. Raises `loader.UnreadableInput` only when the file cannot be opened."""
    with TraceReader.open(path, **reader_kw) as reader:
        return analyze_reader(reader, config, rules)


def analyze_reader(
    reader: TraceReader, config: Config | None = None, rules: Sequence[type[Rule]] = RULES
) -> TraceReport:
    """Analyze the trace `reader` reads (a file, stdin, an fsspec stream).

    Same result as `analyze_records` over the reader's records, on the fast path: a record with no transition
    on a known connection only ticks the clocks (`reducer.tick`), and no `Record` is built for it.
    """
    dispatch = _Dispatch(config or Config(), rules)
    state = TraceState()
    conns = state.conns
    transitions = TRANSITIONS
    by_dir = dict.fromkeys(DIRECTIONS, 0)
    for row in reader.rows():
        _, line, t, direction, n, _, etype, _ = row
        by_dir[direction] += 1
        conn = conns.get(n)
        if conn is not None and (direction, etype) not in transitions:
            tick(state, conn, t, line)
            continue
        _, facts = step(state, Record(*row))
        if facts:
            dispatch.feed(facts, state)
    findings = dispatch.finish(state)
    first = state.first_t or 0.0
    return TraceReport(
        path=reader.path,
        events=reader.count,
        connections=len(state.conns),
        duration=max(0.0, state.last_t - first),
        findings=[without_secrets(f) for f in findings],
        problems=[
            dataclasses.replace(p, message=scrub_text(p.message), excerpt=scrub_text(p.excerpt))
            for p in reader.problems
        ],
        problem_count=reader.problem_count,
        header=reader.header,
        by_dir={d: count for d, count in by_dir.items() if count},
    )


def without_secrets(finding: Finding) -> Finding:
    """The finding with key-like strings in its text scrubbed: trace text quoted in an explanation (an error
    message, a transcript) may hold a key, and no report may carry one."""
    return dataclasses.replace(
        finding,
        message=scrub_text(finding.message),
        explanation=scrub_text(finding.explanation),
        witness=tuple(dataclasses.replace(w, summary=scrub_text(w.summary)) for w in finding.witness),
    )


__all__ = ["Report", "TraceReport", "analyze_path", "analyze_reader", "analyze_records", "select_rules"]
