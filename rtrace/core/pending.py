"""The client changes still awaiting an answer: `Change` (one sent client event and its fate) and `Pending` (one
connection's, oldest first, with the O(1) lookups the reducer and the rules make), and the field path an error's
`param` names. Pure data and indexes: no I/O; what a change means to the conversation is `core.state`'s and the
reducer's.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import re
from collections.abc import Iterable, Iterator
from typing import Any, Final, Literal

import orjson

from .conversation import Item, client_item, label
from .describe import describe

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
    #: One line saying what was sent (`summary`); None for a change kept as text (`sent`): said when first read.
    said: str | None = ""
    #: The item the change is about (create: the new item's id when the client chose one).
    item_id: str | None = None
    #: For creates: the type, role and call_id of the item sent (`conversation.item_head`; type None: it sends no
    #: item). The rest of it (text, arguments) is read from the event as sent, while that is kept: `sent_item`.
    item_type: str | None = None
    role: str | None = None
    call_id: str | None = None
    previous_item_id: str | None = None
    #: For truncates.
    audio_end_ms: int | None = None
    #: For response.create: `response.conversation` ("auto" or "none") and the metadata it asked to echo.
    conversation: str = "auto"
    metadata: dict[str, Any] | None = None
    #: The client event as sent, while the change waits (an error that names a field of it, `param`, is joined
    #: by it: `Pending.naming`); dropped once answered and said. As JSON text when the change was sent behind
    #: `reducer.SENT_KEPT` others still waiting (a pipeline), without the fields the change holds (`keep_as_text`):
    #: `event()` parses it again, only when an error makes `naming` walk that far, `summary` is first read, or the
    #: item it sends is asked for (`sent_item`).
    sent: dict[str, Any] | str | None = None
    status: ChangeStatus = "pending"
    #: The line and time of the answer (confirmation, error, or the close that made it indeterminate).
    answer_line: int | None = None
    answer_t: float | None = None
    #: For rejected changes: the error object.
    error: dict[str, Any] | None = None
    #: Whether it is in a `Pending` (which alone sets it): how the indexes of that `Pending` tell a change still
    #: waiting from one answered that they let go of lazily.
    filed: bool = dataclasses.field(default=False, init=False, repr=False, compare=False)

    def __init__(
        self,
        kind: str,
        conn: int,
        seq: int,
        line: int,
        t: float,
        event_id: str | None = None,
        said: str | None = "",
        item_id: str | None = None,
        item_type: str | None = None,
        role: str | None = None,
        call_id: str | None = None,
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
        self.said = said
        self.item_id = item_id
        self.item_type = item_type
        self.role = role
        self.call_id = call_id
        self.previous_item_id = previous_item_id
        self.audio_end_ms = audio_end_ms
        self.conversation = conversation
        self.metadata = metadata
        self.sent = sent
        self.status = status
        self.answer_line = answer_line
        self.answer_t = answer_t
        self.error = error
        self.filed = False

    @property
    def summary(self) -> str:
        """One line saying what was sent (`create function_call_output item_x (call_y) after item_z`)."""
        said = self.said
        if said is None:
            event = self.event()
            said = self.said = "" if event is None else describe(self.kind, event)
        return said

    def event(self) -> dict[str, Any] | None:
        """The client event as sent (None once answered and said), parsed again if kept as text (`keep_as_text`:
        the fields it left out come back last)."""
        sent = self.sent
        if not isinstance(sent, str):
            return sent
        event: dict[str, Any] = orjson.loads(sent)
        _restore(event, "type", self.kind)
        _restore(event, "event_id", self.event_id)
        _restore(event, "previous_item_id", self.previous_item_id)
        item = event.get("item")
        if self.item_type is not None and type(item) is dict:
            _restore(item, "id", self.item_id)
            _restore(item, "type", self.item_type)
            _restore(item, "role", self.role)
            _restore(item, "call_id", self.call_id)
        return event

    def keep_as_text(self) -> bool:
        """Keep the event as sent (`sent`, parsed) as JSON text without the fields the change holds as they were
        sent, as the reducer read them from it: of the event its type (`kind`), `event_id` and `previous_item_id`,
        of the item a create sends its id, type, role and call_id. `event()` gives them back, and every field it
        gives back was in the event (the change holds one only when the event has it, but for the types, which the
        event must have: else nothing is left out). Whether it did: not for an event that is not JSON (built in
        memory by a test, not read)."""
        ev = self.sent
        if type(ev) is not dict or type(ev.get("type")) is not str:
            return False
        slim = dict(ev)
        _leave_out(slim, "type", self.kind)
        _leave_out(slim, "event_id", self.event_id)
        _leave_out(slim, "previous_item_id", self.previous_item_id)
        item = slim.get("item")
        if self.item_type is not None and isinstance(item, dict):
            if "type" not in item:  # (`item_type` is "unknown" then: `event()` could not tell it was never sent)
                return False
            item = dict(item)
            slim["item"] = item
            _leave_out(item, "id", self.item_id)
            _leave_out(item, "type", self.item_type)
            _leave_out(item, "role", self.role)
            _leave_out(item, "call_id", self.call_id)
        try:
            # A str: orjson's bytes keep the buffer they were written in (4 KiB), the decoded text only its length.
            self.sent = orjson.dumps(slim).decode()
        except (orjson.JSONEncodeError, RecursionError):
            return False
        return True

    def answered(self) -> None:
        """Drop the event as sent, unless it is the text its summary is still to be said from (`said` None)."""
        if self.said is not None:
            self.sent = None

    def item_label(self) -> str | None:
        """How people call the item a create sends (`Item.label`; None: it sends none)."""
        if self.item_type is None:
            return None
        return label(self.item_id or "", self.item_type, self.role, self.call_id)

    def sent_item(self) -> Item | None:
        """The item a create sends, as the client sent it (None: it sends none), made when asked: whole (its text
        and arguments too) while the event as sent is kept (the change waits, or its summary is still to be said),
        else only what the change holds of it (id, type, role, call_id). A new `Item` each call: what the server
        adds is another one (`answers._s_item_added`)."""
        if self.item_type is None:
            return None
        event = self.event()
        raw = None if event is None else event.get("item")
        if isinstance(raw, dict):
            item = client_item(raw)
        else:
            item = Item(self.item_id or "", self.item_type, self.role, self.call_id)
        item.source = "client"
        item.created_line = self.line
        item.created_t = self.t
        item.arguments_done = True
        return item

    @property
    def short(self) -> str:
        """`conversation.item.create` -> `create`."""
        return self.kind.rsplit(".", 1)[-1]

    def latency(self) -> float | None:
        return None if self.answer_t is None else self.answer_t - self.t


def _leave_out(obj: dict[str, Any], key: str, held: str | None) -> None:
    """Take `key` out of `obj` when it holds `held` (None: the change holds nothing of it)."""
    if held is not None and obj.get(key) == held:
        del obj[key]


def _restore(obj: dict[str, Any], key: str, held: str | None) -> None:
    """Put `key` back into `obj` as `held` when `_leave_out` took it (the change holds it, the text does not)."""
    if held is not None and key not in obj:
        obj[key] = held


# -- pending changes -----------------------------------------------------------------------------------------

_CREATE: Final = "conversation.item.create"
_DELETE: Final = "conversation.item.delete"


class _Queue:
    """Pending changes in the order they were sent, oldest first: the order of a `Pending`, and two or more changes
    under one key of one of its indexes. A change answered leaves it lazily: the head moves past answered ones,
    letting each go (its slot None: answered in order, as a pipeline is, a change is freed at its answer, not held
    until the list is compacted), and the list is compacted once the answered outnumber a quarter of the pending
    ones, so each change costs O(1) amortized. Before `head` every slot is None; from it on, the first is pending
    (`Change.filed`), and later ones answered out of order wait for a compaction."""

    __slots__ = ("changes", "dead", "head", "live")

    def __init__(self, changes: list[Change | None]) -> None:
        self.changes = changes
        self.head = 0
        self.live = len(changes)
        self.dead = 0

    def append(self, change: Change) -> None:
        self.changes.append(change)
        self.live += 1

    def drop(self) -> bool:
        """One of its changes was answered (no longer `filed`); whether none is left pending."""
        self.live -= 1
        if not self.live:
            self.changes = []
            self.head = self.dead = 0
            return True
        self.dead += 1
        changes, k = self.changes, self.head
        while True:  # past the answered at the head (the one just answered among them when it was the oldest)
            c = changes[k]
            if c is not None and c.filed:
                break
            changes[k] = None
            k += 1
        self.head = k
        if self.dead > self.live >> 2:
            self.changes = [c for c in changes[k:] if c is not None and c.filed]
            self.head = self.dead = 0
        return False

    def first(self) -> Change:
        """The oldest pending (there is one)."""
        return self.changes[self.head]  # type: ignore[return-value]

    def pending(self, limit: int | None = None) -> list[Change]:
        """The pending changes, oldest first (the first `limit` of them)."""
        if limit is None:
            return [c for c in self.changes[self.head :] if c is not None and c.filed]
        out: list[Change] = []
        if limit > 0:
            for c in itertools.islice(self.changes, self.head, None):
                if c is not None and c.filed:
                    out.append(c)
                    if len(out) == limit:
                        break
        return out


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
        held.append(change)
    else:
        index[key] = _Queue([held, change])  # type: ignore[list-item]


def _unfile(index: dict[Any, _Bucket], key: Any, change: Change) -> None:
    """Take `change`, just answered (no longer `filed`), from under `key` of `index`."""
    held = index[key]
    if held is change or (type(held) is _Queue and held.drop()):
        del index[key]


def _seq_of(change: Change | None) -> int:
    """The seq of a queue's slot from its head on (no slot there is None)."""
    assert change is not None
    return change.seq


