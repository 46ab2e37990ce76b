"""Rules about reconnects: a new connection starts empty, so what the old one held must be created again."""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable
from typing import Final

from ..core.conversation import Item
from ..core.facts import (
    ChangeAnswered,
    ChangeSent,
    ConnClosed,
    ConnOpened,
    Reconnected,
    ResponseCreated,
    SentIntoClosing,
)
from ..core.state import Change, Connection, TraceState, unfinished_call
from .base import Config, Finding, Rule, Witness, on

_FUNCTION_ITEMS: Final = ("function_call", "function_call_output")
_CREATE: Final = "conversation.item.create"
_DELETE: Final = "conversation.item.delete"


def _output_call(change: Change) -> str | None:
    """The call_id of the `function_call_output` a change creates (None: not such a create, or no call_id)."""
    if change.kind == _CREATE and change.item_type == "function_call_output":
        return change.call_id
    return None


class _Replay:
    """What a connection re-created of the connection it replaced."""

    def __init__(self, previous: Connection, lost: list[Item]) -> None:
        self.previous = previous
        self.lost = lost
        self.lost_calls = {i.call_id for i in lost}
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
    response was cut before `response.function_call_arguments.done`) is no call to replay. A reconnect whose
    replay the recorder could not see (`"replay_visible": false` on the new `connection.opened`, as in a trace read
    from a livekit-agents log) is not judged.

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
    needs = ("reconnect-replay",)

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.replays: dict[int, _Replay] = {}

    @on(ConnClosed, after=[Reconnected])
    def conn_closed(self, fact: ConnClosed, state: TraceState) -> list[Finding] | None:
        replay = self.replays.pop(fact.conn.n, None)
        return self._judge(replay, fact.rec.line, None) if replay else None

    @on(Reconnected)
    def reconnected(self, fact: Reconnected, state: TraceState) -> list[Finding] | None:
        if not fact.conn.replay_visible:
            return None  # the recorder could not see the replay: nothing to judge
        lost = [i for i in fact.previous.conv if i.type in _FUNCTION_ITEMS and not unfinished_call(i)]
        if not lost:
            return None
        replay = self.replays[fact.conn.n] = _Replay(fact.previous, lost)
        for change in fact.early:
            out = self._sent(replay, change, fact.rec.line)
            if fact.conn.n not in self.replays:
                return out  # judged already: the pairing became known after the trigger
        return None

    @on(ChangeSent, kinds=[_CREATE, "response.create"], after=[Reconnected])
    def sent(self, fact: ChangeSent, state: TraceState) -> list[Finding] | None:
        change = fact.change
        replay = self.replays.get(change.conn)
        return self._sent(replay, change, change.line) if replay is not None else None

    def _sent(self, replay: _Replay, change: Change, at: int) -> list[Finding] | None:
        """Take in one change of the new connection; the findings when it is the moment to judge (`at`: the line
        where the judgment is certain)."""
        item_type, call_id = change.item_type, change.call_id
        if change.kind == "conversation.item.create" and item_type is not None:
            if item_type == "function_call_output" and call_id in replay.lost_calls:
                if call_id not in replay.created_calls:
                    del self.replays[change.conn]
                    return self._judge(replay, at, change)
            if change.item_id:
                replay.created_ids.add(change.item_id)
            old_id = bool(change.item_id) and change.item_id in replay.previous_ids
            old_call = item_type in _FUNCTION_ITEMS and call_id in replay.previous_calls
            if old_id or old_call:
                replay.recreated.append(change)
            if call_id and item_type == "function_call":
                replay.created_calls.add(call_id)
            elif call_id and item_type == "function_call_output":
                replay.created_outputs.add(call_id)
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
    Replays built from a mirror of *confirmed* items have exactly this blind spot (docs/protocol.md 4.3).

    **How it is judged.** Needs the end of the trace. The changes are those unanswered at the close and those
    sent on the connection after its close was noted (written into the closing socket). A lost create: no later
    connection creates the same item id
    (for a `function_call_output`, the same call id). A lost delete: the next connection (the one that replaced
    it, whatever the order of their `connection.opened` and `connection.closed` lines) re-creates the item and
    never deletes it. Not judged when the next connection's replay was not visible to the recorder
    (`"replay_visible": false`): the change may have been sent again there.

    **Fix.** Keep unacknowledged changes in a queue that survives the socket, and re-send them after the replay
    (or build the replay from the local conversation, not the confirmed mirror).
    """

    id = "RT106"
    slug = "unconfirmed-item-lost-on-reconnect"
    severity = "error"
    title = "a change the old connection never confirmed was not sent again after the reconnect"
    fix = "Re-send unacknowledged creates and deletes after the replay, or replay from the local conversation."
    needs = ("reconnect-replay",)

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        #: Changes unanswered when their connection closed that may still be reported, by seq (in the order they
        #: were lost), each with what later connections did about it. A create sent again, or a delete done again,
        #: is settled and leaves.
        self.lost: dict[int, _Unanswered] = {}
        #: The same, by item id (those that have one), and the creates of a tool output by its call_id.
        self.by_item: dict[str, list[_Unanswered]] = {}
        self.by_call: dict[str, list[_Unanswered]] = {}
        #: Those no later connection has followed yet, by the ordinal of their connection (and a heap of them).
        self.unfollowed: dict[int, list[_Unanswered]] = {}
        self.unfollowed_heap: list[int] = []

    @on(ConnClosed, SentIntoClosing)
    def conn_closed(self, fact: ConnClosed | SentIntoClosing, state: TraceState) -> None:
        if fact.conn.ended_by == "trace-end":
            return  # the recording stopped; nothing says the connection was lost
        late = isinstance(fact, SentIntoClosing)
        for change in fact.changes if late else fact.indeterminate:  # type: ignore[union-attr]
            if change.kind == _CREATE:
                if not change.item_id and not change.call_id:
                    continue  # nothing to recognise it by if it is sent again: never reported
            elif change.kind != _DELETE or not change.item_id:
                continue
            answer = Witness.closed(fact.conn) if late else Witness.answer(change)
            entry = self.lost[change.seq] = _Unanswered(change, answer)
            if change.item_id:
                self.by_item.setdefault(change.item_id, []).append(entry)
            if _output_call(change) is not None:
                self.by_call.setdefault(_output_call(change), []).append(entry)  # type: ignore[arg-type]
            if late and fact.conn.replaced_by is not None:
                entry.next_conn = fact.conn.replaced_by  # written into a socket already replaced
                continue
            if change.conn not in self.unfollowed:
                heapq.heappush(self.unfollowed_heap, change.conn)
            self.unfollowed.setdefault(change.conn, []).append(entry)

    @on(Reconnected)
    def reconnected(self, fact: Reconnected, state: TraceState) -> None:
        for entry in self.unfollowed.pop(fact.previous.n, ()):
            if entry.next_conn is None:
                entry.next_conn = fact.conn.n
        for change in fact.early:
            self._resent(change)

    @on(ChangeSent, kinds=[_CREATE, _DELETE], after=[ConnClosed, SentIntoClosing])
    def sent(self, fact: ChangeSent, state: TraceState) -> None:
        self._resent(fact.change)

    def _resent(self, change: Change) -> None:
        """What a change of a later connection does to each lost one."""
        if not self.lost or change.kind not in (_CREATE, _DELETE):
            return
        n = change.conn
        heap = self.unfollowed_heap
        while heap and heap[0] < n:  # the first later connection that sends a create or delete follows them
            for entry in self.unfollowed.pop(heapq.heappop(heap), ()):
                if entry.next_conn is None:
                    entry.next_conn = n
        if change.kind == _CREATE:
            for entry in list(self.by_item.get(change.item_id, ())) if change.item_id else ():
                if n <= entry.change.conn:
                    continue
                if entry.change.kind == _CREATE:
                    self._settle(entry)  # sent again
                elif n == entry.next_conn:
                    entry.recreated_next = True
            call_id = _output_call(change)
            for entry in list(self.by_call.get(call_id, ())) if call_id is not None else ():
                if n > entry.change.conn:
                    self._settle(entry)  # the tool output sent again (under any item id)
        else:
            for entry in list(self.by_item.get(change.item_id, ())) if change.item_id else ():
                if n > entry.change.conn and entry.change.kind == _DELETE:
                    self._settle(entry)  # deleted again later

    def _settle(self, entry: _Unanswered) -> None:
        """`entry` can no longer be reported: forget it."""
        change = entry.change
        del self.lost[change.seq]
        for index, key in ((self.by_item, change.item_id), (self.by_call, _output_call(change))):
            held = index.get(key) if key else None
            if held is not None and entry in held:
                held.remove(entry)
                if not held:
                    del index[key]  # type: ignore[arg-type]

    def finish(self, state: TraceState) -> Iterable[Finding] | None:
        out = []
        ordinals = sorted(state.conns)
        for entry in self.lost.values():
            change, ended = entry.change, entry.ended
            later = bisect.bisect_right(ordinals, change.conn)
            nxt = entry.next_conn or (ordinals[later] if later < len(ordinals) else None)
            if nxt is None or not state.conns[nxt].replay_visible:
                continue  # no next connection, or one whose replay (which may have sent it again) is unseen
            if change.kind == _CREATE:
                what = f"create of {change.item_label() or change.item_id} was never sent again"
            else:
                if not entry.recreated_next:
                    continue
                what = (
                    f"delete of {change.item_id} was undone: connection {nxt} re-created the item and never deleted it"
                )
            out.append(
                self.finding(
                    change.conn,
                    f"unconfirmed {change.short} at line {change.line} lost on reconnect",
                    f"Line {change.line} ({change.summary}) "
                    + (
                        f"was written into connection {change.conn} after its close at line {ended.line}"
                        if ended and change.line > ended.line
                        else f"had no answer when connection {change.conn} ended"
                        f"{f' at line {ended.line}' if ended else ''}"
                    )
                    + f"; the {what}.",
                    [Witness.sent(change), ended],
                    state.last_line,
                    items=[change.item_id],
                    call_ids=[change.call_id],
                    event_ids=[change.event_id],
                )
            )
        return out


class _Unanswered:
    """A change left indeterminate by a closed connection, and what the connections after it did."""

    __slots__ = ("change", "ended", "next_conn", "recreated_next")

    def __init__(self, change: Change, ended: Witness | None) -> None:
        self.change = change
        self.ended = ended
        #: The connection that replaced it (else the first connection after it that sent a change).
        self.next_conn: int | None = None
        #: The next connection re-created the item (for deletes: the replay brought it back).
        self.recreated_next = False


#: The changes whose loss at a final close RT122 reports, and what the user loses with each.
_LOSABLE = (
    "conversation.item.create",
    "conversation.item.delete",
    "session.update",
    "transcription_session.update",
    "response.create",
)


def _what_is_lost(change: Change) -> str:
    """`a tool output (item_out for call_1, line 15)`, `a user message (item_u, line 3)`, `a reply (line 9)`."""
    item_type, call_id = change.item_type, change.call_id
    if change.kind == "conversation.item.create":
        if item_type is None:
            what = "an item"
        elif item_type == "function_call_output":
            what = "a tool output"
        elif item_type == "message":
            what = f"a {change.role or 'new'} message"
        else:
            what = f"a {item_type}"
        named = [change.item_id or "", f"for {call_id}" if call_id else ""] if item_type is not None else []
        ids = " ".join(x for x in named if x)
        return f"{what} ({ids + ', ' if ids else ''}line {change.line})"
    if change.kind == "conversation.item.delete":
        return f"a delete of {change.item_id} (line {change.line})"
    if change.kind == "response.create":
        return f"a reply (response.create, line {change.line})"
    return f"session settings ({change.kind}, line {change.line})"


class ChangesLostAtFinalClose(Rule[Config]):
    """A connection closed with client changes still unanswered, and the client never reconnected.

    **What it means.** The creates, deletes, `session.update`s or `response.create`s the server had not answered
    when the socket closed may never have happened, and no later connection sends them again: the user's last
    message, the tool's result, the reply the agent asked for are lost with the session. The client believes
    they were sent.

    **How it is judged.** Needs the end of the trace. The changes were pending when the connection closed, or were
    sent on it after its close was noted (frames written into the closing socket: the server notes its close when
    it sends the close frame, the client writes on until it reads it), and no later connection exists (none
    replaced it, none opened after it). A trace that simply ends while the
    connection is open is not reported (the recording stopped, not the session); a reconnect that loses them is
    `unconfirmed-item-lost-on-reconnect` or `response-create-lost-on-reconnect`.

    **Minimal example.**

        C> conversation.item.create function_call_output item_out (call_1)
        -- connection closed (1006) --        <- no conversation.item.added for item_out, no reconnect

    **Usual cause.** A socket that died during a turn and a client that gives up (no reconnect logic, a
    reconnect disabled by default, a fatal error), or a client that closes the socket without waiting for its
    last acknowledgements.

    **Fix.** Reconnect and re-send what was unanswered (or tell the user the turn was lost); wait for the
    acknowledgements of the last changes before closing on purpose.
    """

    id = "RT122"
    slug = "changes-lost-at-final-close"
    severity = "warning"
    title = "a connection closed with changes unanswered and the client never reconnected"
    fix = "Reconnect and re-send unanswered changes (or surface the lost turn); await the last acks before closing."

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        #: Connections that closed with changes unanswered and that no later connection follows (yet).
        self.closed: list[tuple[Connection, list[Change], Witness | None]] = []
        #: The highest ordinal opened so far: a connection below it is followed, and is not this rule's to judge.
        self.highest = 0

    @on(ConnOpened)
    def conn_opened(self, fact: ConnOpened, state: TraceState) -> None:
        if fact.conn.n > self.highest:
            self.highest = fact.conn.n
            self.closed.clear()  # each is below it (none is kept below the highest)

    @on(ConnClosed, SentIntoClosing)
    def conn_closed(self, fact: ConnClosed | SentIntoClosing, state: TraceState) -> None:
        if fact.conn.ended_by == "trace-end" or fact.conn.n < self.highest:
            return
        changes = fact.changes if isinstance(fact, SentIntoClosing) else fact.indeterminate
        lost = [c for c in changes if c.kind in _LOSABLE]
        if not lost:
            return
        for held_conn, held, _ in self.closed:
            if held_conn is fact.conn:
                held.extend(lost)  # written into the closing socket: part of the same end
                return
        self.closed.append((fact.conn, lost, Witness.closed(fact.conn)))

    def finish(self, state: TraceState) -> Iterable[Finding] | None:
        out = []
        for conn, lost, closed in self.closed:
            if conn.replaced_by is not None or conn.n < self.highest:
                continue  # a later connection: unconfirmed-item-lost-on-reconnect's or RT124's to judge
            end = closed.line if closed else state.last_line
            late = " written after the close"
            listed = ", ".join(_what_is_lost(c) + (late if c.line > end else "") for c in lost[:4])
            if len(lost) > 4:
                listed += f" and {len(lost) - 4} more"
            out.append(
                self.finding(
                    conn.n,
                    f"connection {conn.n} closed at line {end} with {_changes(len(lost))} unanswered, never sent again",
                    f"Connection {conn.n} closed at line {end} while the server had not answered {listed}; no "
                    f"connection followed it, so the user lost {'it' if len(lost) == 1 else 'them'} with the session.",
                    [*(Witness.sent(c) for c in lost[:4]), closed],
                    state.last_line,
                    items=[c.item_id for c in lost],
                    call_ids=[c.call_id for c in lost],
                    event_ids=[c.event_id for c in lost],
                )
            )
        return out


def _changes(n: int) -> str:
    return "1 change" if n == 1 else f"{n} changes"


#: Client events that restore the old session's settings on a new connection.
_SETTINGS: Final = ("session.update", "transcription_session.update")


class ReconnectRestoresNothing(Rule[Config]):
    """A connection replaced one that held a conversation, and a response ran on it without anything restored:
    no `session.update` and no old item re-created and accepted.

    **What it means.** A new connection is a new, empty session with default settings (docs/protocol.md section 3):
    the model answers with no memory of the conversation, the default instructions, voice and tools. The user
    hears an agent that forgot everything, and a tool output sent later is rejected (`invalid_tool_call_id`).

    **How it is judged.** At the first response of the new connection (a `response.create`, or a response the
    server starts on its own). A restore is a `session.update`, or a create that re-creates an item the old
    connection held, with the same type (the same item id, the same `call_id`, or a message with the same role and
    text) and that the server accepted. A `function_call_output` for a call the new session does not hold (no
    `function_call` of that `call_id` re-created before it) restores nothing, and neither does a create the
    server rejected: a queue of the old connection flushed onto the new one is no replay. When a candidate
    restore is still unanswered at the response, the judgement waits for its answer (reported at the rejection).
    Only when the old connection held at least one item. A new connection with no response yet (a trace that
    ends), or whose candidate restore is never answered, is not judged. A recorder that cannot see the client's
    reconnect events (a log that omits the replay) says so with `"replay_visible": false` on the new connection's
    `connection.opened` note: then it is not judged.

    **Minimal example.**

        [conn 1] S> conversation.item.added function_call item_fc (call_1)
        [conn 1] -- closed --
        [conn 2] C> conversation.item.create function_call_output (call_1)  -> invalid_tool_call_id
        [conn 2] C> response.create            <- no session.update, nothing of conn 1 re-created

    **Usual cause.** A reconnect that only reopens the socket and flushes what was queued meanwhile (the openai
    SDKs' opt-in reconnect), or a replay that runs after the first `response.create` instead of before it.

    **Fix.** On reconnect, send the session configuration (`session.update`) and replay the conversation, with
    its function calls and outputs, before asking for any response (then flush the queue).
    """

    id = "RT123"
    slug = "reconnect-restores-nothing"
    severity = "warning"
    title = "a reconnect asked for a response without restoring the session or the conversation"
    fix = "On reconnect, send session.update and replay the conversation before the first response.create."
    needs = ("reconnect-replay",)

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        #: new conn -> what it restored so far, while nothing is known to be restored and no response was judged.
        self.watch: dict[int, _Restore] = {}
        #: replaced conn -> (it, its event count then, the (role, text) of its messages), while a watch needs it.
        self.messages: dict[int, tuple[Connection, int, set[tuple[str | None, str]]]] = {}

    @on(Reconnected)
    def reconnected(self, fact: Reconnected, state: TraceState) -> list[Finding] | None:
        if not len(fact.previous.conv) or not fact.conn.replay_visible:
            return None
        self.watch[fact.conn.n] = _Restore(fact.previous, fact.conn)
        for change in fact.early:
            out = self._change(change, fact.rec.line)
            if fact.conn.n not in self.watch:
                return out
        # an early change may have been answered before the pairing was known
        watch = self.watch.get(fact.conn.n)
        if watch is not None and watch.candidates:
            return self._settle(fact.conn.n, fact.rec.line)
        return None

    @on(ChangeSent, kinds=[*_SETTINGS, _CREATE, "response.create"], after=[Reconnected])
    def sent(self, fact: ChangeSent, state: TraceState) -> list[Finding] | None:
        return self._change(fact.change, fact.rec.line) if fact.change.conn in self.watch else None

    @on(ChangeAnswered, kinds=[_CREATE], after=[Reconnected])
    def answered(self, fact: ChangeAnswered, state: TraceState) -> list[Finding] | None:
        watch = self.watch.get(fact.change.conn)
        if watch is None or fact.change not in watch.candidates:
            return None
        return self._settle(fact.change.conn, fact.rec.line)

    @on(ResponseCreated, after=[Reconnected])
    def response_created(self, fact: ResponseCreated, state: TraceState) -> list[Finding] | None:
        n = fact.conn.n
        watch = self.watch.get(n)
        if watch is None or fact.response.request is not None or watch.trigger is not None:
            return None
        watch.trigger = (Witness.of(fact.rec), "the server starts a response")
        return self._settle(n, fact.rec.line)

    @on(ConnClosed, after=[Reconnected])
    def conn_closed(self, fact: ConnClosed, state: TraceState) -> None:
        if fact.conn.n in self.watch:
            self._unwatch(fact.conn.n)  # a candidate never answered: whether it restored is not known

    def _unwatch(self, n: int) -> _Restore:
        watch = self.watch.pop(n)
        self.messages.pop(watch.previous.n, None)
        return watch

    def _change(self, change: Change, at: int) -> list[Finding] | None:
        watch = self.watch[change.conn]
        if change.kind in _SETTINGS:
            self._unwatch(change.conn)
            return None
        if change.kind == _CREATE:
            if self._recreates(change, watch):
                watch.candidates.append(change)
                if change.item_type == "function_call" and change.call_id:
                    watch.calls.add(change.call_id)
                return self._settle(change.conn, at) if change.status != "pending" else None
            return None
        if change.kind != "response.create" or watch.trigger is not None:
            return None
        watch.trigger = (Witness.sent(change), "asks for a response")
        return self._settle(change.conn, at)

    def _settle(self, n: int, at: int) -> list[Finding] | None:
        """Judge `n` if it can be: restored once a candidate is accepted; nothing restored once a response ran and
        no candidate can still be accepted."""
        watch = self.watch[n]
        if any(c.status == "confirmed" for c in watch.candidates):
            self._unwatch(n)
            return None
        if watch.trigger is None or any(c.status == "pending" for c in watch.candidates):
            return None
        self._unwatch(n)
        trigger, what = watch.trigger
        return [self._finding(watch, trigger, what, at)]

    def _finding(self, watch: _Restore, trigger: Witness, what: str, at: int) -> Finding:
        previous, conn = watch.previous, watch.conn
        held = list(previous.conv)
        kinds = ", ".join(dict.fromkeys(f"{i.role} message" if i.type == "message" else i.type for i in held))
        opened = Witness(conn.opened_line, conn.opened_t, "meta", conn.n, "connection.opened", "connection opened")
        rejected = [c for c in watch.candidates if c.status == "rejected"]
        tried = ""
        for c in watch.flushed[:2]:
            tried += f" Line {c.line} ({c.summary}) names a call the new session does not hold: it restores nothing."
        if rejected:
            listed = ", ".join(str(c.line) for c in rejected[:3])
            lines = f"line{'s' if len(rejected) > 1 else ''} {listed}"
            tried += f" The server rejected {lines}: a rejected create restores nothing."
        return self.finding(
            conn.n,
            f"connection {conn.n}: a response at line {trigger.line} from an empty session",
            f"Connection {previous.n} held {len(held)} item{'' if len(held) == 1 else 's'} ({kinds}) when it ended "
            f"at line {previous.closed_line}. Connection {conn.n} (opened at line {conn.opened_line}) sent no "
            f"session.update and re-created none of them (accepted) before line {trigger.line}, where it {what}: "
            f"the model answers from an empty session with default settings.{tried}",
            [
                Witness.closed(previous),
                opened,
                *(Witness.sent(c) for c in watch.flushed[:2]),
                *(Witness.answer(c) for c in rejected[:2]),
                trigger,
            ],
            at,
            items=[i.id for i in held[:8]],
        )

    def _recreates(self, change: Change, watch: _Restore) -> bool:
        """Whether a create may restore what `watch.previous` held: an item of the same type under the same id or
        the same call_id, or a message with the same role and text (a replay under new ids). A
        `function_call_output` counts only when the new session holds its call (re-created before it); one that
        does not is noted in `watch.flushed`."""
        item_type, call_id, item_id = change.item_type, change.call_id, change.item_id
        if item_type is None:
            return False
        previous = watch.previous
        if item_type == "function_call_output":
            if not call_id:
                return False
            old_call = call_id in previous.conv.by_call or call_id in previous.conv.outputs_by_call
            if old_call and call_id not in watch.calls and call_id not in watch.conn.conv.by_call:
                watch.flushed.append(change)
                return False
            return old_call
        if item_id and item_id in previous.conv and previous.conv.items[item_id].type == item_type:
            return True
        if item_type == "function_call" and call_id and call_id in previous.conv.by_call:
            return True
        item = change.sent_item()  # (sent: its event is kept, and its text is what a replay would repeat)
        if item_type != "message" or item is None or not item.text:
            return False
        # The messages `previous` holds, by (role, text), taken again only when a record of its own came since (a
        # late event): a replay of N messages under new ids costs O(N), not O(N) per message.
        cached = self.messages.get(previous.n)
        if cached is None or cached[0] is not previous or cached[1] != previous.events:
            said = {(old.role, old.text) for old in previous.conv if old.type == "message"}
            cached = self.messages[previous.n] = (previous, previous.events, said)
        return (item.role, item.text) in cached[2]


class _Restore:
    """What a new connection did towards restoring the one it replaced (`ReconnectRestoresNothing`)."""

    __slots__ = ("calls", "candidates", "conn", "flushed", "previous", "trigger")

    def __init__(self, previous: Connection, conn: Connection) -> None:
        self.previous = previous
        self.conn = conn
        #: Creates that restore an old item if the server accepts them.
        self.candidates: list[Change] = []
        #: call_ids of the old calls re-created on the new connection (their outputs may follow).
        self.calls: set[str] = set()
        #: Outputs of old calls the new session does not hold (a flushed queue), for the explanation.
        self.flushed: list[Change] = []
        #: The first response (its witness and what it was), once one ran.
        self.trigger: tuple[Witness, str] | None = None


class ResponseCreateLostOnReconnect(Rule[Config]):
    """A `response.create` had no answer when its connection closed, the client reconnected, and no later
    connection asked for a response again.

    **What it means.** The reply the agent asked for is lost: the user's turn gets no answer, and a client
    waiting for that response's `response.created` times out (livekit-agents 1.8.9: "pending response discarded
    due to session reconnection"; 2.0.0b1 re-sends it on the new connection).

    **How it is judged.** Needs the end of the trace. The `response.create` was unanswered at the close, or was
    written into the closing socket after the close was noted. The connection that closed was replaced by a
    reconnect (whatever the order of the `connection.opened` / `connection.closed` lines), and no later connection
    sent a
    `response.create` (in the conversation or out of band) or got a response the server started on its own. A
    trace that simply ends while the connection is open is not reported; a close with no reconnect is
    `changes-lost-at-final-close`. Not judged when the replacing connection's replay was not visible to the
    recorder (`"replay_visible": false`).

    **Minimal example.**

        [conn 1] C> response.create
        [conn 1] -- closed --                   <- no response.created
        [conn 2] C> session.update, conversation.item.create ...   (replay, no response.create)

    **Usual cause.** A reconnect that drops pending `generate_reply` requests instead of re-queueing them.

    **Fix.** Keep unanswered `response.create`s across the reconnect and send them again after the replay (or
    fail the turn visibly).
    """

    id = "RT124"
    slug = "response-create-lost-on-reconnect"
    severity = "warning"
    title = "a response.create unanswered at a close was never sent again after the reconnect"
    fix = "Re-send unanswered response.create events after the reconnect replay, or fail the turn visibly."
    needs = ("reconnect-replay",)

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        #: response.creates unanswered at a close and not asked for again since, by seq, each with its close and
        #: the connection that replaced it.
        self.lost: dict[int, tuple[Change, Witness | None, list[int]]] = {}
        #: Seqs of those whose connection no reconnect replaced yet, by the connection's ordinal.
        self.unreplaced: dict[int, list[int]] = {}
        #: (ordinal, seq) of those replaced: a heap, so that a later request settles the oldest first.
        self.replaced: list[tuple[int, int]] = []

    @on(ConnClosed, SentIntoClosing)
    def conn_closed(self, fact: ConnClosed | SentIntoClosing, state: TraceState) -> None:
        if fact.conn.ended_by == "trace-end":
            return
        late = isinstance(fact, SentIntoClosing)
        for change in fact.changes if late else fact.indeterminate:  # type: ignore[union-attr]
            if change.kind != "response.create":
                continue
            self.lost[change.seq] = (change, Witness.closed(fact.conn) if late else Witness.answer(change), [])
            if late and fact.conn.replaced_by is not None:  # written into a socket already replaced
                self.lost[change.seq][2].append(fact.conn.replaced_by)
                heapq.heappush(self.replaced, (change.conn, change.seq))
            else:
                self.unreplaced.setdefault(change.conn, []).append(change.seq)

    @on(Reconnected)
    def reconnected(self, fact: Reconnected, state: TraceState) -> None:
        for seq in self.unreplaced.pop(fact.previous.n, ()):
            change, _, replaced_by = self.lost[seq]
            replaced_by.append(fact.conn.n)
            heapq.heappush(self.replaced, (change.conn, seq))
        for change in fact.early:
            self._asked(change.conn, change.kind)

    @on(ChangeSent, kinds=["response.create"], after=[Reconnected, SentIntoClosing])
    def sent(self, fact: ChangeSent, state: TraceState) -> None:
        self._asked(fact.change.conn, fact.change.kind)

    @on(ResponseCreated, after=[Reconnected, SentIntoClosing])
    def response_created(self, fact: ResponseCreated, state: TraceState) -> None:
        if fact.response.request is None:
            self._asked(fact.conn.n, "response.create")

    def _asked(self, conn: int, kind: str) -> None:
        """A request on `conn` settles every replaced one of an older connection."""
        if kind == "response.create":
            heap = self.replaced
            while heap and heap[0][0] < conn:
                del self.lost[heapq.heappop(heap)[1]]

    def finish(self, state: TraceState) -> Iterable[Finding] | None:
        out = []
        for change, closed, replaced_by in self.lost.values():
            if not replaced_by or not all(state.conns[n].replay_visible for n in replaced_by):
                continue  # not replaced, or by a connection whose replay (which may ask again) is unseen
            end = f" at line {closed.line}" if closed else ""
            out.append(
                self.finding(
                    change.conn,
                    f"response.create at line {change.line} lost on reconnect",
                    f"Line {change.line} ({change.summary}) had no answer when connection {change.conn} ended{end}; "
                    f"connection {replaced_by[0]} replaced it, and no connection after it asked for a response "
                    f"again until the trace ends at line {state.last_line}: the reply is lost.",
                    [Witness.sent(change), closed],
                    state.last_line,
                    event_ids=[change.event_id],
                )
            )
        return out
