"""One bug, one entry: what a finding of a hunt's run is about (`BugKey`, `bug_key`): its rule, the kinds of the
items it names, the kinds of the faults that acted (`acted`), the class of the client's reaction (`reaction`) -
never its lines or ids; and which findings of one run are one defect (`linked`: they name one item or call).
Pure: reads records, writes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ...core.partition import Partition
from ..faults.schedule import Schedule
from .search import event_spec

# -- what a finding is about -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, order=True)
class BugKey:
    """What a finding is about (see the module docstring): two findings with one key are one bug."""

    rule: str
    items: tuple[str, ...]
    faults: tuple[str, ...]
    reaction: str
    #: Where on the client's surface the first fault acted (`rtrace.net.hunt.bugs.POINTS`; "" when not read).
    point: str = ""

    def text(self) -> str:
        items = ",".join(self.items) or "-"
        where = f" at the {self.point}" if self.point else ""
        return f"{self.rule} on {items} under {' + '.join(self.faults) or 'no fault'}{where}, client {self.reaction}"

    @property
    def finding(self) -> tuple[str, tuple[str, ...]]:
        """What the shrinker keeps: the rule and the items, whatever the faults and the reaction."""
        return (self.rule, self.items)


#: The rule id of the findings "the client did not survive this fault".
SURVIVAL = "client-did-not-survive"


def item_kinds(ids: Mapping[str, Sequence[str]], kinds: dict[str, str]) -> tuple[str, ...]:
    """The kinds (item types, a message's role) of the items a finding names (`Finding.ids`), from `kinds` (item id
    -> kind, as `item_kinds_of` reads them from the trace); a finding naming only calls is about function calls."""
    found = {kinds[i] for i in ids.get("items", ()) if i in kinds}
    if not found and ids.get("call_ids"):
        found.add("function_call")
    return tuple(sorted(found))


def _items_in(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every item with an id a trace's events carry: an event's `item` (creates, adds) and a `response.done`'s
    outputs."""
    for rec in records:
        event = rec.get("event")
        if not isinstance(event, dict):
            continue
        response = event.get("response")
        outputs = response.get("output") if isinstance(response, dict) else None
        for item in [event.get("item"), *(outputs if isinstance(outputs, list) else ())]:
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                yield item


def item_kinds_of(records: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Item id -> kind of every item a trace's events carry (a message's kind is its role)."""
    kinds: dict[str, str] = {}
    for item in _items_in(records):
        kind = item.get("type")
        if kind == "message" and isinstance(item.get("role"), str):
            kind = item["role"]
        if isinstance(kind, str):
            kinds.setdefault(item["id"], kind)
    return kinds


def item_calls_of(records: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Item id -> call id of every function call and function call output a trace's events carry (an output is
    about its call: `linked` counts the two as one thing)."""
    calls: dict[str, str] = {}
    for item in _items_in(records):
        if isinstance(item.get("call_id"), str):
            calls.setdefault(item["id"], item["call_id"])
    return calls


def linked(ids: Sequence[Mapping[str, Sequence[str]]], calls: Mapping[str, str] | None = None) -> list[list[int]]:
    """The findings of one run (their `Finding.ids`, by index) grouped by what they name: two are in one group when
    they name one id of one kind (an item, a call, a client event, a response), an item counting as its call too
    (`calls`, item id -> call id: a deleted output and its unanswered call are about one call); the relation is
    closed transitively. Groups and their members in input order; every index in exactly one group. Findings of
    one group are one defect seen by several rules (a stale delete and the output it deleted)."""
    partition = Partition(len(ids))
    owner: dict[tuple[str, str], int] = {}
    for i, named in enumerate(ids):
        names = {(kind, str(v)) for kind, values in named.items() for v in values}
        names |= {("call_ids", calls[v]) for v in named.get("items", ()) if calls and v in calls}
        for name in sorted(names):
            partition.join(i, owner.setdefault(name, i))
    return partition.groups()