class Pending:
    """The changes of one connection still awaiting an answer, oldest first (by `seq`, as they were sent).

    A mapping seq -> `Change` for whoever walks them all (the client view, `show`); and the lookups the reducer
    and the rules make, each O(1) (amortized) however many changes wait: the oldest of a kind, the oldest of a
    kind about one item id, the oldest id-less create of an item type, the oldest `response.create` in or out of
    the conversation, and the changes that carry an event id, a call_id, or quote an id. Adding and removing a
    change is O(1) as well: a pipeline of 200,000 creates acknowledged in order costs what one create costs, 200,000
    times, and what waits costs a list slot and its index entries, no mapping by seq. A change is added newest
    (its seq above every one pending) and is in one `Pending` at most; its fields must not change while it waits
    (they are its keys), and only a create carries an item (`item_type`) and a `previous_item_id` (as the reducer
    makes them).
    """

    __slots__ = ("_calls", "_events", "_idless", "_items", "_kinds", "_order", "_prevs", "_replies")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        #: Every pending change, oldest first.
        self._order = _Queue([])
        # The indexes, each the shared empty `_NONE` until a change is filed in it (most connections, and every
        # closed one, have nothing pending: they cost no dict).
        #: By kind (`conversation.item.create`, ...).
        self._kinds: dict[str, _Bucket] = _NONE
        #: kind -> item id -> changes about that id (`Change.item_id`).
        self._items: dict[str, dict[str, _Bucket]] = _NONE
        #: Creates without an item id, by the type of the item they carry (None: no item).
        self._idless: dict[str | None, _Bucket] = _NONE
        #: By `event_id`, any kind: None until an event id is looked up (an error that carries one, a response
        #: that echoes one), then built from the pending changes and kept (most traces never look one up: a change
        #: costs no entry there).
        self._events: dict[str, _Bucket] | None = None
        #: Creates by the call_id of their item, and by their `previous_item_id` (that one only once an error quoted
        #: an id: None until then, built from the pending changes when first needed).
        self._calls: dict[str, _Bucket] = _NONE
        self._prevs: dict[str, _Bucket] | None = None
        #: `response.create`s by whether they are in the conversation (`conversation` is not "none").
        self._replies: dict[bool, _Bucket] = _NONE

    # -- the mapping ------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._order.live

    def __bool__(self) -> bool:
        return self._order.live > 0

    def __iter__(self) -> Iterator[int]:
        return iter([c.seq for c in self._order.pending()])

    def _find(self, seq: object) -> Change | None:
        """The pending change of `seq` (None: none), found by bisection: the order is by seq."""
        if type(seq) is not int:
            return None
        order = self._order
        changes = order.changes
        k = bisect.bisect_left(changes, seq, order.head, len(changes), key=_seq_of)
        found = changes[k] if k < len(changes) else None
        return found if found is not None and found.seq == seq and found.filed else None

    def __contains__(self, seq: object) -> bool:
        return self._find(seq) is not None

    def __getitem__(self, seq: int) -> Change:
        found = self._find(seq)
        if found is None:
            raise KeyError(seq)
        return found

    def __setitem__(self, seq: int, change: Change) -> None:
        if seq != change.seq:
            raise ValueError(f"change of seq {change.seq} filed under {seq}")
        self.add(change)

    def __delitem__(self, seq: int) -> None:
        self.remove(self[seq])

    def values(self) -> list[Change]:
        """The pending changes, oldest first."""
        return self._order.pending()

    def items(self) -> list[tuple[int, Change]]:
        return [(c.seq, c) for c in self._order.pending()]

    def clear(self) -> None:
        for change in self._order.pending():
            change.filed = False
        self._reset()

    # -- adding and removing ----------------------------------------------------------------------------------

    def add(self, change: Change) -> None:
        """File a change just sent (its seq is the newest)."""
        order = self._order
        changes = order.changes
        if change.filed or (changes and _seq_of(changes[-1]) >= change.seq):
            raise ValueError(f"a change of seq {change.seq} is pending already, or a newer one")
        change.filed = True
        order.append(change)
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
            if item_id is None:
                if self._idless is _NONE:
                    self._idless = {}
                _file(self._idless, change.item_type, change)
            if change.call_id is not None:
                if self._calls is _NONE:
                    self._calls = {}
                _file(self._calls, change.call_id, change)
            if change.previous_item_id is not None and self._prevs is not None:
                _file(self._prevs, change.previous_item_id, change)
        elif kind == "response.create":
            if self._replies is _NONE:
                self._replies = {}
            _file(self._replies, change.conversation != "none", change)

    def remove(self, change: Change) -> None:
        """Take an answered change out (KeyError when it is not pending)."""
        if not change.filed:
            raise KeyError(change.seq)
        change.filed = False
        self._order.drop()
        kind = change.kind
        _unfile(self._kinds, kind, change)
        # An index emptied goes (a dict keeps the table it grew to: a drained pipeline would keep it to the end).
        if change.item_id is not None:
            by_id = self._items[kind]
            _unfile(by_id, change.item_id, change)
            if not by_id:
                del self._items[kind]
        if change.event_id is not None and self._events is not None:
            _unfile(self._events, change.event_id, change)
            if not self._events:
                self._events = {}
        if kind == _CREATE:
            if change.item_id is None:
                _unfile(self._idless, change.item_type, change)
            if change.call_id is not None:
                _unfile(self._calls, change.call_id, change)
                if not self._calls:
                    self._calls = _NONE
            if change.previous_item_id is not None and self._prevs is not None:
                _unfile(self._prevs, change.previous_item_id, change)
                if not self._prevs:
                    self._prevs = {}
        elif kind == "response.create":
            _unfile(self._replies, change.conversation != "none", change)

    # -- lookups ----------------------------------------------------------------------------------------------

    def _first(self, index: dict[Any, _Bucket] | None, key: Any) -> Change | None:
        held = index.get(key) if index else None
        if held is None or type(held) is not _Queue:
            return held  # type: ignore[return-value]
        return held.first()  # (pending: `_Queue.drop` moves the head past the answered)

    def _all(self, index: dict[Any, _Bucket] | None, key: Any, limit: int | None = None) -> list[Change]:
        """The pending changes under `key`, oldest first (the first `limit` of them)."""
        held = index.get(key) if index else None
        if held is None:
            return []
        if type(held) is not _Queue:
            return [held]  # type: ignore[list-item]
        return held.pending(limit)

    def oldest(self, kind: str, item_id: str | None = None) -> Change | None:
        """The oldest pending change of `kind` (about `item_id`, when given)."""
        if item_id is None:
            return self._first(self._kinds, kind)
        by_id = self._items.get(kind)
        held = by_id.get(item_id) if by_id else None
        if held is None or type(held) is not _Queue:  # (`_first`, inline: one change is the usual case)
            return held  # type: ignore[return-value]
        return held.first()

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
        if not self._order.live:
            return None
        if self._events is None:
            self._events = {}
            for filed in self._order.pending():
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
            for filed in self._order.pending():
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
        for change in self._order.pending(limit):
            sent = change.sent
            if (kinds is not None and change.kind not in kinds) or sent is None:
                continue
            found, value = lookup(change.event() if type(sent) is str else sent, path)
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
