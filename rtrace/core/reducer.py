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
import re
from collections.abc import Callable
from typing import Any, Final

import orjson

from .audio import bytes_for_ms, delta_bytes, session_format
from .catalog import error_answers
from .conversation import ARGUMENTS_CHARS, Item, item_from_event, update_item
from .describe import describe
from .facts import (
    NO_FACTS,
    ChangeAnswered,
    ChangeSent,
    ConnClosed,
    ConnOpened,
    Fact,
    FaultInjected,
    ItemAdded,
    ItemDeleted,
    ItemDone,
    ItemTruncated,
    ItemUpdated,
    LocalGeneration,
    LocalSnapshot,
    Reconnected,
    ResponseCreated,
    ResponseDone,
    SentIntoClosing,
    ServerError,
    SessionUpdated,
)
from .fields import FIELDS, Spec, checked, fits
from .state import NAMING_LIMIT, Change, Connection, Response, TraceState
from .trace import Record

# -- the fold ---------------------------------------------------------------------------------------------

Handler = Callable[[TraceState, Connection, Record, list[Fact]], None]

_CREATE: Final = "conversation.item.create"


def step(state: TraceState, rec: Record) -> tuple[TraceState, list[Fact] | tuple[Fact, ...]]:
    """Fold one record into `state` (in place) and return it with the facts the record revealed."""
    if state.first_t is None:
        state.first_t = rec.t
    conn = state.conns.get(rec.conn)
    rtype = rec.type
    found = _STEPS.get((rec.dir, rtype))
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
    handler, spec = found
    if spec is not None and not fits(rec.event, spec):
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
    item: Item | None = None,
    previous_item_id: str | None = None,
    audio_end_ms: int | None = None,
    conversation: str = "auto",
    metadata: dict[str, Any] | None = None,
) -> Change:
    ev = rec.event
    event_id = ev.get("event_id")
    pending = conn.pending
    sent: dict[str, Any] | str = ev
    if len(pending) >= SENT_KEPT:
        try:
            # A str: orjson's bytes keep the buffer they were written in (4 KiB), the decoded text only its length.
            sent = orjson.dumps(ev).decode()
        except (orjson.JSONEncodeError, RecursionError):  # an event built in memory (tests), not one read from JSON
            pass
    change = Change(
        rec.type,
        conn.n,
        rec.seq,
        rec.line,
        rec.t,
        event_id if type(event_id) is str else None,
        describe(rec.type, ev),
        item_id,
        item,
        previous_item_id,
        audio_end_ms,
        conversation,
        metadata,
        sent,
    )
    pending.add(change)
    if conn.early is not None:
        conn.early.append(change)
    facts.append(ChangeSent(rec, change))
    return change