def reaction(
    records: Sequence[dict[str, Any]], limit: int = 6, turns: int | None = None
) -> tuple[str, tuple[str, ...]]:
    """What the client did after the first fault note of a trace: (its class, its first `limit` actions). With
    `turns`, only the notes of the schedule's own turns count (script turns 1 to `turns`, as `acted` reads them:
    the faults of a user's script the schedule runs on are the client's world, not the fault it reacts to).

    Classes: `reconnected` (a new connection after the one the fault closed), `gave up` (the faulted connection
    closed and none after it: by the server - the fault - or by the client with nothing sent after the fault),
    `continued` (no close, or the client went on after a fault that did not close and closed at its own end).
    The actions are the specs of the client events after the fault, a new connection as `connect`."""
    start = next((i for i, r in enumerate(records) if _fault_note(r, turns) is not None), None)
    if start is None:
        return "continued", ()
    faulted = records[start].get("conn")
    closed = False
    gave_up = False
    reconnected = False
    sent = False  # a client event on the faulted connection after the fault, before it closed
    actions: list[str] = []
    for rec in records[start + 1 :]:
        etype = _etype(rec)
        if rec.get("dir") == "meta" and etype == "connection.closed" and rec.get("conn") == faulted and not closed:
            closed = True
            event = rec.get("event")
            gave_up = not sent or (isinstance(event, dict) and event.get("by") != "client")
        elif rec.get("dir") == "meta" and etype == "connection.opened":
            reconnected = reconnected or closed or rec.get("conn") != faulted
            if len(actions) < limit:
                actions.append("connect")
        elif rec.get("dir") == "client":
            sent = sent or (rec.get("conn") == faulted and not closed)
            if len(actions) < limit:
                actions.append(event_spec(rec["event"], "client"))
    kind = "reconnected" if reconnected else ("gave up" if gave_up else "continued")
    return kind, tuple(actions)


def _etype(rec: dict[str, Any]) -> str:
    event = rec.get("event")
    return str(event.get("type")) if isinstance(event, dict) else ""


def _fault_note(rec: dict[str, Any], turns: int | None = None) -> int | None:
    """The turn number of a `fault.injected` note (0: a note of no script turn), None for any other record; with
    `turns`, None also for a note of no script turn from 1 to `turns`."""
    event = rec.get("event")
    if rec.get("dir") != "meta" or not isinstance(event, dict) or event.get("type") != "fault.injected":
        return None
    spec = str(event.get("spec", ""))
    scripted = event.get("fault", "script") == "script" and spec.startswith("turn ") and spec[5:].isdigit()
    n = int(spec[5:]) if scripted else 0
    if turns is not None and not 1 <= n <= turns:
        return None
    return n


def acted(schedule: Schedule, records: Iterable[dict[str, Any]]) -> tuple[str, ...]:
    """The signatures of the faults of `schedule` that acted in its run: latency always (it delays every event it
    names), a turn when its note is in the trace (`fault = "script"`, `spec = "turn N"`, N its place in
    `turn_faults`)."""
    turns = schedule.turn_faults()
    fired = {n - 1 for rec in records if (n := _fault_note(rec, len(turns))) is not None}
    out = {f.signature for f in schedule.faults if f.kind in ("latency", "jitter")}
    out |= {turns[i].signature for i in fired if i < len(turns)}
    return tuple(sorted(out))


def bug_key(
    rule: str, ids: Mapping[str, Sequence[str]], kinds: dict[str, str], faults: tuple[str, ...], reacted: str
) -> BugKey:
    """The key of a finding of `rule` (its `ids`) in a run where `faults` acted and the client `reacted`."""
    return BugKey(rule, item_kinds(ids, kinds), faults, reacted)


__all__ = [
    "SURVIVAL", "BugKey", "acted", "bug_key", "item_calls_of", "item_kinds", "item_kinds_of", "linked", "reaction",
]  # fmt: skip
