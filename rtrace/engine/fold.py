"""One pass over a trace: fold every record into the state and hand the facts to the rules.

Streaming: records are read, stepped and dropped; only the state (items without payloads) and the findings
stay. This module prints nothing; `rtrace.report` renders what it returns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import itertools
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, Protocol, cast

from mypy_extensions import mypyc_attr

from ..core.audio import audio_bytes
from ..core.describe import DESCRIBED
from ..core.escape import printable
from ..core.facts import ITEM_TYPE_OF, KIND_OF, NO_FACTS, Fact
from ..core.loader import _GA_NAMES, Row, TraceReader, column_of, json_kind, lines_at
from ..core.reducer import AUDIO_DELTAS, TRANSITION_TYPES, TRANSITIONS, audio_run, finish, step, tick
from ..core.secrets import AUDIO_FIELDS, scrub_text
from ..core.state import Connection, TraceState
from ..core.trace import DIRECTIONS, AudioRun, Direction, Header, Problem, QuietRows, QuietRun, Record, dumps_record
from ..rules import RULES, select_rules
from ..rules.base import NEEDS, Config, Finding, Narrowing, Rule, Subscription


@mypyc_attr(native_class=False)  # crosses processes (pickled): a plain class where compiled
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
    #: Rules that failed on an event of this trace (each also a `problems` entry of severity `error`, with its
    #: line): their findings stop there, the other rules' stand. The analysis is incomplete (exit 1).
    failed_rules: tuple[str, ...] = ()
    #: Rules that could not judge all of this trace, and why (`blind_notes`): what the capture lacks.
    not_judged: list[NotJudged] = dataclasses.field(default_factory=list)
    #: Where some lines start in the file (`TraceReader.marks`), for a report that quotes lines of it: they are read
    #: from there, not from the start (`report.excerpt.read_lines`). Empty when unknown.
    line_marks: Sequence[tuple[int, int]] = dataclasses.field(default=(), compare=False, repr=False)

    def counts(self) -> Counter[str]:
        return Counter(f.severity for f in self.findings)


@mypyc_attr(native_class=False)  # crosses processes (pickled): a plain class where compiled
@dataclasses.dataclass(frozen=True)
class NotJudged:
    """Rules (ids) that could not judge (part of) a trace as meant because the capture lacks what they need (`what`,
    a key of `rules.base.NEEDS`), and why."""

    rules: tuple[str, ...]
    what: str
    why: str


def blind_notes(
    rules: Iterable[type[Rule]], state: TraceState, header: Header | None, untimed: bool = False
) -> list[NotJudged]:
    """What the rules of a fold could not judge on its trace: a reconnect whose replay the recorder could not see
    (a connection opened with `"replay_visible": false` that replaced another), what the header's `unseen` lists
    (a trace read from a log), and times when every event has the same one (`untimed`: a trace without
    timestamps; those rules ran, on one instant). Only for rules that need it (`Rule.needs`)."""
    rules = tuple(rules)
    unseen: dict[str, str] = {}
    if untimed:
        unseen["timestamps"] = (
            "no timestamps (every event at 0 s): no timeout can fire and every change counts as one burst"
        )
    blind = [c for c in state.conns.values() if not c.replay_visible and c.replaces is not None]
    if blind:
        where = ", ".join(f"connection {c.n} (line {c.opened_line})" for c in blind[:5])
        unseen["reconnect-replay"] = (
            f"the trace does not show what the reconnect replayed on {where}"
            f"{' and more' if len(blind) > 5 else ''} (replay_visible: false)"
        )
    listed = header.fields.get("unseen") if header is not None else None
    source = str(header.fields.get("recorder") or "the recorder") if header is not None else ""
    for what in listed if isinstance(listed, list) else ():
        if what in NEEDS and what != "reconnect-replay" and what not in unseen:
            unseen[what] = f"{printable(source, 80)} does not record {NEEDS[what]}"
    out = []
    for what, why in unseen.items():
        ids = tuple(r.id for r in rules if what in r.needs)
        if ids:
            out.append(NotJudged(ids, what, why))
    return out


@mypyc_attr(native_class=False)  # crosses processes (pickled): a plain class where compiled
@dataclasses.dataclass
class Report:
    """The report object every renderer takes."""

    traces: list[TraceReport]
    config: Config
    rules: Sequence[type[Rule]] = RULES

    @property
    def findings(self) -> list[Finding]:
        return [f for t in self.traces for f in t.findings]


@mypyc_attr(native_class=False)  # crosses processes (pickled): a plain class where compiled
@dataclasses.dataclass(frozen=True)
class Failure:
    """A rule (or the fold itself) raised on the record at `line`: what is left of the analysis is reported."""

    line: int
    #: The rule's id, or `fold` when `reducer.step` itself failed on the record.
    rule: str
    error: str

    def problem(self, path: str) -> Problem:
        if self.rule == "fold":
            what = f"rtrace could not fold this event ({self.error}); it is skipped, the analysis goes on"
        else:
            what = (
                f"rule {self.rule} failed on this event ({self.error}); its findings for this trace stop here, "
                "the other rules' stand"
            )
        return Problem(path, self.line, 1, scrub_text(what), "error")


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:200]}"


#: A rule's bound handler of one fact class.
_Handler = Callable[[Any, TraceState], Iterable[Finding] | None]


class _Route:
    """The handlers of one fact class some of which are narrowed (`rules.base.on(kinds=..., items=...)`): by the
    fact's change kind (`kind_of`, None: no handler narrows by kind), then by its item's type (`item_type_of`, None:
    no handler narrows by it), the handlers that take it, in subscription order. Kinds and item types no handler names
    share one entry (`_OTHER`), so a trace's own item types never grow the table. `_Dispatch.feed` reads it (inline:
    a call per fact would cost what the narrowing saves)."""

    __slots__ = ("by_kind", "item_type_of", "kind_of", "other")

    def __init__(self, fact_class: type[Fact], subs: Sequence[Subscription]) -> None:
        kinds = {k for s in subs for k in s.narrowing.kinds or ()}
        items = {i for s in subs for i in s.narrowing.items or ()}
        self.kind_of = KIND_OF[fact_class] if kinds else None
        self.item_type_of = ITEM_TYPE_OF[fact_class] if items else None

        def level(kind: str) -> tuple[_Handler, ...] | dict[str, tuple[_Handler, ...]]:
            if not items:
                return tuple(s.handler for s in subs if s.narrowing.takes(kind, _OTHER))
            return {i: tuple(s.handler for s in subs if s.narrowing.takes(kind, i)) for i in (*items, _OTHER)}

        self.by_kind = {k: level(k) for k in kinds}
        self.other = level(_OTHER)


#: What stands for every change kind and item type no narrowing names, and for no item (no event type or item type
#: a narrowing names is empty).
_OTHER: Final = ""


class _Dispatch:
    """The rules of one analysis and their handlers, by the fact class each subscribed to (`rules.base.on`) and
    what it takes of it (the change's kind, the item's type): a fact goes to the handlers that take it, in
    subscription order, each found by one or two dictionary lookups (`_Route`), not by a call of each.

    A rule that raises is isolated: the failure is kept (`failures`, with the line of the record whose fact it was
    handling), the rule is unsubscribed from every fact and skipped at `finish`, and its findings so far stand; the
    other rules never notice."""

    def __init__(self, config: Config, rules: Sequence[type[Rule[Config]]]) -> None:
        self.active = [cls(config) for cls in rules]
        self.findings: list[Finding] = []
        self.failures: list[Failure] = []
        self._failed: set[int] = set()
        #: The fact classes some dormant handler waits for (`on(after=...)`) that were fed.
        self._seen: set[type[Fact]] = set()
        self.routes: dict[type[Fact], tuple[_Handler, ...] | _Route] = {}
        self._route()

    def _route(self) -> None:
        """The routes of the rules still in the analysis, without the handlers still dormant (a plain tuple for a
        class no handler narrows). A class a dormant handler waits for ends its route with `_wake`."""
        by_class: dict[type[Fact], list[Subscription]] = {}
        waits: set[type[Fact]] = set()
        for rule in self.active:
            if id(rule) in self._failed:
                continue
            for sub in rule.subscribed():
                if sub.narrowing.awake(self._seen):
                    by_class.setdefault(sub.fact, []).append(sub)
                else:
                    waits |= sub.narrowing.after or set()
        wake = Subscription(Fact, self._wake, Narrowing())
        for fact_class in waits:
            by_class.setdefault(fact_class, []).append(wake._replace(fact=fact_class))
        self.routes = {
            fact_class: (
                _Route(fact_class, subs)
                if any(s.narrowing.narrows for s in subs)
                else tuple(s.handler for s in subs)
            )
            for fact_class, subs in by_class.items()
        }

    def _wake(self, fact: Fact, state: TraceState) -> None:
        """The first fact of a class dormant handlers wait for was handled: from the next fact on, they take theirs."""
        self._seen.add(type(fact))
        self._route()

    def feed(self, facts: list[Fact], state: TraceState) -> None:
        """Hand `facts` (what `step` returned for one record) to the handlers that take them, in order."""
        findings = self.findings
        for fact in facts:
            route = self.routes.get(type(fact))
            if route is None:
                continue
            if isinstance(route, tuple):
                handlers = route
            else:  # narrowed (`_Route`)
                kind_of = route.kind_of
                table = route.other if kind_of is None else route.by_kind.get(kind_of(fact), route.other)
                if isinstance(table, tuple):
                    handlers = table
                else:
                    item_type = route.item_type_of(fact) if route.item_type_of is not None else None
                    found = table.get(_OTHER if item_type is None else item_type)
                    handlers = table[_OTHER] if found is None else found
            for handler in handlers:
                try:
                    out = handler(fact, state)
                except Exception as e:  # a bug of one rule on one input: that rule stops, the others go on
                    self.fail(getattr(handler, "__self__", None), fact.rec.line, e)
                    continue
                if out:
                    findings.extend(out)

    def fail(self, rule: Any, line: int, e: BaseException) -> None:
        """Take `rule` out of this analysis after it raised `e` on the record at `line`."""
        if rule is None or id(rule) in self._failed:
            return
        self._failed.add(id(rule))
        self.failures.append(Failure(line, str(getattr(rule, "id", type(rule).__name__)), _error_text(e)))
        self._route()

    def finish(self, state: TraceState) -> list[Finding]:
        self.feed(finish(state), state)
        for rule in self.active:
            if id(rule) in self._failed:
                continue
            try:
                out = rule.finish(state)
            except Exception as e:
                self.fail(rule, state.last_line, e)
                continue
            if out:
                self.findings.extend(out)
        self.findings.sort(key=Finding.sort_key)
        return self.findings


class Observer(Protocol):
    """What a consumer watches of a fold besides the rules (the HTML report's timeline and snapshots): called
    after each record is folded, with the facts it revealed (none for a quiet record) and the state after it. A
    quiet record of a type `describe` has nothing to say of (not in `describe.DESCRIBED`) may come with an empty
    event: the reader's fast path did not parse it (`OBSERVED`). An observer with a `quiet(seq, line, times,
    direction, conn, types)` attribute is given such records in a row at once (consecutive lines of one connection,
    `seq` and `line` the first's, no facts; the state is the one after the last)."""

    def __call__(self, row: Row, facts: Sequence[Fact], state: TraceState) -> None: ...


#: What a fold takes: a record as a `Row`, or a run of records the reader's fast path (`loader.Rows.entries`) or
#: `digest` took whole.
Entry = Row | QuietRun | QuietRows | AudioRun
#: What a fold with an observer has the reader parse: the transitions, and every record `describe` summarises (the
#: observer reads their event); the other quiet records come as `QuietRows`, their times and types only.
OBSERVED = TRANSITIONS | frozenset((d, etype) for d in DIRECTIONS for etype in DESCRIBED)
_NO_EVENT: Final[dict[str, Any]] = {}
#: The event type of the audio deltas a run folds, by direction.
_AUDIO_TYPES: Final = {direction: etype for direction, etype in AUDIO_DELTAS}


#: The collector's thresholds during a fold (see `steady_gc`).
FOLD_GC_THRESHOLDS = (20_000, 50, 1_000)
_gc_lock = threading.Lock()
_gc_depth = 0
_gc_saved: tuple[int, int, int] = (700, 10, 10)


@contextlib.contextmanager
def steady_gc() -> Iterator[None]:
    """The cyclic collector tuned for a fold while it runs (the outermost one, when folds nest or run in threads).

    A fold allocates and frees in a steady state (records, facts, events: freed by reference counting, never
    cyclic) and keeps what the live state keeps for long. With the default thresholds the collector walks that
    state over and over (10-12% of the analysis of 200,000 pipelined creates): during a fold the youngest
    generation is collected every 20,000 allocations and the oldest almost never. Restored after."""
    global _gc_depth, _gc_saved
    with _gc_lock:
        if _gc_depth == 0:
            _gc_saved = gc.get_threshold()
            gc.set_threshold(*FOLD_GC_THRESHOLDS)
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0:
                gc.set_threshold(*_gc_saved)


class Fold:
    """One analysis under way: the state, the rules and the counts, fed the records of a trace in file order.

    The fast path. A record is *quiet* when its (dir, type) has no transition (`reducer.TRANSITIONS`) and its
    connection is already known: `step` would only move the clocks and counters. Quiet records are the bulk of a
    trace (audio appends and deltas, text deltas), so they are never made into a `Record`, and a run of them on
    one connection moves the clocks once (`reducer.tick` with its count). Every other record goes through `step`
    and its facts to the rules (`_step`). The result is the one `analyze_records` gives on the same records.
    Every way in (`rows`, `digested`) is the one loop of `_entries`.
    """

    def __init__(
        self, config: Config, rules: Sequence[type[Rule[Config]]], observer: Observer | None = None
    ) -> None:
        self.dispatch = _Dispatch(config, rules)
        self.rules = tuple(rules)
        self.state = TraceState()
        self.by_dir = dict.fromkeys(DIRECTIONS, 0)
        self.observer = observer

    def rows(self, rows: Iterable[Row], until_line: int | None = None) -> None:
        """Fold rows as `TraceReader.rows` yields them; with `until_line`, stop after the last row at or before
        that line (`show --at`). What `TraceReader.rows` returns is read through its fast path (`Rows.entries`,
        `until_line` included): the runs of lines its scanner takes come whole. An observer sees every row, so
        it reads them one by one."""
        entries = getattr(rows, "entries", None)
        if entries is not None and self.observer is None:
            self._entries(entries(TRANSITIONS, AUDIO_DELTAS, until_line))
            return
        if entries is not None:  # an observer sees every record: quiet ones come with their times and types
            self._entries(entries(OBSERVED, frozenset(), until_line, detail=True))
            return
        if until_line is not None:
            rows = itertools.takewhile(lambda row: row[1] <= until_line, rows)
        self._entries(rows)

    def digested(self, entries: Iterable[Entry], seq0: int, line0: int) -> None:
        """Fold what `digest` made of the records that follow: their `seq` and lines count from `seq0` and `line0`."""
        self._entries(entries, seq0, line0)

    def _entries(self, entries: Iterable[Entry], seq0: int = 0, line0: int = 0) -> None:
        """The fold's one loop: rows and runs, their `seq` and lines counting from `seq0` and `line0`. Quiet records
        in a row on one connection tick once (each one, when an observer watches)."""
        with steady_gc():
            self._loop(entries, seq0, line0)

    def _loop(self, entries: Iterable[Entry], seq0: int, line0: int) -> None:
        state, by_dir, observer, stepped = self.state, self.by_dir, self.observer, TRANSITION_TYPES
        conns = state.conns
        # The entry classes are the reader's (interpreted) module's: bound once, not looked up by name per entry.
        quiet_run, audio_run_class, quiet_rows = QuietRun, AudioRun, QuietRows
        quiet: Connection | None = None  # the connection of the current run of quiet records, its count, last clock
        count, last_t, last_line = 0, 0.0, 0
        for entry in entries:
            kind = type(entry)
            if kind is quiet_run:
                k, line, t, n, direction = cast(QuietRun, entry)
                by_dir[direction] += k
                conn = conns[n]
                if conn is quiet:
                    count += k
                    last_t, last_line = t, line + line0
                    continue
                if quiet is not None:
                    tick(state, quiet, last_t, last_line, count)
                quiet, count, last_t, last_line = conn, k, t, line + line0
                continue
            if kind is audio_run_class:
                if quiet is not None:
                    tick(state, quiet, last_t, last_line, count)
                    quiet = None
                self._audio(entry, seq0, line0)  # type: ignore[arg-type]
                continue
            if kind is quiet_rows:  # only for an observer, which sees each record
                self._quiet_rows(entry, seq0, line0)  # type: ignore[arg-type]
                continue
            row: Row = entry  # type: ignore[assignment]
            seq, line, t, direction, n, event, etype, raw_type = row
            by_dir[direction] += 1
            known = conns.get(n)
            if known is not None and etype not in stepped[direction]:
                conn = known
                if observer is not None:
                    tick(state, conn, t, line + line0)
                    observer(entry, NO_FACTS, state)  # type: ignore[arg-type]
                    continue
                if conn is quiet:
                    count += 1
                    last_t, last_line = t, line + line0
                    continue
                if quiet is not None:
                    tick(state, quiet, last_t, last_line, count)
                quiet, count, last_t, last_line = conn, 1, t, line + line0
                continue
            if quiet is not None:
                tick(state, quiet, last_t, last_line, count)
                quiet = None
            if seq0 or line0:  # a digest's rows count from the part's start (new ints only then)
                seq, line = seq + seq0, line + line0
            facts = self._step(Record(seq, line, t, direction, n, event, etype, raw_type))
            if observer is not None:
                observer(entry, facts, state)  # type: ignore[arg-type]
        if quiet is not None:
            tick(state, quiet, last_t, last_line, count)

    def _step(self, rec: Record) -> Sequence[Fact]:
        """`step` one record and hand its facts to the rules; a record `step` raised on is skipped and reported."""
        try:
            _, facts = step(self.state, rec)
        except Exception as e:
            self.step_failed(rec.line, e)
            return NO_FACTS
        if type(facts) is list:  # (else `NO_FACTS`: none)
            self.dispatch.feed(facts, self.state)
        return facts

    def _quiet_rows(self, run: QuietRows, seq0: int, line0: int) -> None:
        """Fold quiet records for the observer: through its `quiet` when it has one (the clocks move once, as for a
        `QuietRun`, and it is given all of them at once), else one by one as their rows would be (their event left
        empty)."""
        count, line, t, n, direction, times, raw_types, seq = run
        state, observer, ga = self.state, self.observer, _GA_NAMES
        assert observer is not None
        self.by_dir[direction] += count
        conn = state.conns[n]
        first = line - count + 1
        seq += seq0
        quiet = getattr(observer, "quiet", None)
        if quiet is not None:
            tick(state, conn, t, line + line0, count)
            quiet(seq, first, times, direction, n, [ga[raw] for raw in raw_types])
            return
        for k in range(count):
            t, raw = times[k], raw_types[k]
            tick(state, conn, t, first + k + line0)
            observer((seq + k, first + k, t, direction, n, _NO_EVENT, ga[raw], raw), NO_FACTS, state)

    def _audio(self, run: AudioRun, seq0: int, line0: int) -> None:
        """Fold a run of audio deltas, its seqs and lines counting from `seq0` and `line0`."""
        count, line, t, n, direction, item_id, n_bytes, times, sizes, seq = run
        state = self.state
        self.by_dir[direction] += count
        if not state.awaiting:
            audio_run(state, state.conns[n], t, line + line0, count, item_id, n_bytes)
            return
        # A connection awaits its pairing, which any of these records may settle: each goes through `step`, its
        # payload as a byte count (as `digest` passes one on).
        etype = _AUDIO_TYPES[direction]
        first = line + line0 - count + 1
        for k in range(count):
            event = {"type": etype, "item_id": item_id, "delta": "", "rtrace_audio_bytes": sizes[k]}
            self._step(Record(seq + seq0 + k, first + k, times[k], direction, n, event, etype, etype))

    def records(self, records: Iterable[Record]) -> None:
        """Fold `Record`s (tests, a trace built in memory): each through `step`, no fast path (the reference the
        fast path is compared with)."""
        by_dir = self.by_dir
        for rec in records:
            by_dir[rec.dir] += 1
            self._step(rec)

    def step_failed(self, line: int, e: BaseException) -> None:
        """`reducer.step` raised on the record at `line` (a bug: `step` checks what it reads): the record is
        skipped and reported, the trace goes on."""
        self.dispatch.failures.append(Failure(line, "fold", _error_text(e)))

    def findings(self) -> list[Finding]:
        """End of the trace: every open connection ends, each rule finishes; the findings in report order."""
        return self.dispatch.finish(self.state)

    def report(
        self, path: str, events: int, problems: list[Problem], problem_count: int, header: Header | None
    ) -> TraceReport:
        state = self.state
        findings = self.findings()
        first = state.first_t or 0.0
        failures = self.dispatch.failures
        found = field_problems(path, state)
        if found:
            problems = sorted(problems + found, key=lambda p: p.line)
        problems = [f.problem(path) for f in failures] + problems
        problem_count += state.field_problem_count
        duration = max(0.0, state.last_t - first)
        untimed = events > 1 and duration == 0.0
        return TraceReport(
            path=path,
            events=events,
            connections=len(state.conns),
            duration=duration,
            findings=[without_secrets(f) for f in findings],
            problems=[
                dataclasses.replace(p, message=scrub_text(p.message), excerpt=scrub_text(p.excerpt)) for p in problems
            ],
            problem_count=problem_count + len(failures),
            header=header,
            by_dir={d: count for d, count in self.by_dir.items() if count},
            failed_rules=tuple(dict.fromkeys(f.rule for f in failures)),
            not_judged=blind_notes((type(r) for r in self.dispatch.active), state, header, untimed),
        )



def _dotted(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _as_written(rec: Record) -> str:
    """The record as rtrace writes it, its audio payload empty (as `digest` passes it on): where a column is
    counted when the line itself cannot be read again (stdin, a remote file)."""
    event = rec.event
    key = AUDIO_FIELDS.get(rec.type)
    if key is not None and key in event:
        event = {**event, key: ""}
    return dumps_record({"t": rec.t, "dir": rec.dir, "conn": rec.conn, "event": event}).decode()


def field_problems(path: str, state: TraceState) -> list[Problem]:
    """The fields `reducer.step` read as absent because of their type, as problems at their line and column (the
    column from the file's line when it can be read again, else from the record written back as rtrace writes it)."""
    if not state.field_problems:
        return []
    lines = lines_at(path, {line for line, *_ in state.field_problems})
    out = []
    for line, where, expected, rec in state.field_problems:
        value: Any = rec.event
        for p in where:
            value = value[p]
        text = lines.get(line)
        col = None
        if text is not None:
            col = column_of(text, ("event", *where)) or column_of(text, where)
        excerpt = "" if col is None or text is None else printable(text[max(0, col - 41) : col + 39], 80)
        if col is None:
            col = column_of(_as_written(rec), ("event", *where)) or 1
        message = f"`{_dotted(where)}` of {rec.type} is {json_kind(value)}, expected {expected}; read as absent"
        out.append(Problem(path, line, col, message, excerpt=excerpt))
    out.sort(key=lambda p: (p.line, p.col))
    return out


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


def digest(rows: Iterable[Row]) -> Iterator[Entry]:
    """What a `Fold` needs of `rows` read apart from the records before them (`parallel.analyze_split`): each record
    that may have a transition, whole, and each run of quiet records on one connection and direction, as a
    `QuietRun` (an `AudioRun` of the reader's passes as it is).

    The first record of each connection stays whole (only the fold knows whether the connection is new). Audio
    payloads become their byte count (`rtrace_audio_bytes`, which the reducer reads in their place), so what
    crosses between processes is small.
    """
    entries = getattr(rows, "entries", None)
    # Typed as entries, not rows: compiled code checks each item against the loop variable's type.
    source: Iterable[Entry] = rows if entries is None else entries(TRANSITIONS, AUDIO_DELTAS)  # fast path
    transitions = TRANSITIONS
    seen: set[int] = set()
    # The current run of quiet records: its count, the line and `t` of its last, its connection and direction.
    count, last_line, last_t, run_conn = 0, 0, 0.0, 0
    run_dir: Direction = "meta"
    for entry in source:
        kind = type(entry)
        if kind is QuietRun:  # a run the reader took joins the current run
            k, line, t, n, direction = cast(QuietRun, entry)
            if count and run_conn == n and run_dir == direction:
                count += k
                last_line, last_t = line, t
                continue
            if count:
                yield QuietRun(count, last_line, last_t, run_conn, run_dir)
            count, last_line, last_t, run_conn, run_dir = k, line, t, n, direction
            continue
        if kind is AudioRun:
            if count:
                yield QuietRun(count, last_line, last_t, run_conn, run_dir)
                count = 0
            yield entry
            continue
        row = cast(Row, entry)
        _, line, t, direction, n, _, etype, _ = row
        if n in seen and (direction, etype) not in transitions:
            if count and run_conn == n and run_dir == direction:
                count += 1
                last_line, last_t = line, t
                continue
            if count:
                yield QuietRun(count, last_line, last_t, run_conn, run_dir)
            count, last_line, last_t, run_conn, run_dir = 1, line, t, n, direction
            continue
        if count:
            yield QuietRun(count, last_line, last_t, run_conn, run_dir)
            count = 0
        seen.add(n)
        yield without_audio(row)
    if count:
        yield QuietRun(count, last_line, last_t, run_conn, run_dir)


def without_audio(row: Row) -> Row:
    """`row` with its audio payload, if any, replaced by its byte count (`rtrace_audio_bytes`, which the reducer
    reads in its place): the same fold, a small row to keep or send."""
    event, etype = row[5], row[6]
    key = AUDIO_FIELDS.get(etype)
    if key is None or type(event.get(key)) is not str:
        return row
    counted = event.get("rtrace_audio_bytes")
    if counted is not None and type(counted) is not int:
        return row  # a count of the wrong type: the reducer's checks report it
    slim = dict(event)
    slim[key] = ""
    if type(slim.get("rtrace_audio_bytes")) is not int:
        slim["rtrace_audio_bytes"] = audio_bytes(event[key])
    return (*row[:5], slim, *row[6:])


def analyze_path(
    path: str | os.PathLike[str],
    config: Config | None = None,
    rules: Sequence[type[Rule]] = RULES,
    observer: Observer | None = None,
    **reader_kw: Any,
) -> TraceReport:
    """Analyze one trace file. Raises `loader.UnreadableInput` only when the file cannot be opened."""
    with TraceReader.open(path, **reader_kw) as reader:
        report = analyze_reader(reader, config, rules, observer)
        report.line_marks = reader.marks or ()
        return report


def analyze_reader(
    reader: TraceReader,
    config: Config | None = None,
    rules: Sequence[type[Rule]] = RULES,
    observer: Observer | None = None,
) -> TraceReport:
    """Analyze the trace `reader` reads (a file, stdin, an fsspec stream): `analyze_records` over the reader's
    records, on the fast path (`Fold`). With an `observer`, it watches the same fold (the HTML report's page data
    comes from the analysis itself, not from a second reading)."""
    fold = Fold(config or Config(), rules, observer)
    fold.rows(reader.rows())
    report = fold.report(reader.path, reader.count, reader.problems, reader.problem_count, reader.header)
    if reader.unusable is not None:  # empty, or not text: said once, rather than "no findings" or a bad line each
        report.unreadable = f"{reader.path}: {reader.unusable}"
    return report


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
