"""The server's events in the fold: each answer joined to the client change it answers (`_answer`, `_join_error`),
and the items, responses and audio the server reports. Handlers of `core.reducer`'s table, under its ground rules
(its docstring): they read only the fields `fields.checked` let through and change only the state they are given.
"""

from __future__ import annotations

import re
from typing import Any, Final

from .audio import bytes_for_ms, delta_bytes, session_format
from .catalog import error_answers
from .conversation import ARGUMENTS_CHARS, item_from_event, update_item
from .facts import (
    ChangeAnswered,
    Fact,
    ItemAdded,
    ItemDeleted,
    ItemDone,
    ItemTruncated,
    ItemUpdated,
    ResponseCreated,
    ResponseDone,
    ServerError,
    SessionUpdated,
)
from .pending import Change
from .state import Connection, Response, TraceState
from .trace import Record

_CREATE: Final = "conversation.item.create"


def _answer(conn: Connection, change: Change, rec: Record, status: str, how: str, facts: list[Fact]) -> None:
    conn.pending.remove(change)
    change.answered()
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
