"""Rules about reconnects: a new connection starts empty, so what the old one held must be created again."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.conversation import Item
from ..core.facts import ChangeSent, ConnClosed, Reconnected
from ..core.state import Change, Connection, TraceState, unfinished_call
from .base import Config, Finding, Rule, Witness, on

_FUNCTION_ITEMS = ("function_call", "function_call_output")


class _Replay:
    """What a connection re-created of the connection it replaced."""

    def __init__(self, previous: Connection, lost: list[Item]) -> None:
        self.previous = previous
        self.lost = lost
        self.previous_ids = set(previous.conv.items)
        self.previous_calls = {i.call_id for i in previous.conv if i.call_id}
        self.recreated: list[Change] = []
        self.created_ids: set[str] = set()
        #: call_ids re-created, as a `function_call` and as a `function_call_output` (under any item id).
        self.created_calls: set[str] = set()
        self.created_outputs: set[str] = set()


class FunctionCallLostOnReconnect(Rule[Config]):
    """A connection closed holding `function_call` / `function_call_output` items, and the connection that
    replaced it re-created other items but not these.

    **What it means.** The model on the new connection no longer knows the tool was called: an output sent
    afterwards is rejected (`invalid_tool_call_id`, see `output-for-unknown-call`), and the model may call the
    tool again or answer without it.

    **How it is judged.** The replay is the set of client creates on the new connection that re-create items of
    the closed one: the same item ids, or a call or an output with the same `call_id` (a replay may give them new
    item ids). It is judged at the first `response.create` or `function_call_output` of the new connection, or
    when it ends: if it re-created at least one old item but not the function items (matched by `call_id`), they
    were lost. The new connection is paired with the one it replaces whatever the order of their
    `connection.opened` and `connection.closed` lines. A `function_call` whose arguments never finished (the
    response was cut before `response.function_call_arguments.done`) is no call to replay.

    **Minimal example.**

        [conn 1] S> conversation.item.added function_call item_fc (call_1)
        [conn 1] -- closed --
        [conn 2] C> conversation.item.create user message item_u      <- replay
        [conn 2] C> conversation.item.create function_call_output (call_1)  -> invalid_tool_call_id

    **Usual cause.** A replay built with `exclude_function_call=True` (livekit-agents before 1.8.5), or a replay
    from a mirror that never received the call.

    **Fix.** Replay function calls and their outputs, in order, with their original ids and call ids.
    """

    id = "RT105"
    slug = "function-call-lost-on-reconnect"
    severity = "error"
    title = "a reconnect replay left out function calls the old connection held"
    fix = "Replay function_call and function_call_output items (same ids and call_ids, in order) on reconnect."

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.replays: dict[int, _Replay] = {}

    @on(ConnClosed)
    def conn_closed(self, fact: ConnClosed, state: TraceState) -> list[Finding] | None:
        replay = self.replays.pop(fact.conn.n, None)
        return self._judge(replay, fact.rec.line, None) if replay else None

    @on(Reconnected)
    def reconnected(self, fact: Reconnected, state: TraceState) -> list[Finding] | None:
        lost = [i for i in fact.previous.conv if i.type in _FUNCTION_ITEMS and not unfinished_call(i)]
        if not lost:
            return None
        replay = self.replays[fact.conn.n] = _Replay(fact.previous, lost)
        for change in fact.early:
            out = self._sent(replay, change, fact.rec.line)
            if fact.conn.n not in self.replays:
                return out  # judged already: the pairing became known after the trigger
        return None

    @on(ChangeSent)
    def sent(self, fact: ChangeSent, state: TraceState) -> list[Finding] | None:
        change = fact.change
        replay = self.replays.get(change.conn)
        return self._sent(replay, change, change.line) if replay is not None else None

    def _sent(self, replay: _Replay, change: Change, at: int) -> list[Finding] | None:
        """Take in one change of the new connection; the findings when it is the moment to judge (`at`: the line
        where the judgment is certain)."""
        item = change.item
        if change.kind == "conversation.item.create" and item is not None:
            if item.type == "function_call_output" and item.call_id in {i.call_id for i in replay.lost}:
                if item.call_id not in replay.created_calls:
                    del self.replays[change.conn]
                    return self._judge(replay, at, change)
            if change.item_id:
                replay.created_ids.add(change.item_id)
            old_id = bool(change.item_id) and change.item_id in replay.previous_ids
            old_call = item.type in _FUNCTION_ITEMS and item.call_id in replay.previous_calls
            if old_id or old_call:
                replay.recreated.append(change)
            if item.call_id and item.type == "function_call":
                replay.created_calls.add(item.call_id)
            elif item.call_id and item.type == "function_call_output":
                replay.created_outputs.add(item.call_id)
            return None
        if change.kind == "response.create":
            del self.replays[change.conn]
            return self._judge(replay, at, change)
        return None

    def _judge(self, replay: _Replay, at: int, trigger: Change | None) -> list[Finding] | None:
        if not replay.recreated:
            return None  # no replay at all: nothing says the client meant to carry the conversation over
        missing = [
            i
            for i in replay.lost
            if i.id not in replay.created_ids
            and not (i.type == "function_call" and i.call_id in replay.created_calls)
            and not (i.type == "function_call_output" and i.call_id in replay.created_outputs)
        ]
        if not missing:
            return None
        prev = replay.previous
        new_conn = replay.recreated[0].conn
        first, last = replay.recreated[0], replay.recreated[-1]
        labels = ", ".join(i.label() for i in missing[:4])
        trigger_text = f" Line {trigger.line} ({trigger.summary}) then runs without them." if trigger else ""
        return [
            self.finding(
                new_conn,
                f"reconnect replay on connection {new_conn} left out {labels}",
                f"Connection {prev.n} ended at line {prev.closed_line} holding {labels}. Connection {new_conn} "
                f"re-created {len(replay.recreated)} of its items (lines {first.line}-{last.line}) "
                f"but not these.{trigger_text}",
                [
                    *(Witness.added(i, prev) for i in missing[:4] if i.added_line),
                    Witness.closed(prev),
                    Witness.sent(first),
                    Witness.sent(last),
                    Witness.sent(trigger) if trigger else None,
                ],
                at,
                items=[i.id for i in missing],
                call_ids=[i.call_id for i in missing],
            )
        ]


class UnconfirmedItemLostOnReconnect(Rule[Config]):
    """A create or delete sent on a connection had no answer when it closed, and the next connection never
    sent it again.

    **What it means.** The change is lost: a create the old socket never confirmed is missing from the new
    conversation, or a delete the old socket never confirmed is undone because the replay re-created the item.
    Replays built from a mirror of *confirmed* items have exactly this blind spot (protocol.md 4.3).

    **How it is judged.** Needs the end of the trace. A lost create: no later connection creates the same item id
    (for a `function_call_output`, the same call id). A lost delete: the next connection (the one that replaced
    it, whatever the order of their `connection.opened` and `connection.closed` lines) re-creates the item and
    never deletes it.

    **Fix.** Keep unacknowledged changes in a queue that survives the socket, and re-send them after the replay
    (or build the replay from the local conversation, not the confirmed mirror).
    """

    id = "RT106"
    slug = "unconfirmed-item-lost-on-reconnect"
    severity = "error"
    title = "a change the old connection never confirmed was not sent again after the reconnect"
    fix = "Re-send unacknowledged creates and deletes after the replay, or replay from the local conversation."

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        #: Changes unanswered when their connection closed, each with what later connections did about it.
        self.lost: list[_Unanswered] = []

    @on(ConnClosed)
    def conn_closed(self, fact: ConnClosed, state: TraceState) -> None:
        if fact.conn.ended_by == "trace-end":
            return  # the recording stopped; nothing says the connection was lost
        for change in fact.indeterminate:
            if change.kind in ("conversation.item.create", "conversation.item.delete"):
                self.lost.append(_Unanswered(change, Witness.answer(change)))

    @on(Reconnected)
    def reconnected(self, fact: Reconnected, state: TraceState) -> None:
        for entry in self.lost:
            if entry.change.conn == fact.previous.n and entry.next_conn is None:
                entry.next_conn = fact.conn.n
        for change in fact.early:
            self._resent(change)

    @on(ChangeSent)
    def sent(self, fact: ChangeSent, state: TraceState) -> None:
        self._resent(fact.change)

    def _resent(self, change: Change) -> None:
        """What a change of a later connection does to each lost one."""
        if not self.lost or change.kind not in ("conversation.item.create", "conversation.item.delete"):
            return
        sent = change.item
        for entry in self.lost:
            old = entry.change
            if change.conn <= old.conn:
                continue
            if entry.next_conn is None:
                entry.next_conn = change.conn
            if change.kind == "conversation.item.create":
                same_id = bool(old.item_id) and change.item_id == old.item_id
                same_call = (
                    old.item is not None
                    and old.item.type == "function_call_output"
                    and sent is not None
                    and sent.type == "function_call_output"
                    and old.item.call_id is not None
                    and sent.call_id == old.item.call_id
                )
                if same_id or same_call:
                    entry.resent = True
                if same_id and change.conn == entry.next_conn:
                    entry.recreated_next = True
            elif change.item_id == old.item_id:
                entry.deleted_later = True

    def finish(self, state: TraceState) -> Iterable[Finding] | None:
        out = []
        for entry in self.lost:
            change, ended = entry.change, entry.ended
            nxt = entry.next_conn or next((n for n in sorted(state.conns) if n > change.conn), None)
            if nxt is None:
                continue
            if change.kind == "conversation.item.create":
                item = change.item
                if entry.resent or (not change.item_id and not (item and item.call_id)):
                    continue
                what = f"create of {item.label() if item else change.item_id} was never sent again"
            else:
                if not change.item_id or not entry.recreated_next or entry.deleted_later:
                    continue
                what = (
                    f"delete of {change.item_id} was undone: connection {nxt} re-created the item and never deleted it"
                )
            out.append(
                self.finding(
                    change.conn,
                    f"unconfirmed {change.short} at line {change.line} lost on reconnect",
                    f"Line {change.line} ({change.summary}) had no answer when connection {change.conn} ended"
                    f"{f' at line {ended.line}' if ended else ''}; the {what}.",
                    [Witness.sent(change), ended],
                    state.last_line,
                    items=[change.item_id],
                    call_ids=[change.item.call_id if change.item else None],
                    event_ids=[change.event_id],
                )
            )
        return out


class _Unanswered:
    """A change left indeterminate by a closed connection, and what the connections after it did."""

    def __init__(self, change: Change, ended: Witness | None) -> None:
        self.change = change
        self.ended = ended
        #: The connection that replaced it (else the first connection after it that sent a change).
        self.next_conn: int | None = None
        #: A later connection created the same item id (or, for a tool output, the same call id).
        self.resent = False
        #: The next connection re-created the item (for deletes: the replay brought it back).
        self.recreated_next = False
        #: A later connection deleted the item.
        self.deleted_later = False
