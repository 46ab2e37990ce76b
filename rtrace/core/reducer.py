"""`step(state, record) -> (state, facts)`: one trace record folded into the conversation model.

Ground rules:

* The transitions are a table keyed by (direction, event type). An event with no entry changes nothing and
  yields no fact (deltas, audio appends, unknown types): that keeps the hot path to one dict lookup.
* A fact is data that says what a record *meant* (a change confirmed, an item added by a response, a response
  left open). Rules (`rtrace.rules`) read facts; they never re-derive state from raw events.
* Answers are joined to the client change they answer in this order (docs/protocol.md 2.1, 1.7): by item id; for
  errors by `error.event_id`, then by ids quoted in the error message, then by the field the error names
  (`param`) holding the value it quotes, then by arrival order (the server handles a connection's events first
  come, first served; a schema error comes ahead of the acks of earlier events). Quoted ids, fields and order
  only consider the event types the error's code can answer (`catalog.error_answers`): a session-level error
  (`session_expired`) answers none.
* A field is read only with the JSON type the protocol gives it (`core.fields.FIELDS`, checked by
  `fields.checked` before a handler runs): a field of another type is an input problem
  (`TraceState.field_problems`, reported with its line and column) and is read as absent, so the rest of the
  event is folded and no rule ever meets a value of an unexpected type.
* The state is updated in place and returned (an hour-long call is a million steps); `step` does no I/O, reads
  no clock and holds nothing outside `state`. Every consumer folds through `rtrace.engine.fold.Fold`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any, Final

from .answers import (
    _s_arguments_done,
    _s_audio_delta,
    _s_cleared,
    _s_committed,
    _s_error,
    _s_item_added,
    _s_item_deleted,
    _s_item_done,
    _s_item_retrieved,
    _s_item_truncated,
    _s_output_item_added,
    _s_output_item_done,
    _s_response_created,
    _s_response_done,
    _s_session,
)
from .conversation import Item, item_from_event, item_head
from .describe import describe
from .facts import (
    NO_FACTS,
    ChangeSent,
    ConnClosed,
    ConnOpened,
    Fact,
    FaultInjected,
    LocalGeneration,
    LocalSnapshot,
    Reconnected,
    SentIntoClosing,
)
from .fields import FIELDS, Check, Spec, check_of, checked, holds
from .pending import NAMING_LIMIT, Change
from .state import Connection, TraceState
from .trace import DIRECTIONS, Record

# -- the fold ---------------------------------------------------------------------------------------------

Handler = Callable[[TraceState, Connection, Record, list[Fact]], None]

_CREATE: Final = "conversation.item.create"


def step(state: TraceState, rec: Record) -> tuple[TraceState, list[Fact] | tuple[Fact, ...]]:
    """Fold one record into `state` (in place) and return it with the facts the record revealed."""
    if state.first_t is None:
        state.first_t = rec.t
    conn = state.conns.get(rec.conn)
    rtype = rec.type
    steps = _STEPS_BY_DIR.get(rec.dir)
    found = steps.get(rtype) if steps is not None else None
    if conn is not None and (conn.ended_by is None or rtype != "connection.opened" or rec.dir != "meta"):
        if found is None:
            tick(state, conn, rec.t, rec.line)
            return state, NO_FACTS
        facts: list[Fact] = []
        if state.awaiting:
            _overdue(state, rec, facts)
    else:  # a connection opens (a new ordinal, or one that ended opened again)
        facts = []
        if state.awaiting:
            _overdue(state, rec, facts)
        conn = _open(state, rec, facts)
    # `tick`, inline: every record of a transition comes this way.
    t = rec.t
    state.records += 1
    state.last_t = t
    state.last_line = rec.line
    state.current = conn.n
    conn.events += 1
    conn.last_t = t
    if found is None:
        return state, facts if facts else NO_FACTS
    handler, spec, check = found
    if spec is not None and not holds(rec.event, check):
        rec = checked(state, rec, spec)
    handler(state, conn, rec, facts)
    if conn.ended_by is not None:
        _after_close(conn, rec, facts)
    return state, facts


def _after_close(conn: Connection, rec: Record, facts: list[Fact]) -> None:
    """A record on a connection that already ended (a late event, a send on a dead socket): nothing it starts
    can be answered, so a change it sent is indeterminate at once (`SentIntoClosing`) and a response it began is
    orphaned."""
    if conn.pending:
        late = list(conn.pending.values())
        for change in late:
            change.status = "indeterminate"
            change.answer_line = rec.line
            change.answer_t = rec.t
        facts.append(SentIntoClosing(rec, conn, late))
    conn.pending.clear()
    for resp in conn.responses.values():
        if resp.open:
            resp.orphaned = "closed"
    conn.active = None


def tick(state: TraceState, conn: Connection, t: float, line: int, count: int = 1) -> None:
    """`step` for `count` records in a row that have no transition (their (dir, type) is not in `TRANSITIONS`) on
    `conn`, a connection `state` already holds, the last at `t` and `line`: only the clocks and counters move,
    exactly as `step` would move them.

    The hot path of an analysis: most records of a call are audio appends and deltas, and this spares building a
    `Record` for them.
    """
    state.records += count
    state.last_t = t
    state.last_line = line
    state.current = conn.n
    conn.events += count
    conn.last_t = t


def audio_run(state: TraceState, conn: Connection, t: float, line: int, count: int, item_id: str, n_bytes: int) -> None:
    """`step` for `count` audio deltas in a row (`AUDIO_DELTAS`) on `conn`, a connection `state` already holds, for
    item `item_id`, `n_bytes` of audio in all, the last at `t` and `line`, when no connection awaits its pairing
    (`state.awaiting` is empty; else each must go through `step`, which may settle one): the clocks move and the
    item's audio grows, exactly as `step` would do them (they yield no fact, and a connection that ended keeps
    nothing pending and no response open between records, so `_after_close` has nothing to do)."""
    tick(state, conn, t, line, count)
    item = conn.conv.items.get(item_id)
    if item is not None:
        item.audio_bytes += n_bytes


def finish(state: TraceState) -> list[Fact]:
    """End of trace: every connection still open ends here (`trace-end`)."""
    facts: list[Fact] = []
    last = Record(
        state.records, state.last_line, state.last_t, "meta", 0, {"type": "trace.end"}, "trace.end", "trace.end"
    )
    for n in list(state.awaiting):
        _settle(state, n, last, facts)
    for conn in list(state.conns.values()):
        if conn.open:
            _close(state, conn, last, "trace-end", facts)
    return facts


# -- connections ------------------------------------------------------------------------------------------

#: A connection that ends at most this many seconds after a new one opened is the one the new one replaces:
#: a client may open its new socket before the recorder notes the close of the old one (agents-js, 0.25 ms), or
#: hold both for a moment. Past it, the new connection replaces the latest one that ended before it opened.
OVERLAP_WINDOW: Final = 1.0


def _open(state: TraceState, rec: Record, facts: list[Fact]) -> Connection:
    n = rec.conn
    # A connection opened without a `connection.opened` note ends the implicit ones before it: a client-side
    # recording has one socket at a time. Connections opened by a note end only with their close note.
    if state.implicit and state.implicit[0] < n:
        for other in _implicit_before(state, n):
            _close(state, other, rec, "superseded", facts)
    conn = Connection(n=n, opened_line=rec.line, opened_t=rec.t)
    if rec.dir == "meta" and rec.type == "connection.opened":
        _read_opened(conn, rec)
    # The same ordinal opened again after its close (a recorder that reuses ordinals) starts afresh.
    if n not in state.conns:
        state.rank[n] = len(state.rank)
    state.conns[n] = conn
    heapq.heappush(state.live, n)
    if not conn.explicit:
        heapq.heappush(state.implicit, n)
    facts.append(ConnOpened(rec, conn))
    if _lowest_open(state) < n:
        # An older connection is still open: it may be the one this replaces, if it ends soon.
        conn.early = []
        state.awaiting[n] = (conn, state.last_ended)
    else:
        _pair(state, state.last_ended, conn, rec, facts)
    return conn


def _implicit_before(state: TraceState, n: int) -> list[Connection]:
    """The open connections without a `connection.opened` note whose ordinal is below `n`, in the order they were
    first seen (`state.conns`' order), taken off `state.implicit`."""
    found: dict[int, Connection] = {}
    heap = state.implicit
    while heap and heap[0] < n:
        other = state.conns.get(heapq.heappop(heap))
        if other is not None and other.open and not other.explicit:
            found[other.n] = other
    return sorted(found.values(), key=lambda c: state.rank[c.n])


def _lowest_open(state: TraceState) -> float:
    """The lowest ordinal of an open connection (infinity: none is open); ended ones leave `state.live` here."""
    heap = state.live
    while heap:
        other = state.conns.get(heap[0])
        if other is not None and other.open:
            return heap[0]
        heapq.heappop(heap)
    return math.inf


def _read_opened(conn: Connection, rec: Record) -> None:
    conn.explicit = True
    path = rec.event.get("path")
    conn.path = path if isinstance(path, str) else None
    conn.replay_visible = rec.event.get("replay_visible") is not False


def _pair(state: TraceState, previous: Connection | None, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    """`conn` replaces `previous` (when there is one that no connection replaced yet)."""
    early = conn.early or []
    conn.early = None
    if previous is None or previous.replaced_by is not None or previous.n >= conn.n or previous.open:
        return
    previous.replaced_by = conn.n
    conn.replaces = previous.n
    if state.last_ended is previous:
        state.last_ended = None
    facts.append(Reconnected(rec, previous, conn, early))


def _overdue(state: TraceState, rec: Record, facts: list[Fact]) -> None:
    """Settle the waiting connections whose window has passed at `rec`."""
    for n, (conn, _) in list(state.awaiting.items()):
        if rec.t - conn.opened_t > OVERLAP_WINDOW:
            _settle(state, n, rec, facts)


def _settle(state: TraceState, n: int, rec: Record, facts: list[Fact]) -> None:
    """No older connection ended in time: connection `n` replaces the latest one that ended before it opened."""
    conn, fallback = state.awaiting.pop(n)
    _pair(state, fallback, conn, rec, facts)


def _close(state: TraceState, conn: Connection, rec: Record, how: str, facts: list[Fact]) -> None:
    if conn.n in state.awaiting and state.awaiting[conn.n][0] is conn:
        _settle(state, conn.n, rec, facts)
    conn.ended_by = how
    conn.closed_line = rec.line
    conn.closed_t = rec.t
    indeterminate = []
    for change in conn.pending.values():
        change.status = "indeterminate"
        change.answer_line = rec.line
        change.answer_t = rec.t
        indeterminate.append(change)
    conn.pending.clear()
    orphaned = None
    for resp in conn.responses.values():
        if resp.open:
            resp.orphaned = "closed"
            if resp is conn.active or orphaned is None:
                orphaned = resp
    conn.active = None
    facts.append(ConnClosed(rec, conn, indeterminate, orphaned))
    # Nothing can answer or continue a response of a closed connection: keep only the orphaned ones.
    conn.responses = {rid: r for rid, r in conn.responses.items() if r.orphaned}
    conn.done_responses.clear()
    if how == "trace-end":
        return
    # The connection it ends is replaced by the oldest one opened while it was still open, if that was just now.
    for n, (new, _) in list(state.awaiting.items()):
        if new.n > conn.n and rec.t - new.opened_t <= OVERLAP_WINDOW:
            del state.awaiting[n]
            _pair(state, conn, new, rec, facts)
            return
    state.last_ended = conn


def _meta_opened(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    if not conn.explicit:
        _read_opened(conn, rec)


def _meta_closed(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    code = rec.event.get("code")
    reason = rec.event.get("reason")
    conn.close_code = code if isinstance(code, int) else None
    conn.close_reason = reason if isinstance(reason, str) else None
    _close(state, conn, rec, "closed", facts)


#: The actions of a `fault.injected` note whose next `error` on its connection is the fault's (a flag's note names
#: none: its next error, if any, is its own).
_ERRING: Final = frozenset({"error", "expire", ""})


def _meta_fault(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    action = rec.event.get("action")
    conn.fault_pending = (action if isinstance(action, str) else "") in _ERRING
    facts.append(FaultInjected(rec, conn, action if isinstance(action, str) else ""))


# -- client events ----------------------------------------------------------------------------------------


#: A change sent while this many others of its connection wait keeps its event as JSON text (`Change.sent`):
#: the errors that name a field (`Pending.naming`) look at the oldest `NAMING_LIMIT` waiting, so the events
#: of a short queue stay parsed, and a pipeline of 200,000 creates keeps each one's in a quarter of the memory.
SENT_KEPT: Final = NAMING_LIMIT


def _send(
    conn: Connection,
    rec: Record,
    facts: list[Fact],
    item_id: str | None = None,
    item_type: str | None = None,
    role: str | None = None,
    call_id: str | None = None,
    previous_item_id: str | None = None,
    audio_end_ms: int | None = None,
    conversation: str = "auto",
    metadata: dict[str, Any] | None = None,
) -> Change:
    ev = rec.event
    event_id = ev.get("event_id")
    pending = conn.pending
    if type(event_id) is not str:
        event_id = None
    change = Change(
        rec.type,
        conn.n,
        rec.seq,
        rec.line,
        rec.t,
        event_id,
        None,
        item_id,
        item_type,
        role,
        call_id,
        previous_item_id,
        audio_end_ms,
        conversation,
        metadata,
        ev,
    )
    if len(pending) < SENT_KEPT or not change.keep_as_text():
        change.said = describe(rec.type, ev)
    pending.add(change)
    if conn.early is not None:
        conn.early.append(change)
    facts.append(ChangeSent(rec, change))
    return change


def _c_item_create(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    ev = rec.event
    raw_item = ev.get("item")
    # What the change holds of the item (its keys in `Pending`, what the rules read); the rest stays in the event
    # as sent (`Change.sent_item`), and the server's item is made from the server's event.
    item_id: str | None = None
    item_type: str | None = None
    role: str | None = None
    call_id: str | None = None
    if isinstance(raw_item, dict):
        item_id, item_type, role, call_id = item_head(raw_item)
    prev = ev.get("previous_item_id")
    if type(prev) is str and prev:
        # Usually the id of an item held or being created: keep that string, not a copy per create.
        held = conn.conv.items.get(prev)
        if held is not None:
            prev = held.id
        else:
            before = conn.pending.oldest(_CREATE, prev)
            if before is not None and before.item_id is not None:
                prev = before.item_id
    else:
        prev = None
    _send(conn, rec, facts, item_id, item_type, role, call_id, prev)


def _c_item_ref(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    item_id = rec.event.get("item_id")
    item_id = item_id if isinstance(item_id, str) else None
    if rec.type == "conversation.item.truncate":
        end = rec.event.get("audio_end_ms")
        end = end if isinstance(end, int) and not isinstance(end, bool) else None
        _send(conn, rec, facts, item_id, audio_end_ms=end)
    else:
        _send(conn, rec, facts, item_id)


def _c_response_create(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    body = rec.event.get("response")
    conversation = "auto"
    metadata = None
    if isinstance(body, dict):
        if body.get("conversation") == "none":
            conversation = "none"
        md = body.get("metadata")
        metadata = md if isinstance(md, dict) else None
    _send(conn, rec, facts, conversation=conversation, metadata=metadata)


def _c_simple(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    _send(conn, rec, facts)


def _l_conversation(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    raw_items = rec.event.get("items")
    items: list[Item] = []
    if isinstance(raw_items, list):
        for obj in raw_items:
            if isinstance(obj, dict):
                item = item_from_event(obj)
                if item is not None:
                    items.append(item)
    conn.local = items
    conn.local_line = rec.line
    facts.append(LocalSnapshot(rec, conn, items))


def _l_generation(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    rid = rec.event.get("response_id")
    facts.append(
        LocalGeneration(rec, conn, rec.type == "local.generation.opened", rid if isinstance(rid, str) else None)
    )


_TABLE: dict[tuple[str, str], Handler] = {
    ("meta", "connection.opened"): _meta_opened,
    ("meta", "connection.closed"): _meta_closed,
    ("meta", "fault.injected"): _meta_fault,
    ("client", "conversation.item.create"): _c_item_create,
    ("client", "conversation.item.delete"): _c_item_ref,
    ("client", "conversation.item.truncate"): _c_item_ref,
    ("client", "conversation.item.retrieve"): _c_item_ref,
    ("client", "response.create"): _c_response_create,
    ("client", "response.cancel"): _c_simple,
    ("client", "session.update"): _c_simple,
    ("client", "transcription_session.update"): _c_simple,
    ("client", "input_audio_buffer.commit"): _c_simple,
    ("client", "input_audio_buffer.clear"): _c_simple,
    ("client", "output_audio_buffer.clear"): _c_simple,
    ("server", "error"): _s_error,
    ("server", "session.created"): _s_session,
    ("server", "session.updated"): _s_session,
    ("server", "transcription_session.updated"): _s_session,
    ("server", "conversation.item.added"): _s_item_added,
    ("server", "conversation.item.done"): _s_item_done,
    ("server", "conversation.item.deleted"): _s_item_deleted,
    ("server", "conversation.item.truncated"): _s_item_truncated,
    ("server", "conversation.item.retrieved"): _s_item_retrieved,
    ("server", "input_audio_buffer.committed"): _s_committed,
    ("server", "input_audio_buffer.cleared"): _s_cleared,
    ("server", "output_audio_buffer.cleared"): _s_cleared,
    ("server", "response.created"): _s_response_created,
    ("server", "response.done"): _s_response_done,
    ("server", "response.output_item.added"): _s_output_item_added,
    ("server", "response.output_item.done"): _s_output_item_done,
    ("server", "response.function_call_arguments.done"): _s_arguments_done,
    ("server", "response.output_audio.delta"): _s_audio_delta,
    ("local", "local.conversation"): _l_conversation,
    ("local", "local.generation.opened"): _l_generation,
    ("local", "local.generation.closed"): _l_generation,
}


#: `_TABLE` with each type's field spec (`fields.FIELDS`; None: no field is read) and the spec as `holds` walks it:
#: one lookup a record.
_STEPS: Final[dict[tuple[str, str], tuple[Handler, Spec | None, Check]]] = {
    key: (handler, FIELDS.get(key[1]), check_of(FIELDS.get(key[1], ()))) for key, handler in _TABLE.items()
}
#: `_STEPS` by direction, then type: the strings the reader hands on are the catalogue's own, so each lookup
#: finds its key by identity, and no (direction, type) tuple is made and hashed per record.
_STEPS_BY_DIR: Final[dict[str, dict[str, tuple[Handler, Spec | None, Check]]]] = {}
for (_direction, _kind), _found in _STEPS.items():
    _STEPS_BY_DIR.setdefault(_direction, {})[_kind] = _found
#: The (direction, type) pairs that change the model; any other record only moves the clocks (see `tick`).
TRANSITIONS: frozenset[tuple[str, str]] = frozenset(_TABLE)
#: `TRANSITIONS` as the types of each direction (every direction a key).
TRANSITION_TYPES: Final[dict[str, frozenset[str]]] = {
    direction: frozenset(kind for way, kind in _TABLE if way == direction) for direction in DIRECTIONS
}
#: The pairs whose only change is an item's audio length (see `audio_run`).
AUDIO_DELTAS: frozenset[tuple[str, str]] = frozenset(k for k, handler in _TABLE.items() if handler is _s_audio_delta)
