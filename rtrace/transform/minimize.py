"""Minimal reproducers (`rtrace minimize TRACE --rule SLUG -o min.jsonl`): the fewest records of a trace in which the
rule still reports a finding, by delta debugging.

Hierarchical delta debugging: Zeller's ddmin over the connections, then over the turns of those kept (a turn is a
connection's records up to and including a `response.done`), then over single units. A *unit* is what must stay
or go together for the trace to remain a valid conversation: a client change with the answers the reducer joined
to it (`ChangeAnswered`, a `ServerError` with its cause), any other record alone. A unit may *need* another: an
event of a response needs its `response.created`, an item's `conversation.item.done` (and its transcription)
needs the item's `conversation.item.added`; a candidate drops a unit whose needs are gone. Connection notes
(`connection.opened`, `connection.closed`) stay with any record of their connection. Two shortcuts come first,
each kept only when the finding holds: the records up to the line at which the finding became certain (a finding
depends on nothing after it), and the finding's own witness lines with what they need.

The test folds the candidate with that one rule alone (rules do not see each other), audio payloads replaced by
their byte counts, so the trace is read once; told to `keep` other rules (a hunt's entry: one defect seen by
several rules), it folds every rule and holds when those still report and no rule reports what the whole trace
did not (the reproducer keeps its finding set). Pure: reads the trace, writes only where `write` is told.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any

from ..core.facts import ChangeAnswered, Fact, ServerError
from ..core.loader import Row, TraceReader, UnreadableInput
from ..core.partition import Partition
from ..core.state import TraceState
from ..core.trace import dumps_header, dumps_record
from ..engine.fold import Fold, without_audio
from ..rules import RULES
from ..rules.base import Config, Finding, Rule

#: Connection notes: kept whenever another record of their connection is.
NOTES = ("connection.opened", "connection.closed")
#: A server event that names its item and needs that item's `conversation.item.added` before it.
_ITEM_EVENTS = (
    "conversation.item.done",
    "conversation.item.input_audio_transcription.delta",
    "conversation.item.input_audio_transcription.completed",
    "conversation.item.input_audio_transcription.failed",
)


class NothingToMinimize(ValueError):
    """The rule reports no finding in the trace."""


@dataclasses.dataclass
class Minimized:
    """The smallest trace found: the original line numbers of the records kept, in order."""

    path: str
    rule: type[Rule]
    #: Records in the original trace (lines that are records), and the lines kept of them.
    records: int
    lines: list[int]
    #: The finding as the original trace has it (the one the reproducer was made for).
    finding: Finding
    #: How many candidates were folded.
    tests: int


class _Trace:
    """A trace in memory for minimizing: its rows (audio slimmed), the units and what each needs."""

    def __init__(self, reader: TraceReader) -> None:
        answers: list[tuple[int, int]] = []  # (change line, answer line)

        def observe(row: Row, facts: Sequence[Fact], state: TraceState) -> None:
            for fact in facts:
                if isinstance(fact, ChangeAnswered):
                    answers.append((fact.change.line, fact.rec.line))
                elif isinstance(fact, ServerError) and fact.cause is not None:
                    answers.append((fact.cause.line, fact.rec.line))

        rows: list[Row] = []

        def slim(source: Iterable[Row]) -> Iterable[Row]:
            for row in source:
                row = without_audio(row)
                rows.append(row)
                yield row

        Fold(Config(), (), observe).rows(slim(reader.rows()))
        self.rows = rows
        self.header = reader.header
        index = {row[1]: i for i, row in enumerate(rows)}
        self.index = index
        # Units: union-find over rows joined by an answer; notes apart.
        partition = Partition(len(rows))
        links = [(index.get(a), index.get(b)) for a, b in answers]
        links += _response_ends(rows)
        for a, b in links:
            if a is not None and b is not None:
                partition.join(a, b)
        self.notes: dict[int, list[int]] = {}
        members: list[int] = []
        for i, row in enumerate(rows):
            if row[3] == "meta" and row[6] in NOTES:
                self.notes.setdefault(row[4], []).append(i)
            else:
                members.append(i)
        self.units: list[list[int]] = partition.groups(members)  # in the order of their first row
        unit_of = [0] * len(rows)
        for u, members in enumerate(self.units):
            for i in members:
                unit_of[i] = u
        self.unit_of = unit_of
        self.needs = self._needs()

    def _needs(self) -> list[set[int]]:
        """For each unit, the units it needs (see the module docstring)."""
        needs: list[set[int]] = [set() for _ in self.units]
        created: dict[tuple[int, str], int] = {}  # (conn, response id) -> row of its response.created
        added: dict[tuple[int, str], int] = {}  # (conn, item id) -> row of its latest conversation.item.added
        output_of: dict[tuple[int, str], str] = {}  # (conn, item id) -> the response it is an output of
        for i, (_, _, _, direction, conn, event, etype, _) in enumerate(self.rows):
            if direction != "server":
                continue
            anchor: int | None = None
            item = event.get("item")
            item_id = item.get("id") if isinstance(item, dict) else event.get("item_id")
            if etype == "conversation.item.added":
                if isinstance(item_id, str):
                    added[(conn, item_id)] = i
                    rid = output_of.get((conn, item_id))
                    anchor = created.get((conn, rid)) if rid is not None else None
            elif etype in _ITEM_EVENTS:
                anchor = added.get((conn, item_id)) if isinstance(item_id, str) else None
            elif etype.startswith("response."):
                response = event.get("response")
                rid = response.get("id") if isinstance(response, dict) else event.get("response_id")
                if not isinstance(rid, str):
                    continue
                if etype == "response.created":
                    created[(conn, rid)] = i
                    continue
                anchor = created.get((conn, rid))
                if etype == "response.output_item.added" and isinstance(item_id, str):
                    output_of[(conn, item_id)] = rid
            if anchor is not None and self.unit_of[anchor] != self.unit_of[i]:
                needs[self.unit_of[i]].add(self.unit_of[anchor])
        return needs

    def close(self, units: Iterable[int]) -> list[int]:
        """`units` without those whose needs are not all kept (repeated until none is), in order."""
        kept = set(units)
        while True:
            lacking = {u for u in kept if not self.needs[u] <= kept}
            if not lacking:
                return sorted(kept)
            kept -= lacking

    def expand(self, units: Iterable[int]) -> list[int]:
        """`units` with everything they need, transitively."""
        kept, todo = set(), list(units)
        while todo:
            u = todo.pop()
            if u not in kept:
                kept.add(u)
                todo.extend(self.needs[u])
        return sorted(kept)

    def rows_of(self, units: Iterable[int]) -> list[int]:
        """The row indices a candidate of `units` writes: their records and their connections' notes, in order."""
        picked = [i for u in units for i in self.units[u]]
        conns = {self.rows[i][4] for i in picked}
        picked += [i for conn in conns for i in self.notes.get(conn, ())]
        picked.sort()
        return picked


