"""The state of one trace: connections, their server conversation, pending client changes, responses.

Ground rules of this module (the reducer relies on them):

* Everything is keyed by connection. A websocket connection is a new, empty server conversation; no id
  carries over to the next connection unless the client creates it again (docs/protocol.md section 3). A new
  connection *replaces* the latest one that ended before it opened, or shortly after (a client may open the
  new socket before the old one's close is recorded): the reducer pairs them whatever the order of the lines.
* The server conversation is what the server's own events say, in order. `previous_item_id` on a server event
  is the id of the item now before the new one (`None`: it is first). It is a `core.conversation.Conversation`:
  linked by id, so inserting, deleting and finding a call are O(1) whatever the length of an hour-long call.
* A client change (create, delete, truncate, retrieve, response.create, session.update, ...) is *pending* from
  the moment it is sent until the server answers it: then it is *confirmed* or *rejected* (an `error`). A change
  still pending when its connection closes is *indeterminate*: the client cannot know whether it happened.
* The client view is the server conversation with every pending change applied on top (what a client that
  trusts its own sends believes), unless the trace carries `local.conversation` snapshots: then it is the
  latest snapshot. It is computed on demand, never maintained per event.
* Payloads are not kept: an item keeps its ids, kind, status and a short text preview, so memory follows the
  number of items, not the bytes of audio that crossed the wire (`Item.wire` stays None here; see
  `rtrace.core.conversation` for the model's own rules, duplicate ids included).

No I/O, no asyncio, no rendering here. The fake server (`rtrace.net.endpoint`) keeps its conversations in the same
`Conversation` and each of its responses in a `Response`.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterable, Iterator
from typing import Any, Final, Literal

import orjson
from mypy_extensions import mypyc_attr

from .audio import DEFAULT_FORMAT, audio_ms
from .conversation import Conversation, Item

ChangeStatus = Literal["pending", "confirmed", "rejected", "indeterminate"]
#: How many of the oldest pending changes `Pending.naming` looks at (errors are rare; the cost stays linear).
NAMING_LIMIT = 64


@dataclasses.dataclass(slots=True, eq=False)
class Change:
    """A client event that awaits an answer from the server."""

    #: The client event type (`conversation.item.create`, `response.create`, ...).
    kind: str
    conn: int
    seq: int
    line: int
    t: float
    event_id: str | None = None
    #: One line saying what was sent (`create function_call_output item_x (call_y) after item_z`).
    summary: str = ""
    #: The item the change is about (create: the new item's id when the client chose one).
    item_id: str | None = None
    #: For creates: the item as sent.
    item: Item | None = None
    previous_item_id: str | None = None
    #: For truncates.
    audio_end_ms: int | None = None
    #: For response.create: `response.conversation` ("auto" or "none") and the metadata it asked to echo.
    conversation: str = "auto"
    metadata: dict[str, Any] | None = None
    #: The client event as sent, while the change waits (an error that names a field of it, `param`, is joined
    #: by it: `Pending.naming`); dropped once answered. As its JSON text when the change was sent behind
    #: `reducer.SENT_KEPT` others still waiting (a pipeline): the text takes a quarter of the parsed event's
    #: memory, and is parsed again only when an error makes `naming` walk that far.
    sent: dict[str, Any] | str | None = None
    status: ChangeStatus = "pending"
    #: The line and time of the answer (confirmation, error, or the close that made it indeterminate).
    answer_line: int | None = None
    answer_t: float | None = None
    #: For rejected changes: the error object.
    error: dict[str, Any] | None = None

    def __init__(
        self,
        kind: str,
        conn: int,
        seq: int,
        line: int,
        t: float,
        event_id: str | None = None,
        summary: str = "",
        item_id: str | None = None,
        item: Item | None = None,
        previous_item_id: str | None = None,
        audio_end_ms: int | None = None,
        conversation: str = "auto",
        metadata: dict[str, Any] | None = None,
        sent: dict[str, Any] | str | None = None,
        status: ChangeStatus = "pending",
        answer_line: int | None = None,
        answer_t: float | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        self.kind = kind
        self.conn = conn
        self.seq = seq
        self.line = line
        self.t = t
        self.event_id = event_id
        self.summary = summary
        self.item_id = item_id
        self.item = item
        self.previous_item_id = previous_item_id
        self.audio_end_ms = audio_end_ms
        self.conversation = conversation
        self.metadata = metadata
        self.sent = sent
        self.status = status
        self.answer_line = answer_line
        self.answer_t = answer_t
        self.error = error

    @property
    def short(self) -> str:
        """`conversation.item.create` -> `create`."""
        return self.kind.rsplit(".", 1)[-1]

    def latency(self) -> float | None:
        return None if self.answer_t is None else self.answer_t - self.t


# -- pending changes -----------------------------------------------------------------------------------------

_CREATE: Final = "conversation.item.create"
_DELETE: Final = "conversation.item.delete"


class _Queue:
    """Two or more pending changes under one key of a `Pending` index, oldest first. A change answered leaves it
    lazily: the head moves past answered ones, and the list is compacted once they outnumber the pending ones, so
    each change costs O(1) amortized and the list holds at most twice what is pending."""

    __slots__ = ("changes", "dead", "head", "live")

    def __init__(self, first: Change, second: Change) -> None:
        self.changes = [first, second]
        self.head = 0
        self.live = 2
        self.dead = 0


#: One key's pending changes: the change itself when it is the only one (the usual case: no container), else a
#: `_Queue`.
_Bucket = Change | _Queue
#: An index with nothing filed in it yet, shared (never written: `Pending.add` makes a real one first).
_NONE: Final[dict[Any, Any]] = {}


def _file(index: dict[Any, _Bucket], key: Any, change: Change) -> None:
    """File `change` (the newest) under `key` of `index`."""
    held = index.get(key)
    if held is None:
        index[key] = change
    elif type(held) is _Queue:
        held.changes.append(change)
        held.live += 1
    else:
        index[key] = _Queue(held, change)  # type: ignore[arg-type]


def _unfile(index: dict[Any, _Bucket], key: Any, change: Change, seqs: dict[int, Change]) -> None:
    """Take `change`, just removed from `seqs` (the pending changes by seq), from under `key` of `index`."""
    held = index[key]
    if held is change:
        del index[key]
        return
    assert type(held) is _Queue
    held.live -= 1
    if not held.live:
        del index[key]
        return
    held.dead += 1
    if held.dead > held.live:
        held.changes = [c for c in held.changes[held.head :] if seqs.get(c.seq) is c]
        held.head = held.dead = 0


class Pending:
    """The changes of one connection still awaiting an answer, oldest first (by `seq`).

    A mapping seq -> `Change` for whoever walks them all (the client view, `show`); and the lookups the reducer
    and the rules make, each O(1) (amortized) however many changes wait: the oldest of a kind, the oldest of a
    kind about one item id, the oldest id-less create of an item type, the oldest `response.create` in or out of
    the conversation, and the changes that carry an event id, a call_id, or quote an id. Adding and removing a
    change is O(1) as well: a pipeline of 200,000 creates acknowledged in order costs what one create costs, 200,000
    times. A change's fields must not change while it waits (they are its keys), and only a create carries an item
    and a `previous_item_id` (as the reducer makes them).
    """

    __slots__ = ("_calls", "_events", "_idless", "_items", "_kinds", "_prevs", "_removed", "_replies", "_seqs")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        #: Every pending change by seq, in seq order.
        self._seqs: dict[int, Change] = {}
        # The indexes, each the shared empty `_NONE` until a change is filed in it (most connections, and every
        # closed one, have nothing pending: they cost no dict).
        #: By kind (`conversation.item.create`, ...).
        self._kinds: dict[str, _Bucket] = _NONE
        #: kind -> item id -> changes about that id (`Change.item_id`).
        self._items: dict[str, dict[str, _Bucket]] = _NONE
        #: Creates without an item id, by the type of the item they carry (None: no item).
        self._idless: dict[str | None, _Bucket] = _NONE
        #: By `event_id`, any kind: None until an event id is looked up (an error that carries one, a response
        #: that echoes one), then built from `_seqs` and kept (most traces never look one up: a change costs no
        #: entry there).
        self._events: dict[str, _Bucket] | None = None
        #: Creates by the call_id of their item, and by their `previous_item_id` (that one only once an error quoted
        #: an id: None until then, built from `_seqs` when first needed).
        self._calls: dict[str, _Bucket] = _NONE
        self._prevs: dict[str, _Bucket] | None = None
        #: `response.create`s by whether they are in the conversation (`conversation` is not "none").
        self._replies: dict[bool, _Bucket] = _NONE
        #: Removals since `_seqs` was last rebuilt (a dict keeps the slots of removed keys until it grows).
        self._removed = 0

    # -- the mapping ------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._seqs)

    def __bool__(self) -> bool:
        return bool(self._seqs)

    def __iter__(self) -> Iterator[int]:
        return iter(self._seqs)

    def __contains__(self, seq: object) -> bool:
        return seq in self._seqs

    def __getitem__(self, seq: int) -> Change:
        return self._seqs[seq]

    def __setitem__(self, seq: int, change: Change) -> None:
        if seq != change.seq:
            raise ValueError(f"change of seq {change.seq} filed under {seq}")
        self.add(change)

    def __delitem__(self, seq: int) -> None:
        self.remove(self._seqs[seq])

    def values(self) -> Iterable[Change]:
        return self._seqs.values()

    def items(self) -> Iterable[tuple[int, Change]]:
        return self._seqs.items()

    def clear(self) -> None:
        self._reset()

    # -- adding and removing ----------------------------------------------------------------------------------

    def add(self, change: Change) -> None:
        """File a change just sent (its seq is the newest)."""
        seqs = self._seqs
        if change.seq in seqs:
            raise ValueError(f"a change of seq {change.seq} is pending already")
        seqs[change.seq] = change
        # Each index it belongs in, made real first (`remove` takes it out of the same ones).
        kind = change.kind
        if self._kinds is _NONE:
            self._kinds, self._items = {}, {}
        _file(self._kinds, kind, change)
        item_id = change.item_id
        if item_id is not None:
            by_id = self._items.get(kind)
            if by_id is None:
                self._items[kind] = {item_id: change}
            elif item_id not in by_id:
                by_id[item_id] = change
            else:
                _file(by_id, item_id, change)
        event_id = change.event_id
        if event_id is not None and self._events is not None:
            _file(self._events, event_id, change)
        if kind == _CREATE:
            item = change.item
            if item_id is None:
                if self._idless is _NONE:
                    self._idless = {}
                _file(self._idless, item.type if item is not None else None, change)
            if item is not None and item.call_id is not None:
                if self._calls is _NONE:
                    self._calls = {}
                _file(self._calls, item.call_id, change)
            if change.previous_item_id is not None and self._prevs is not None:
                _file(self._prevs, change.previous_item_id, change)
        elif kind == "response.create":
            if self._replies is _NONE:
                self._replies = {}
            _file(self._replies, change.conversation != "none", change)

    def remove(self, change: Change) -> None:
        """Take an answered change out (KeyError when it is not pending)."""
        seqs = self._seqs
        if seqs.get(change.seq) is not change:
            raise KeyError(change.seq)
        del seqs[change.seq]
        kind = change.kind
        _unfile(self._kinds, kind, change, seqs)
        if change.item_id is not None:
            _unfile(self._items[kind], change.item_id, change, seqs)
        if change.event_id is not None and self._events is not None:
            _unfile(self._events, change.event_id, change, seqs)
        if kind == _CREATE:
            item = change.item
            if change.item_id is None:
                _unfile(self._idless, item.type if item is not None else None, change, seqs)
            if item is not None and item.call_id is not None:
                _unfile(self._calls, item.call_id, change, seqs)
            if change.previous_item_id is not None and self._prevs is not None:
                _unfile(self._prevs, change.previous_item_id, change, seqs)
        elif kind == "response.create":
            _unfile(self._replies, change.conversation != "none", change, seqs)
        self._removed += 1
        if self._removed > 2 * len(seqs) + 64:
            self._seqs = dict(seqs)  # a copy keeps no slot of the removed keys: walks stay O(pending)
            self._removed = 0

    # -- lookups ----------------------------------------------------------------------------------------------

    def _first(self, index: dict[Any, _Bucket] | None, key: Any) -> Change | None:
        held = index.get(key) if index else None
        if held is None or type(held) is not _Queue:
            return held  # type: ignore[return-value]
        changes, k, seqs = held.changes, held.head, self._seqs
        while seqs.get(changes[k].seq) is not changes[k]:
            k += 1
        held.head = k
        return changes[k]

    def _all(self, index: dict[Any, _Bucket] | None, key: Any, limit: int | None = None) -> list[Change]:
        """The pending changes under `key`, oldest first (the first `limit` of them)."""
        held = index.get(key) if index else None
        if held is None:
            return []
        if type(held) is not _Queue:
            return [held]  # type: ignore[list-item]
        seqs = self._seqs
        if limit is None:
            return [c for c in held.changes[held.head :] if seqs.get(c.seq) is c]
        out: list[Change] = []
        for c in itertools.islice(held.changes, held.head, None):
            if seqs.get(c.seq) is c:
                out.append(c)
                if len(out) == limit:
                    break
        return out

    def oldest(self, kind: str, item_id: str | None = None) -> Change | None:
        """The oldest pending change of `kind` (about `item_id`, when given)."""
        if item_id is None:
            return self._first(self._kinds, kind)
        by_id = self._items.get(kind)
        held = by_id.get(item_id) if by_id else None
        if held is None or type(held) is not _Queue:  # (`_first`, inline: one change is the usual case)
            return held  # type: ignore[return-value]
        return self._first(by_id, item_id)

    def oldest_of(self, kinds: Iterable[str] | None) -> Change | None:
        """The oldest pending change of any of `kinds` (None: of any kind)."""
        found = None
        for kind in self._kinds if kinds is None else kinds:
            change = self._first(self._kinds, kind)
            if change is not None and (found is None or change.seq < found.seq):
                found = change
        return found

    def oldest_idless_create(self, item_type: str) -> Change | None:
        """The oldest create without an item id whose item is of `item_type` (or that carries no item)."""
        typed = self._first(self._idless, item_type)
        bare = self._first(self._idless, None)
        if typed is None or (bare is not None and bare.seq < typed.seq):
            return bare
        return typed

    def oldest_reply(self, in_conversation: bool) -> Change | None:
        """The oldest `response.create` in the conversation (True) or out of band (False)."""
        return self._first(self._replies, in_conversation)

    def oldest_replies(self, in_conversation: bool, count: int) -> list[Change]:
        """The oldest `count` `response.create`s in the conversation (True) or out of band (False)."""
        return self._all(self._replies, in_conversation, count)

    def with_event_id(self, event_id: str, kind: str | None = None) -> Change | None:
        """The oldest pending change (of `kind`, when given) that carries `event_id`."""
        if not self._seqs:
            return None
        if self._events is None:
            self._events = {}
            for filed in self._seqs.values():
                if filed.event_id is not None:
                    _file(self._events, filed.event_id, filed)
        for change in self._all(self._events, event_id):
            if kind is None or change.kind == kind:
                return change
        return None

    def quoting(self, quoted: Iterable[str], kinds: frozenset[str] | None) -> Change | None:
        """The oldest pending change of one of `kinds` (None: any) whose item id, previous_item_id or item call_id
        is one of `quoted`."""
        found: Change | None = None
        creates = kinds is None or _CREATE in kinds
        if creates and self._prevs is None:
            self._prevs = {}
            for filed in self._seqs.values():
                if filed.kind == _CREATE and filed.previous_item_id is not None:
                    _file(self._prevs, filed.previous_item_id, filed)
        for key in quoted:
            held = [self._first(by_id, key) for kind, by_id in self._items.items() if kinds is None or kind in kinds]
            if creates:
                held += (self._first(self._prevs, key), self._first(self._calls, key))
            for change in held:
                if change is not None and (found is None or change.seq < found.seq):
                    found = change
        return found

    def naming(
        self, param: str, quoted: set[str], kinds: frozenset[str] | None, limit: int = NAMING_LIMIT
    ) -> Change | None:
        """The oldest pending change (of one of `kinds`; None: any), among the first `limit`, whose event as sent
        has the field `param` (`item.content[0].type`) holding one of the `quoted` values (any value when none is
        quoted). Errors are rare and the walk stops at `limit`: the cost stays linear in the trace."""
        path = field_path(param)
        if path is None:
            return None
        for n, change in enumerate(self._seqs.values()):
            if n >= limit:
                return None
            sent = change.sent
            if (kinds is not None and change.kind not in kinds) or sent is None:
                continue
            found, value = lookup(orjson.loads(sent) if type(sent) is str else sent, path)
            if found and (not quoted or (isinstance(value, str | int | float) and str(value) in quoted)):
                return change
        return None

    def about(self, kind: str, item_id: str) -> list[Change]:
        """The pending changes of `kind` about `item_id`, oldest first."""
        return self._all(self._items.get(kind), item_id)

    def creates_for_call(self, call_id: str) -> list[Change]:
        """The pending creates of an item carrying `call_id`, oldest first."""
        return self._all(self._calls, call_id)

    def count(self, kind: str) -> int:
        held = self._kinds.get(kind)
        if held is None:
            return 0
        return held.live if type(held) is _Queue else 1


@dataclasses.dataclass(slots=True, eq=False)
class Response:
    """One response, from `response.created` to its terminal `response.done`."""

    id: str
    conn: int
    created_line: int
    created_t: float
    status: str = "in_progress"
    done_line: int | None = None
    done_t: float | None = None
    #: Ids of the output items, in output order.
    output: list[str] = dataclasses.field(default_factory=list)
    #: The client `response.create` that asked for it (None: server-initiated, e.g. server VAD).
    request: Change | None = None
    #: False for out-of-band responses (`conversation: none`), which do not touch the default conversation.
    in_conversation: bool = True
    #: Set when the response never reached `response.done`: `replaced` or `closed`.
    orphaned: str | None = None
    error: dict[str, Any] | None = None

    def __init__(
        self,
        id: str,
        conn: int,
        created_line: int,
        created_t: float,
        status: str = "in_progress",
        done_line: int | None = None,
        done_t: float | None = None,
        output: list[str] | None = None,
        request: Change | None = None,
        in_conversation: bool = True,
        orphaned: str | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.conn = conn
        self.created_line = created_line
        self.created_t = created_t
        self.status = status
        self.done_line = done_line
        self.done_t = done_t
        self.output = [] if output is None else output
        self.request = request
        self.in_conversation = in_conversation
        self.orphaned = orphaned
        self.error = error

    @property
    def open(self) -> bool:
        return self.done_line is None and self.orphaned is None


@dataclasses.dataclass(slots=True, eq=False)
class Connection:
    """One websocket connection: its server conversation, pending client changes and responses."""

    n: int
    opened_line: int
    opened_t: float
    #: True when a `connection.opened` note was recorded (then only `connection.closed` closes it).
    explicit: bool = False
    path: str | None = None
    closed_line: int | None = None
    closed_t: float | None = None
    close_code: int | None = None
    close_reason: str | None = None
    #: Why it ended: `closed` (recorded), `superseded` (a later connection began, no close recorded),
    #: `trace-end` (the trace stops while it is open).
    ended_by: str | None = None
    #: The connection this one replaced (a reconnect), and the one that replaced this one: ordinals, set when the
    #: reducer pairs them (`reducer.OVERLAP_WINDOW`).
    replaces: int | None = None
    replaced_by: int | None = None
    #: False when the recorder says it could not see the client's events on reconnect (`connection.opened` with
    #: `"replay_visible": false`, e.g. a trace converted from a log that omits the replay).
    replay_visible: bool = True
    #: Changes sent while the connection this one replaces may still be open: kept until the pairing is known.
    early: list[Change] | None = None
    conv: Conversation = dataclasses.field(default_factory=Conversation)
    #: Every change still awaiting an answer, oldest first, keyed by seq (with the lookups of `Pending`).
    pending: Pending = dataclasses.field(default_factory=Pending)
    #: Responses by id: every open one and the latest done ones (see `reducer.KEPT_DONE_RESPONSES`).
    responses: dict[str, Response] = dataclasses.field(default_factory=dict)
    #: Ids of the done responses still in `responses`, oldest first.
    done_responses: list[str] = dataclasses.field(default_factory=list)
    #: The in-conversation response currently generating.
    active: Response | None = None
    #: Item ids announced by `input_audio_buffer.committed` and not yet added.
    committed_audio: set[str] = dataclasses.field(default_factory=set)
    #: Output audio format from the session, for turning audio bytes into milliseconds.
    audio_rate: int = DEFAULT_FORMAT[0]
    audio_sample_bytes: int = DEFAULT_FORMAT[1]
    #: Latest `local.conversation` snapshot: item dicts in the client's own order, and its line.
    local: list[Item] | None = None
    local_line: int | None = None
    #: Last time anything happened on this connection.
    last_t: float = 0.0
    events: int = 0
    #: A fault the fake endpoint injected (`FaultInjected`) will answer next: its `error` is not the server's
    #: verdict. The line of the last such answer (0: none): rules judge the client's reaction to it, not it.
    fault_pending: bool = False
    injected_line: int = 0

    @property
    def open(self) -> bool:
        return self.ended_by is None

    def audio_ms(self, item: Item) -> float:
        return audio_ms(item.audio_bytes, self.audio_rate, self.audio_sample_bytes)

    # -- the conversation the server will judge the next client event against ----------------------------

    def expected_ids(self) -> list[str]:
        """The client view built from pending changes: confirmed conversation + pending creates - pending deletes.

        This is what the server will hold once it has processed everything already sent (events are handled
        in arrival order), assuming each pending change succeeds. O(items + pending): the changes are applied to
        a linked copy of the conversation (`Conversation.linked_copy`).
        """
        if not self.pending:
            return self.conv.ids()
        view = self.conv.linked_copy()
        for change in self.pending.values():
            item_id = change.item_id
            if change.kind == "conversation.item.delete" and item_id is not None and item_id in view:
                view.remove(item_id)
            elif change.kind == "conversation.item.create" and item_id and item_id not in view:
                prev = change.previous_item_id
                after = None if prev == "root" else prev if prev and prev in view else view.tail
                view.insert(Item(id=item_id, type="message"), after)
        return view.ids()

    def expected_item(self, item_id: str) -> Item | None:
        """The item `item_id` as the server will hold it after pending changes (None: not there)."""
        found = self.conv.get(item_id)
        if not self.pending:
            return found
        changes = self.pending.about(_DELETE, item_id) + self.pending.about(_CREATE, item_id)
        for change in sorted(changes, key=_seq):
            if change.kind == _DELETE:
                found = None
            elif change.item is not None:
                found = change.item
        return found

    def expected_call(self, call_id: str) -> Item | None:
        """The `function_call` item carrying `call_id` once pending changes are applied."""
        item_id = self.conv.by_call.get(call_id)
        found = self.conv.get(item_id) if item_id else None
        if not self.pending:
            return found
        for change in self._replayed(call_id, "function_call", [found] if found is not None else []):
            if change.kind == _DELETE:
                if found is not None and change.item_id == found.id:
                    found = None
            else:
                found = change.item
        return found

    def expected_outputs(self, call_id: str) -> list[Item]:
        """`function_call_output` items answering `call_id` once pending changes are applied."""
        outs = [self.conv.items[i] for i in self.conv.outputs_by_call.get(call_id, ())]
        if not self.pending:
            return outs
        for change in self._replayed(call_id, "function_call_output", outs):
            if change.kind == _DELETE:
                outs = [o for o in outs if o.id != change.item_id]
            else:
                assert change.item is not None
                outs.append(change.item)
        return outs

    def _replayed(self, call_id: str, item_type: str, held: list[Item]) -> list[Change]:
        """The pending changes that can change which `item_type` items carry `call_id`, oldest first: the creates
        of such items, and the deletes of them or of the `held` ones (no other change can touch them)."""
        creates = [c for c in self.pending.creates_for_call(call_id) if c.item is not None and c.item.type == item_type]
        ids = {item.id for item in held}
        ids.update(c.item.id for c in creates if c.item is not None)
        deletes = [d for item_id in ids for d in self.pending.about(_DELETE, item_id)]
        return sorted(creates + deletes, key=_seq) if deletes else creates


def _seq(change: Change) -> int:
    return change.seq


@dataclasses.dataclass(slots=True, eq=False)
class TraceState:
    """Everything known after some prefix of a trace."""

    conns: dict[int, Connection] = dataclasses.field(default_factory=dict)
    #: The connection of the latest record.
    current: int | None = None
    #: The latest connection that ended (closed or superseded) and that no connection replaced yet.
    last_ended: Connection | None = None
    #: Connections opened while an older one was still open, by ordinal: each waits for the older one to end
    #: within `reducer.OVERLAP_WINDOW`, with the connection it replaces otherwise (the latest ended before it).
    awaiting: dict[int, tuple[Connection, Connection | None]] = dataclasses.field(default_factory=dict)
    #: Heaps of the ordinals of the open connections, and of the open ones without a `connection.opened` note
    #: (`reducer._open` ends those when a later one begins); an ordinal stays until it comes up after its end.
    live: list[int] = dataclasses.field(default_factory=list)
    implicit: list[int] = dataclasses.field(default_factory=list)
    #: Ordinal -> the order in which it was first seen (the order of `conns`).
    rank: dict[int, int] = dataclasses.field(default_factory=dict)
    records: int = 0
    first_t: float | None = None
    last_t: float = 0.0
    last_line: int = 0
    #: Fields of the wrong JSON type that `reducer.step` met and read as absent, the first `MAX_FIELD_PROBLEMS`:
    #: (line, path of the field in the event, what was expected, the record) -- the engine reports them.
    field_problems: list[tuple[int, tuple[str | int, ...], str, Any]] = dataclasses.field(default_factory=list)
    #: How many there were in all.
    field_problem_count: int = 0
    #: The item the latest `conversation.item.added` put in a conversation, the wire item it was read from, and
    #: `records` then: a `conversation.item.done` right after it with the same wire item (the usual pair) has
    #: nothing to fold into it (`reducer._s_item_done`).
    last_added: tuple[Item, dict[str, Any], int] | None = None

    def conn(self, n: int) -> Connection | None:
        return self.conns.get(n)

    def next_conn(self, n: int) -> Connection | None:
        """The connection that opened after `n` (the next ordinal seen), if any."""
        later = [c for c in self.conns if c > n]
        return self.conns[min(later)] if later else None

    def previous_conn(self, n: int) -> Connection | None:
        earlier = [c for c in self.conns if c < n]
        return self.conns[max(earlier)] if earlier else None


def unfinished_call(item: Item) -> bool:
    """A `function_call` a response began and never finished (no `response.function_call_arguments.done`, no
    completed item): the response was cut mid-arguments. It is not a call the client can answer."""
    return item.type == "function_call" and not item.arguments_done


def client_view(conn: Connection) -> list[str]:
    """Item ids in the order the client believes them: its latest local snapshot, else the expected ids."""
    if conn.local is not None:
        return [item.id for item in conn.local]
    return conn.expected_ids()


@mypyc_attr(native_class=False)  # crosses processes (pickled): a plain class where compiled
@dataclasses.dataclass(frozen=True, slots=True)
class Divergence:
    """Where the client view and the server conversation differ."""

    only_client: tuple[str, ...]
    only_server: tuple[str, ...]
    #: Ids present on both sides whose relative order differs.
    reordered: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.only_client or self.only_server or self.reordered)


def divergence(client_ids: list[str], server_ids: list[str]) -> Divergence:
    cset, sset = set(client_ids), set(server_ids)
    common_c = [i for i in client_ids if i in sset]
    common_s = [i for i in server_ids if i in cset]
    reordered: tuple[str, ...] = ()
    if common_c != common_s:
        pos = {item_id: k for k, item_id in enumerate(common_s)}
        keep = _longest_increasing([pos[i] for i in common_c])
        kept = {common_c[k] for k in keep}
        reordered = tuple(i for i in common_c if i not in kept)
    return Divergence(
        only_client=tuple(i for i in client_ids if i not in sset),
        only_server=tuple(i for i in server_ids if i not in cset),
        reordered=reordered,
    )


def _longest_increasing(seq: list[int]) -> list[int]:
    """Indexes of one longest strictly increasing subsequence of `seq` (patience sorting)."""
    import bisect

    tails: list[int] = []
    tails_idx: list[int] = []
    parent = [-1] * len(seq)
    for k, v in enumerate(seq):
        j = bisect.bisect_left(tails, v)
        if j == len(tails):
            tails.append(v)
            tails_idx.append(k)
        else:
            tails[j] = v
            tails_idx[j] = k
        parent[k] = tails_idx[j - 1] if j > 0 else -1
    out: list[int] = []
    k = tails_idx[-1] if tails_idx else -1
    while k != -1:
        out.append(k)
        k = parent[k]
    return out[::-1]


_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def field_path(param: str) -> tuple[str | int, ...] | None:
    """`item.content[0].type` -> ("item", "content", 0, "type"); None when it is no path."""
    parts: list[str | int] = []
    pos = 0
    for m in _PATH_PART.finditer(param):
        if m.start() != pos and param[pos : m.start()] != ".":
            return None
        parts.append(int(m.group(2)) if m.group(2) is not None else m.group(1))
        pos = m.end()
    return tuple(parts) if parts and pos == len(param) else None


def lookup(value: Any, path: tuple[str | int, ...]) -> tuple[bool, Any]:
    """(whether `path` is in `value`, what it holds)."""
    for key in path:
        if isinstance(key, int) and isinstance(value, list) and 0 <= key < len(value):
            value = value[key]
        elif isinstance(key, str) and isinstance(value, dict) and key in value:
            value = value[key]
        else:
            return False, None
    return True, value