def _c_item_create(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    ev = rec.event
    raw_item = ev.get("item")
    item = None
    if isinstance(raw_item, dict):
        item = item_from_event(raw_item)
        if item is None:
            # No id: the server will choose one. Keep the item for its type and call_id.
            item = Item(id="", type=str(raw_item.get("type") or "unknown"))
            update_item(item, raw_item)
        item.source = "client"
        item.created_line = rec.line
        item.created_t = rec.t
        item.arguments_done = True
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
    _send(conn, rec, facts, item.id if item is not None and item.id else None, item, prev)


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


# -- answers ----------------------------------------------------------------------------------------------


def _answer(conn: Connection, change: Change, rec: Record, status: str, how: str, facts: list[Fact]) -> None:
    conn.pending.remove(change)
    change.sent = None
    change.status = status  # type: ignore[assignment]
    change.answer_line = rec.line
    change.answer_t = rec.t
    facts.append(ChangeAnswered(rec, change, how))


def _oldest(conn: Connection, kind: str, item_id: str | None = None) -> Change | None:
    return conn.pending.oldest(kind, item_id)


_QUOTED: Final = re.compile(r"'([^']{1,200})'")


def _join_error(
    conn: Connection, error: dict[str, Any], answers: frozenset[str] | None
) -> tuple[Change | None, str | None]:
    """The pending change an `error` answers, and how it was joined. `answers` is what the error's code can
    answer (`catalog.error_answers`; None: anything): quoted ids and arrival order only look at those."""
    if not conn.pending or (answers is not None and not answers):
        return None, None  # nothing waits, or a session-level error that answers no client event
    pending = conn.pending
    event_id = error.get("event_id")
    if isinstance(event_id, str) and event_id:
        change = pending.with_event_id(event_id)
        if change is not None:
            return change, "event-id"
    message = error.get("message")
    quoted = set(_QUOTED.findall(message)) if isinstance(message, str) else set()
    if quoted:
        change = pending.quoting(quoted, answers)
        if change is not None:
            return change, "quoted-id"
    param = error.get("param")
    if isinstance(param, str) and param:
        # A schema error names the field (`item.content[0].type`) and quotes the value it refused ('text'): the
        # change whose event holds that value there, not the oldest one (the real server answers such an error
        # ahead of the acks of the creates before it).
        refused = _QUOTED.search(message) if isinstance(message, str) else None
        value = refused.group(1) if refused is not None and refused.group(1) != param else None
        if error.get("code") == "unknown_parameter":
            value = None  # the quote is the field itself: the change that has it is the one
        change = pending.naming(param, set() if value is None else {value}, answers)
        if change is not None:
            return change, "named-field"
    # Ack-less events (append) never wait; take the oldest change that is waiting and that the code can answer.
    change = pending.oldest_of(answers)
    return (change, "order") if change is not None else (None, None)


def _s_error(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    error = rec.event.get("error")
    if not isinstance(error, dict):
        error = {"message": str(error)} if error is not None else {}
    if conn.fault_pending:  # the answer of an injected fault (`_meta_fault`)
        conn.fault_pending = False
        conn.injected_line = rec.line
    answers = error_answers(error.get("code"), error.get("param"))
    cause, how = _join_error(conn, error, answers)
    if cause is not None and how is not None:
        cause.error = error
        _answer(conn, cause, rec, "rejected", how, facts)
    facts.append(ServerError(rec, conn, error, cause, how, answers))


def _s_session(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    session = rec.event.get("session")
    fmt = session_format(session) if isinstance(session, dict) else None
    if fmt is not None:
        conn.audio_rate, conn.audio_sample_bytes = fmt
    if rec.type == "session.updated":
        change = _oldest(conn, "session.update") or _oldest(conn, "transcription_session.update")
        if change is not None:
            _answer(conn, change, rec, "confirmed", "order", facts)
        facts.append(SessionUpdated(rec, conn))


def _s_item_added(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    ev = rec.event
    raw = ev.get("item")
    if not isinstance(raw, dict):
        return
    item = item_from_event(raw)
    if item is None:
        return
    prev = ev.get("previous_item_id")
    prev = prev if isinstance(prev, str) and prev else None
    item.added_line = rec.line
    item.added_t = rec.t
    item_id = item.id
    pending = conn.pending
    change = pending.oldest(_CREATE, item_id)
    how = "item-id"
    if change is None:
        active = conn.active
        if active is not None and item_id in active.output:
            item.source = "response"
            item.response_id = active.id
        elif item_id in conn.committed_audio:
            conn.committed_audio.discard(item_id)
            item.source = "audio"
        else:
            # A create without a client-chosen id: the oldest id-less create of the same item type.
            change = pending.oldest_idless_create(item.type)
            how = "order"
            if change is None and active is not None:
                # A response item whose output_item.added was not recorded.
                item.source = "response"
                item.response_id = active.id
                active.output.append(item_id)
    if change is not None:
        item.source = "client"
        item.created_line = change.line
        item.created_t = change.t
    item.arguments_done = item.source != "response" or item.status == "completed"
    items = conn.conv.items
    duplicate = item_id in items
    known = conn.conv.insert(item, prev)
    if rec.raw_type == "conversation.item.created" and item.source != "response":
        item.done = True
    facts.append(ItemAdded(rec, conn, items[item_id], prev, known, duplicate))
    state.last_added = None if duplicate else (item, raw, state.records)
    if change is not None:
        _answer(conn, change, rec, "confirmed", how, facts)


def _s_item_done(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    raw = rec.event.get("item")
    if not isinstance(raw, dict):
        return
    item_id = raw.get("id")
    item = conn.conv.items.get(item_id) if isinstance(item_id, str) else None
    if item is None:
        # `done` with no `added` (a recorder that missed it): add it where the event says.
        _s_item_added(state, conn, rec, facts)
        item = conn.conv.get(item_id) if isinstance(item_id, str) else None
        if item is None:
            return
    last = state.last_added
    if last is None or last[0] is not item or last[2] != state.records - 1 or last[1] != raw:
        # (Else the record before this one added the item from this same wire item: folding it again changes
        # nothing.)
        old_call = item.call_id
        update_item(item, raw)
        if item.call_id != old_call:
            conn.conv.reindex(item, old_call)
    item.done = True
    item.arguments_done = item.arguments_done or item.status == "completed"
    facts.append(ItemDone(rec, conn, item))


def _s_item_deleted(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    item_id = rec.event.get("item_id")
    if not isinstance(item_id, str):
        return
    item = conn.conv.remove(item_id)
    change = _oldest(conn, "conversation.item.delete", item_id)
    facts.append(ItemDeleted(rec, conn, item_id, item, change))
    if change is not None:
        _answer(conn, change, rec, "confirmed", "item-id", facts)


def _s_item_truncated(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    item_id = rec.event.get("item_id")
    if not isinstance(item_id, str):
        return
    end = rec.event.get("audio_end_ms")
    end = end if isinstance(end, int) and not isinstance(end, bool) else None
    item = conn.conv.get(item_id)
    if item is not None and end is not None:
        item.audio_bytes = min(item.audio_bytes, bytes_for_ms(end, conn.audio_rate, conn.audio_sample_bytes))
        item.text = ""
    facts.append(ItemTruncated(rec, conn, item_id, end))
    change = _oldest(conn, "conversation.item.truncate", item_id)
    if change is not None:
        _answer(conn, change, rec, "confirmed", "item-id", facts)


def _s_item_retrieved(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    raw = rec.event.get("item")
    item_id = raw.get("id") if isinstance(raw, dict) else None
    change = _oldest(conn, "conversation.item.retrieve", item_id if isinstance(item_id, str) else None)
    if change is not None:
        _answer(conn, change, rec, "confirmed", "item-id", facts)


def _s_committed(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    item_id = rec.event.get("item_id")
    if isinstance(item_id, str):
        conn.committed_audio.add(item_id)
    change = _oldest(conn, "input_audio_buffer.commit")
    if change is not None:
        _answer(conn, change, rec, "confirmed", "order", facts)


def _s_cleared(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    kind = "input_audio_buffer.clear" if rec.type == "input_audio_buffer.cleared" else "output_audio_buffer.clear"
    change = _oldest(conn, kind)
    if change is not None:
        _answer(conn, change, rec, "confirmed", "order", facts)


def _s_response_created(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    body = rec.event.get("response")
    if not isinstance(body, dict):
        body = {}
    rid = body.get("id")
    rid = rid if isinstance(rid, str) and rid else f"<unnamed response at line {rec.line}>"
    resp = Response(id=rid, conn=conn.n, created_line=rec.line, created_t=rec.t)
    resp.in_conversation = body.get("conversation_id", "auto") is not None
    # Which response.create asked for it: echoed metadata.client_event_id, else the oldest pending one.
    md = body.get("metadata")
    request, how = None, "order"
    if isinstance(md, dict) and isinstance(md.get("client_event_id"), str):
        request = conn.pending.with_event_id(md["client_event_id"], "response.create")
        if request is not None:
            how = "metadata"
    if request is None:
        request = conn.pending.oldest_reply(resp.in_conversation)
    replaced = None
    if resp.in_conversation:
        if conn.active is not None and conn.active.open:
            replaced = conn.active
            replaced.orphaned = "replaced"
        conn.active = resp
    resp.request = request
    conn.responses[rid] = resp
    facts.append(ResponseCreated(rec, conn, resp, replaced))
    if request is not None:
        _answer(conn, request, rec, "confirmed", how, facts)


def _s_response_done(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    body = rec.event.get("response")
    if not isinstance(body, dict):
        body = {}
    rid = body.get("id")
    resp = conn.responses.get(rid) if isinstance(rid, str) else None
    unknown = resp is None
    if resp is None:
        rid = rid if isinstance(rid, str) and rid else f"<unnamed response at line {rec.line}>"
        resp = Response(id=rid, conn=conn.n, created_line=rec.line, created_t=rec.t)
        resp.in_conversation = body.get("conversation_id", "auto") is not None
        conn.responses[rid] = resp
    again = (resp.done_line, resp.done_t) if resp.done_line is not None and resp.done_t is not None else None
    status = body.get("status")
    resp.status = status if isinstance(status, str) else "unknown"
    resp.done_line = rec.line
    resp.done_t = rec.t
    resp.orphaned = None
    details = body.get("status_details")
    if isinstance(details, dict) and isinstance(details.get("error"), dict):
        resp.error = details["error"]
    output = body.get("output")
    if isinstance(output, list):
        for obj in output:
            if isinstance(obj, dict) and isinstance(obj.get("id"), str) and obj["id"] not in resp.output:
                resp.output.append(obj["id"])
    if conn.active is resp:
        conn.active = None
    if resp.status == "cancelled":
        cancel = _oldest(conn, "response.cancel")
        if cancel is not None:
            _answer(conn, cancel, rec, "confirmed", "order", facts)
    facts.append(ResponseDone(rec, conn, resp, unknown, again))
    if again is None:
        _forget_old_responses(conn, resp)


#: Done responses a connection keeps (for late events that name them); older ones are forgotten, so an
#: hour-long call does not keep every response it ever had.
KEPT_DONE_RESPONSES: Final = 64


def _forget_old_responses(conn: Connection, resp: Response) -> None:
    done = conn.done_responses
    done.append(resp.id)
    while len(done) > KEPT_DONE_RESPONSES:
        old = conn.responses.get(done.pop(0))
        if old is not None and not old.open and old is not conn.active:
            del conn.responses[old.id]


def _s_output_item_added(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    raw = rec.event.get("item")
    item_id = raw.get("id") if isinstance(raw, dict) else None
    rid = rec.event.get("response_id")
    resp = conn.responses.get(rid) if isinstance(rid, str) else conn.active
    if resp is None:
        resp = conn.active
    if resp is not None and isinstance(item_id, str) and item_id not in resp.output:
        resp.output.append(item_id)


def _s_output_item_done(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    raw = rec.event.get("item")
    if not isinstance(raw, dict):
        return
    item_id = raw.get("id")
    item = conn.conv.get(item_id) if isinstance(item_id, str) else None
    if item is not None:
        old_call = item.call_id
        update_item(item, raw)
        conn.conv.reindex(item, old_call)
        item.arguments_done = item.arguments_done or item.status == "completed"
        facts.append(ItemUpdated(rec, conn, item))


def _s_arguments_done(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    item_id = rec.event.get("item_id")
    item = conn.conv.get(item_id) if isinstance(item_id, str) else None
    if item is not None:
        args = rec.event.get("arguments")
        if isinstance(args, str):
            item.arguments = args[:ARGUMENTS_CHARS]
            item.arguments_len = len(args)
            item.arguments_done = True
            facts.append(ItemUpdated(rec, conn, item))


def _s_audio_delta(state: TraceState, conn: Connection, rec: Record, facts: list[Fact]) -> None:
    item_id = rec.event.get("item_id")
    item = conn.conv.items.get(item_id) if type(item_id) is str else None
    if item is None:
        return
    item.audio_bytes += delta_bytes(rec.event)


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


#: `_TABLE` with each type's field spec (`fields.FIELDS`; None: no field is read): one lookup a record.
_STEPS: Final[dict[tuple[str, str], tuple[Handler, Spec | None]]] = {
    key: (handler, FIELDS.get(key[1])) for key, handler in _TABLE.items()
}
#: The (direction, type) pairs that change the model; any other record only moves the clocks (see `tick`).
TRANSITIONS: frozenset[tuple[str, str]] = frozenset(_TABLE)
#: The pairs whose only change is an item's audio length (see `audio_run`).
AUDIO_DELTAS: frozenset[tuple[str, str]] = frozenset(k for k, handler in _TABLE.items() if handler is _s_audio_delta)
