"""One pass over a trace: fold every record into the state and hand the facts to the rules.

Streaming: records are read, stepped and dropped; only the state (items without payloads) and the findings
stay. This module prints nothing; `rtrace.report` renders what it returns.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from ..core.audio import audio_bytes
from ..core.facts import NO_FACTS, Fact
from ..core.loader import Row, TraceReader
from ..core.reducer import AUDIO_DELTAS, TRANSITIONS, audio_run, finish, step, tick
from ..core.secrets import AUDIO_FIELDS, scrub_text
from ..core.state import TraceState
from ..core.trace import DIRECTIONS, Header, Problem, Record
from ..rules import RULES, select_rules
from ..rules.base import Config, Finding, Rule


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
    #: Findings a baseline accepted (`report.baseline.apply`): known, and left out of `findings`.
    accepted: int = 0

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
    """The rules of one analysis and their handlers, by the fact class each subscribed to (`rules.base.on`)."""

    def __init__(self, config: Config, rules: Sequence[type[Rule[Config]]]) -> None:
        self.active = [cls(config) for cls in rules]
        self.subscribers: dict[type[Fact], list[Callable[[Any, TraceState], Iterable[Finding] | None]]] = {}
        for rule in self.active:
            for fact_class, handler in rule.handlers():
                self.subscribers.setdefault(fact_class, []).append(handler)
        self.findings: list[Finding] = []

    def feed(self, facts: Iterable[Fact], state: TraceState) -> None:
        get = self.subscribers.get
        for fact in facts:
            for handler in get(type(fact), ()):
                out = handler(fact, state)
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


class Observer(Protocol):
    """What a consumer watches of a fold besides the rules (the HTML report's timeline and snapshots): called
    after each record is folded, with the facts it revealed (none for a quiet record) and the state after it."""

    def __call__(self, row: Row, facts: Sequence[Fact], state: TraceState) -> None: ...


#: A run of quiet records (see `Fold`) as `digest` passes it on: [how many, line of the last, its `t`, conn, dir];
#: or a run of audio deltas for one item, as the reader's fast path takes them (`loader.Rows.entries`): [how many,
#: line of the last, its `t`, conn, dir, item_id, audio bytes, each one's `t`, each one's bytes, seq of the first].
Run = list[Any]
#: The length of a quiet run (an audio run is longer).
QUIET_RUN = 5
#: The event type of the audio deltas a run folds, by direction.
_AUDIO_TYPES = {direction: etype for direction, etype in AUDIO_DELTAS}


class Fold:
    """One analysis under way: the state, the rules and the counts, fed the records of a trace in file order.

    The fast path. A record is *quiet* when its (dir, type) has no transition (`reducer.TRANSITIONS`) and its
    connection is already known: `step` would only move the clocks and counters. Quiet records are the bulk of a
    trace (audio appends and deltas, text deltas), so they are never made into a `Record`, and a run of them on
    one connection moves the clocks once (`reducer.tick` with its count). Every other record goes through `step`
    and its facts to the rules. The result is the one `analyze_records` gives on the same records.
    """

    def __init__(
        self, config: Config, rules: Sequence[type[Rule[Config]]], observer: Observer | None = None
    ) -> None:
        self.dispatch = _Dispatch(config, rules)
        self.state = TraceState()
        self.by_dir = dict.fromkeys(DIRECTIONS, 0)
        self.observer = observer

    def rows(self, rows: Iterable[Row], until_line: int | None = None) -> None:
        """Fold rows as `TraceReader.rows` yields them; with `until_line`, stop after the last row at or before
        that line (`show --at`). What `TraceReader.rows` returns is read through its fast path (`Rows.entries`):
        the runs of lines its scanner takes come as `Run`s."""
        if until_line is not None:
            rows = itertools.takewhile(lambda row: row[1] <= until_line, rows)
        if self.observer is not None:
            self._observed(rows, self.observer)
            return
        entries = getattr(rows, "entries", None)
        if entries is not None:
            rows = entries(TRANSITIONS, AUDIO_DELTAS)
        state, feed, by_dir = self.state, self.dispatch.feed, self.by_dir
        conns = state.conns
        transitions = TRANSITIONS
        quiet = None  # the connection of the current run of quiet records, with its count and last clock
        count, last_t, last_line = 0, 0.0, 0
        for row in rows:
            if type(row) is list:  # a run the reader took
                if len(row) == QUIET_RUN:
                    k, line, t, n, direction = row
                    by_dir[direction] += k
                    conn = conns[n]
                    if conn is quiet:
                        count += k
                        last_t, last_line = t, line
                        continue
                    if quiet is not None:
                        tick(state, quiet, last_t, last_line, count)
                    quiet, count, last_t, last_line = conn, k, t, line
                    continue
                if quiet is not None:
                    tick(state, quiet, last_t, last_line, count)
                    quiet = None
                self._audio(row, 0, 0)
                continue
            _, line, t, direction, n, _, etype, _ = row
            by_dir[direction] += 1
            conn = conns.get(n)
            if conn is not None and (direction, etype) not in transitions:
                if conn is quiet:
                    count += 1
                    last_t, last_line = t, line
                    continue
                if quiet is not None:
                    tick(state, quiet, last_t, last_line, count)
                quiet, count, last_t, last_line = conn, 1, t, line
                continue
            if quiet is not None:
                tick(state, quiet, last_t, last_line, count)
                quiet = None
            _, facts = step(state, Record(*row))
            if facts:
                feed(facts, state)
        if quiet is not None:
            tick(state, quiet, last_t, last_line, count)

    def _observed(self, rows: Iterable[Row], observer: Observer) -> None:
        """`rows` with every record shown to `observer`: quiet records still only tick, one at a time."""
        state, feed, by_dir = self.state, self.dispatch.feed, self.by_dir
        conns = state.conns
        transitions = TRANSITIONS
        for row in rows:
            _, line, t, direction, n, _, etype, _ = row
            by_dir[direction] += 1
            conn = conns.get(n)
            if conn is not None and (direction, etype) not in transitions:
                tick(state, conn, t, line)
                observer(row, NO_FACTS, state)
                continue
            _, facts = step(state, Record(*row))
            if facts:
                feed(facts, state)
            observer(row, facts, state)

    def _audio(self, run: Run, seq0: int, line0: int) -> None:
        """Fold a run of audio deltas (see `Run`), its seqs and lines counting from `seq0` and `line0`."""
        count, line, t, n, direction, item_id, n_bytes, times, sizes, seq = run
        state = self.state
        self.by_dir[direction] += count
        if not state.awaiting:
            audio_run(state, state.conns[n], t, line + line0, count, item_id, n_bytes)
            return
        # A connection awaits its pairing, which any of these records may settle: each goes through `step`, its
        # payload as a byte count (as `digest` passes one on).
        etype, feed = _AUDIO_TYPES[direction], self.dispatch.feed
        first = line + line0 - count + 1
        for k in range(count):
            event = {"type": etype, "item_id": item_id, "delta": "", "rtrace_audio_bytes": sizes[k]}
            _, facts = step(state, Record(seq + seq0 + k, first + k, times[k], direction, n, event, etype, etype))
            if facts:
                feed(facts, state)

    def records(self, records: Iterable[Record]) -> None:
        """Fold `Record`s (tests, a trace built in memory): each through `step`, no fast path."""
        state, feed, by_dir = self.state, self.dispatch.feed, self.by_dir
        for rec in records:
            by_dir[rec.dir] += 1
            _, facts = step(state, rec)
            if facts:
                feed(facts, state)

    def findings(self) -> list[Finding]:
        """End of the trace: every open connection ends, each rule finishes; the findings in report order."""
        return self.dispatch.finish(self.state)

    def digested(self, entries: Iterable[Row | Run], seq0: int, line0: int) -> None:
        """Fold what `digest` made of the records that follow: their `seq` and lines count from `seq0` and `line0`."""
        state, feed, by_dir = self.state, self.dispatch.feed, self.by_dir
        conns = state.conns
        for entry in entries:
            if type(entry) is list:
                if len(entry) != QUIET_RUN:
                    self._audio(entry, seq0, line0)
                    continue
                count, line, t, n, direction = entry
                by_dir[direction] += count
                tick(state, conns[n], t, line + line0, count)
                continue
            seq, line, t, direction, n, event, etype, raw_type = entry
            by_dir[direction] += 1
            _, facts = step(state, Record(seq + seq0, line + line0, t, direction, n, event, etype, raw_type))
            if facts:
                feed(facts, state)

    def report(
        self, path: str, events: int, problems: list[Problem], problem_count: int, header: Header | None
    ) -> TraceReport:
        state = self.state
        findings = self.findings()
        first = state.first_t or 0.0
        return TraceReport(
            path=path,
            events=events,
            connections=len(state.conns),
            duration=max(0.0, state.last_t - first),
            findings=[without_secrets(f) for f in findings],
            problems=[
                dataclasses.replace(p, message=scrub_text(p.message), excerpt=scrub_text(p.excerpt)) for p in problems
            ],
            problem_count=problem_count,
            header=header,
            by_dir={d: count for d, count in self.by_dir.items() if count},
        )


def analyze_records(
    records: Iterable[Record], config: Config, rules: Sequence[type[Rule[Config]]] = RULES
) -> tuple[list[Finding], TraceState]:
    """Run `rules` over `records`. The core of `rtrace analyze`, free of files."""
    fold = Fold(config, rules)
    fold.records(records)
    return fold.findings(), fold.state


def fold_state(records: Iterable[Record]) -> TraceState:
    """The state after `records`, no rules run and the trace not finished (a prefix stays open)."""
    fold = Fold(Config(), ())
    fold.records(records)
    return fold.state


def state_at(reader: TraceReader, line: int | None = None) -> TraceState:
    """The state after the records of `reader` up to `line` (default: all), on the fast path (`rtrace show`)."""
    fold = Fold(Config(), ())
    fold.rows(reader.rows(), until_line=line)
    return fold.state


def digest(rows: Iterable[Row]) -> Iterator[Row | Run]:
    """What a `Fold` needs of `rows` read apart from the records before them (`parallel.analyze_split`): each record
    that may have a transition, whole, and each run of quiet records on one connection and direction, as a `Run`.

    The first record of each connection stays whole (only the fold knows whether the connection is new). Audio
    payloads become their byte count (`rtrace_audio_bytes`, which the reducer reads in their place), so what
    crosses between processes is small.
    """
    entries = getattr(rows, "entries", None)
    if entries is not None:  # what `TraceReader.rows` returns: its fast path
        rows = entries(TRANSITIONS, AUDIO_DELTAS)
    transitions = TRANSITIONS
    seen: set[int] = set()
    run: Run | None = None
    for row in rows:
        if type(row) is list:  # a run the reader took: a quiet one joins the current run
            if len(row) == QUIET_RUN and run is not None and run[3] == row[3] and run[4] == row[4]:
                run[0] += row[0]
                run[1] = row[1]
                run[2] = row[2]
                continue
            if run is not None:
                yield run
            run = list(row) if len(row) == QUIET_RUN else None
            if run is None:
                yield row
            continue
        _, line, t, direction, n, _, etype, _ = row
        if n in seen and (direction, etype) not in transitions:
            if run is not None and run[3] == n and run[4] == direction:
                run[0] += 1
                run[1] = line
                run[2] = t
                continue
            if run is not None:
                yield run
            run = [1, line, t, n, direction]
            continue
        if run is not None:
            yield run
            run = None
        seen.add(n)
        yield without_audio(row)
    if run is not None:
        yield run


def without_audio(row: Row) -> Row:
    """`row` with its audio payload, if any, replaced by its byte count (`rtrace_audio_bytes`, which the reducer
    reads in its place): the same fold, a small row to keep or send."""
    event, etype = row[5], row[6]
    key = AUDIO_FIELDS.get(etype)
    if key is None or type(event.get(key)) is not str:
        return row
    slim = dict(event)
    slim[key] = ""
    if type(slim.get("rtrace_audio_bytes")) is not int:
        slim["rtrace_audio_bytes"] = audio_bytes(event[key])
    return (*row[:5], slim, *row[6:])


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
    """Analyze the trace `reader` reads (a file, stdin, an fsspec stream): `analyze_records` over the reader's
    records, on the fast path (`Fold`)."""
    fold = Fold(config or Config(), rules)
    fold.rows(reader.rows())
    return fold.report(reader.path, reader.count, reader.problems, reader.problem_count, reader.header)


def without_secrets(finding: Finding) -> Finding:
    """The finding with key-like strings in its text scrubbed: trace text quoted in an explanation (an error
    message, a transcript) may hold a key, and no report may carry one."""
    return dataclasses.replace(
        finding,
        message=scrub_text(finding.message),
        explanation=scrub_text(finding.explanation),
        witness=tuple(dataclasses.replace(w, summary=scrub_text(w.summary)) for w in finding.witness),
    )


__all__ = [
    "Fold",
    "Report",
    "TraceReport",
    "analyze_path",
    "analyze_reader",
    "analyze_records",
    "digest",
    "select_rules",
    "without_audio",
]