class _Search:
    """The test of candidates: the rule alone, folded over the candidate's records as a trace of its own."""

    def __init__(
        self, trace: _Trace, rule: type[Rule], config: Config, keep: frozenset[str] | None = None,
        allowed: frozenset[str] | None = None,
    ) -> None:  # fmt: skip
        self.trace = trace
        self.rule = rule
        self.config = config
        #: With `keep`: the rule ids that must report (`rule`'s among them) and those that may (`allowed`).
        self.keep = keep
        self.allowed = allowed
        self.tests = 0
        self._seen: dict[tuple[int, ...], bool] = {}
        #: The header of the written trace is line 1; the records follow.
        self.first_line = 2

    def holds(self, units: Iterable[int]) -> bool:
        picked = tuple(self.trace.rows_of(self.trace.close(units)))
        known = self._seen.get(picked)
        if known is not None:
            return known
        self.tests += 1
        rows = self.trace.rows
        first = self.first_line
        fold = Fold(self.config, (self.rule,) if self.keep is None else RULES)
        fold.rows((k, k + first, *rows[i][2:]) for k, i in enumerate(picked))
        if self.keep is None:
            result = bool(fold.findings())
        else:
            fired = {f.rule for f in fold.findings()}
            result = self.keep <= fired and (self.allowed is None or fired <= self.allowed)
        self._seen[picked] = result
        return result


def _response_ends(rows: list[Row]) -> list[tuple[int | None, int | None]]:
    """(row of `response.created`, row of its `response.done`) of each response: a response that began must end,
    or the reproducer would also hold an orphaned generation."""
    created: dict[tuple[int, str], int] = {}
    pairs: list[tuple[int | None, int | None]] = []
    for i, row in enumerate(rows):
        if row[3] != "server" or row[6] not in ("response.created", "response.done"):
            continue
        response = row[5].get("response")
        rid = response.get("id") if isinstance(response, dict) else None
        if not isinstance(rid, str):
            continue
        if row[6] == "response.created":
            created[(row[4], rid)] = i
        elif (row[4], rid) in created:
            pairs.append((created[(row[4], rid)], i))
    return pairs


def ddmin(items: list[list[int]], holds: Callable[[list[int]], bool]) -> list[list[int]]:
    """Zeller's ddmin over `items` (each a list of units; `holds(units)` on all of them is True): a 1-minimal
    sublist, in order. At each granularity, each chunk alone is tried, then each chunk is dropped in turn from what
    is left (the partition is kept, so one pass may drop several); then the chunks are halved."""

    def units(chosen: list[list[int]]) -> list[int]:
        return [u for item in chosen for u in item]

    n = 2
    while len(items) >= 2:
        size = len(items)
        chunks = [items[size * k // n : size * (k + 1) // n] for k in range(n)]
        alone = next((chunk for chunk in chunks if holds(units(chunk))), None)
        if alone is not None:
            items, n = alone, 2
            continue
        dropped = False
        k = 0
        while k < len(chunks) and len(chunks) > 1:
            rest = chunks[:k] + chunks[k + 1 :]
            if holds(units([item for chunk in rest for item in chunk])):
                chunks, dropped = rest, True
            else:
                k += 1
        items = [item for chunk in chunks for item in chunk]
        if not dropped and n >= len(items):
            break
        n = min(len(items), 2 * len(chunks))
    return items


def minimize(
    path: str | os.PathLike[str],
    rule: type[Rule],
    config: Config | None = None,
    shortcuts: bool = True,
    keep: Iterable[str] | None = None,
    **reader_kw: Any,
) -> Minimized:
    """The smallest sub-trace of `path` in which `rule` still reports a finding. Raises `NothingToMinimize` when it
    reports none in the whole trace (and `loader.UnreadableInput` when the file cannot be opened). `shortcuts`:
    try the cut at the finding's line and its witness first (False: delta debugging alone, for benchmarks).
    `keep`: rule ids that must still report too (those the whole trace reports), and then no rule may report in
    the reproducer what it does not report in the whole trace: the finding set is kept."""
    config = config or Config()
    with TraceReader.open(path, **reader_kw) as reader:
        trace = _Trace(reader)
    if reader.unusable is not None:
        raise UnreadableInput(f"{os.fspath(path)}: {reader.unusable}")
    search = _Search(trace, rule, config)
    if keep is not None:
        whole = Fold(config, RULES)
        whole.rows(trace.rows)
        allowed = frozenset(f.rule for f in whole.findings())
        search = _Search(trace, rule, config, frozenset({rule.id, *keep}) & allowed | {rule.id}, allowed)
    everything = list(range(len(trace.units)))
    # The finding as the original has it, lines as the original numbers them.
    original = Fold(config, (rule,))
    original.rows(trace.rows)
    found = original.findings()
    if not found:
        raise NothingToMinimize(f"{os.fspath(path)}: {rule.id} {rule.slug} reports nothing here")
    finding = found[0]
    current = everything
    # Shortcut 1: nothing after the line at which the finding became certain.
    upto = trace.index.get(finding.at_line) if shortcuts else None
    if upto is not None:
        cut = [u for u in current if trace.units[u][0] <= upto]
        if len(cut) < len(current) and search.holds(cut):
            current = cut
    # Shortcut 2: the witness lines and what they need.
    seeds = {trace.unit_of[trace.index[w.line]] for w in finding.witness if w.line in trace.index and shortcuts}
    seed = trace.expand(u for u in seeds if u in set(current))
    if seed and len(seed) < len(current) and search.holds(seed):
        current = seed
    current = trace.close(current)
    # Connections, then turns, then units.
    for level in (_by_connection, _by_turn, _by_unit):
        current = [u for item in ddmin(level(trace, current), search.holds) for u in item]
        current = trace.close(current)
    lines = [trace.rows[i][1] for i in trace.rows_of(current)]
    return Minimized(os.fspath(path), rule, len(trace.rows), lines, finding, search.tests)


def _by_connection(trace: _Trace, units: list[int]) -> list[list[int]]:
    by: dict[int, list[int]] = {}
    for u in units:
        by.setdefault(trace.rows[trace.units[u][0]][4], []).append(u)
    return [by[conn] for conn in sorted(by)]


def _by_turn(trace: _Trace, units: list[int]) -> list[list[int]]:
    """Each connection's units cut after every unit holding a `response.done`."""
    turns: list[list[int]] = []
    open_turn: dict[int, list[int]] = {}
    for u in units:
        conn = trace.rows[trace.units[u][0]][4]
        turn = open_turn.get(conn)
        if turn is None:
            turn = open_turn[conn] = []
            turns.append(turn)
        turn.append(u)
        if any(trace.rows[i][6] == "response.done" for i in trace.units[u]):
            del open_turn[conn]
    return turns


def _by_unit(trace: _Trace, units: list[int]) -> list[list[int]]:
    return [[u] for u in units]


def write(result: Minimized, out: IO[bytes], **reader_kw: Any) -> int:
    """Write the reproducer: a header (the original's fields, and where the lines came from), then the kept
    records as native lines, re-read whole from the original. Returns the number of lines written."""
    keep = set(result.lines)
    with TraceReader.open(result.path, **reader_kw) as reader:
        rows = iter(reader.rows())
        first = next(rows, None)
        fields = dict(reader.header.fields) if reader.header else {}
        fields["minimized"] = {
            "from": os.path.basename(result.path),
            "rule": result.rule.id,
            "slug": result.rule.slug,
            "lines": result.lines,
        }
        out.write(dumps_header(fields))
        written = 1
        for row in itertools.chain([first] if first is not None else [], rows):
            if row[1] in keep:
                _, _, t, direction, conn, event, _, _ = row
                out.write(dumps_record({"t": t, "dir": direction, "conn": conn, "event": event}))
                written += 1
    return written


__all__ = ["Minimized", "NothingToMinimize", "ddmin", "minimize", "write"]
