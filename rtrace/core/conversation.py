"""The conversation model: items in conversation order, linked by id, with call_id indexes.

One model for both ends: the reducer keeps each connection's server conversation in it, and the fake server
(`rtrace.net.fake.endpoint`) keeps the conversation it serves in it. Ground rules, the same for both:

* An id is in the conversation once. Inserting an id already there (the API accepts a duplicate id, docs/protocol.md
  2.3) adds no position: the item's `copies` count grows, and the copies stand where the first one does.
* Removing an id takes it out with all its copies. One delete, one `conversation.item.deleted`, the id is gone: an
  observer cannot tell a server that appended a duplicate from one that ignored it (their acks are the same), so
  this is the only rule under which the analyzer, folding a server's events, holds what that server holds.
* An item keeps a preview of its payload (`text`, cut `arguments`) and its audio length (`audio_bytes`). The full
  wire payload (`wire`) is kept only by the fake server, which must answer a retrieve and generate from the items;
  the analyzer leaves it None, so its memory follows the number of items, not their bytes.

Pure data, no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Final, Literal

PREVIEW_CHARS: Final = 200
ARGUMENTS_CHARS: Final = 512

ItemSource = Literal["client", "response", "audio", "server"]


@dataclasses.dataclass(slots=True)
class Item:
    """One conversation item as the server holds it (payloads reduced to a preview)."""

    id: str
    #: `message`, `function_call`, `function_call_output`, `mcp_call`, ...
    type: str
    role: str | None = None
    call_id: str | None = None
    name: str | None = None
    status: str | None = None
    #: Function call arguments (cut to ARGUMENTS_CHARS); `arguments_len` is the full length.
    arguments: str = ""
    arguments_len: int = 0
    #: The arguments are final: `response.function_call_arguments.done`, a completed item, or a client's item.
    arguments_done: bool = False
    #: A short preview of the text, transcript or tool output.
    text: str = ""
    #: Bytes of output audio the item received (from deltas, or from a recorder's byte counts).
    audio_bytes: int = 0
    #: Who put it in the conversation: a client create, a response, committed input audio, or unknown.
    source: ItemSource = "server"
    response_id: str | None = None
    #: Line of the server event that added it, and its time.
    added_line: int = 0
    added_t: float = 0.0
    #: Line and time of the client create that asked for it, when a create did.
    created_line: int | None = None
    created_t: float | None = None
    done: bool = False
    #: How many times this id was added (the API accepts a duplicate id and appends a second copy).
    copies: int = 1
    #: The full wire item (the fake server's; the analyzer keeps no payloads and leaves it None). For a duplicate
    #: id, the first copy's payload stands for every copy.
    wire: dict[str, Any] | None = None
    #: The ids before and after it in the `Conversation` that holds it (None: at that end, or in none): the links
    #: live on the item, not in two dicts of the conversation (an item is in one conversation at most).
    prev_id: str | None = dataclasses.field(default=None, init=False, repr=False, compare=False)
    next_id: str | None = dataclasses.field(default=None, init=False, repr=False, compare=False)

    def __init__(
        self,
        id: str,
        type: str,
        role: str | None = None,
        call_id: str | None = None,
        name: str | None = None,
        status: str | None = None,
        arguments: str = "",
        arguments_len: int = 0,
        arguments_done: bool = False,
        text: str = "",
        audio_bytes: int = 0,
        source: ItemSource = "server",
        response_id: str | None = None,
        added_line: int = 0,
        added_t: float = 0.0,
        created_line: int | None = None,
        created_t: float | None = None,
        done: bool = False,
        copies: int = 1,
        wire: dict[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.type = type
        self.role = role
        self.call_id = call_id
        self.name = name
        self.status = status
        self.arguments = arguments
        self.arguments_len = arguments_len
        self.arguments_done = arguments_done
        self.text = text
        self.audio_bytes = audio_bytes
        self.source = source
        self.response_id = response_id
        self.added_line = added_line
        self.added_t = added_t
        self.created_line = created_line
        self.created_t = created_t
        self.done = done
        self.copies = copies
        self.wire = wire
        self.prev_id = None
        self.next_id = None

    def label(self) -> str:
        """How people call this item: `function_call item_x (call_y)`, `user message item_z`."""
        return label(self.id, self.type, self.role, self.call_id)


def label(item_id: str, item_type: str, role: str | None, call_id: str | None) -> str:
    """How people call an item of this id, type, role and call_id (`Item.label`)."""
    if item_type == "message":
        return f"{role or 'unknown-role'} message {item_id}"
    if call_id:
        return f"{item_type} {item_id} ({call_id})"
    return f"{item_type} {item_id}"


#: The strings items share (types, roles, names, statuses), each kept once, as `sys.intern` would keep them, in a
#: table of their own: a lookup there costs less than the interpreter's (a call and its larger table, per field of
#: every item), and it stops growing at `SHARED_MAX` strings (past that, a new one is kept as it came).
_SHARED: dict[str, str] = {}
SHARED_MAX: Final = 4096


def _intern(text: str) -> str:
    """`text`, or the equal string already kept (`_SHARED`)."""
    kept = _SHARED.get(text)
    if kept is None:
        if len(_SHARED) >= SHARED_MAX:
            return text
        kept = _SHARED[text] = text
    return kept


def item_from_event(obj: dict[str, Any]) -> Item | None:
    """An `Item` from a wire item object, or None when it has no usable id (what `update_item` folds into a new
    `Item(id, type)`, read in one pass: an item is made for every create and every item the server adds)."""
    item_id = obj.get("id")
    if not isinstance(item_id, str) or not item_id:
        return None
    kind = obj.get("type")
    # Roles, names and statuses repeat across items: each is kept once (`_intern`), not once per item.
    role = obj.get("role")
    role = _intern(role) if type(role) is str else None
    call_id = obj.get("call_id")
    if type(call_id) is not str or not call_id:
        call_id = None
    name = obj.get("name")
    name = _intern(name) if type(name) is str else None
    status = obj.get("status")
    status = _intern(status) if type(status) is str else None
    args = obj.get("arguments")
    if type(args) is str:
        arguments, arguments_len = args[:ARGUMENTS_CHARS], len(args)
    else:
        arguments, arguments_len = "", 0
    text = ""
    output = obj.get("output")
    if type(output) is str:
        text = output[:PREVIEW_CHARS]
    content = obj.get("content")
    if type(content) is list and content:
        text = _content_text(content) or text
    return Item(
        item_id,
        _intern(kind) if type(kind) is str and kind else str(kind or "unknown"),
        role,
        call_id,
        name,
        status,
        arguments,
        arguments_len,
        False,
        text,
    )


def client_item(obj: dict[str, Any]) -> Item:
    """The `Item` a client's create sends in `obj`: `item_from_event`'s, or without a usable id (the server will
    choose one) an item of id "" that keeps the rest (its type, call_id, text)."""
    item = item_from_event(obj)
    if item is None:
        item = Item(id="", type=str(obj.get("type") or "unknown"))
        update_item(item, obj)
    return item


def item_head(obj: dict[str, Any]) -> tuple[str | None, str, str | None, str | None]:
    """What a pending create holds of the item it sends (`core.pending.Change`), as `client_item` reads it: its id
    (None: none usable), type, role and call_id. No `Item` is made: a pipeline holds thousands of creates."""
    item_id = obj.get("id")
    kind = obj.get("type")
    role = obj.get("role")
    call_id = obj.get("call_id")
    return (
        item_id if isinstance(item_id, str) and item_id else None,
        _intern(kind) if type(kind) is str and kind else str(kind or "unknown"),
        _intern(role) if type(role) is str else None,
        call_id if type(call_id) is str and call_id else None,
    )


def update_item(item: Item, obj: dict[str, Any]) -> None:
    """Fold a (possibly partial) wire item object into `item`."""
    role = obj.get("role")
    if type(role) is str:
        item.role = _intern(role)
    call_id = obj.get("call_id")
    if type(call_id) is str and call_id:
        item.call_id = call_id
    name = obj.get("name")
    if type(name) is str:
        item.name = _intern(name)
    status = obj.get("status")
    if type(status) is str:
        item.status = _intern(status)
    args = obj.get("arguments")
    if type(args) is str and (args or not item.arguments):
        item.arguments = args[:ARGUMENTS_CHARS]
        item.arguments_len = len(args)
    output = obj.get("output")
    if type(output) is str:
        item.text = output[:PREVIEW_CHARS]
    content = obj.get("content")
    if type(content) is list and content:
        text = _content_text(content)
        if text:
            item.text = text


def _content_text(content: list[Any]) -> str:
    """The preview of a content list: the text (else the transcript) of each part, joined by spaces, cut to
    `PREVIEW_CHARS`."""
    if len(content) == 1:  # the usual case: one part, no list to join
        part = content[0]
        if type(part) is dict:
            value = part.get("text")
            if type(value) is str and value:
                return value[:PREVIEW_CHARS]
            value = part.get("transcript")
            return value[:PREVIEW_CHARS] if type(value) is str else ""
    parts: list[str] = []
    size = 0
    for part in content:
        if not isinstance(part, dict):
            continue
        for key in ("text", "transcript"):
            value = part.get(key)
            if isinstance(value, str) and value:
                parts.append(value)
                size += len(value)
                break
        if size >= PREVIEW_CHARS:
            break
    return " ".join(parts)[:PREVIEW_CHARS]


class Conversation:
    """Ordered items, linked by id. Insert-after, delete and the call_id lookups are O(1) whatever the length of the
    conversation; iteration is in conversation order. The links are the items' own (`Item.prev_id`, `next_id`):
    an item is in one conversation at most (each end makes its items from the wire)."""

    __slots__ = ("_calls", "by_call", "head", "items", "outputs_by_call", "tail")

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.head: str | None = None
        self.tail: str | None = None
        #: call_id -> id of the `function_call` item that carries it (the latest indexed, when several do).
        self.by_call: dict[str, str] = {}
        #: call_id -> ids of every `function_call` item that carries it, in the order they were indexed (a replay or
        #: a duplicate may carry a call_id twice): who takes over in `by_call` when one goes. The id itself while
        #: it is the only one (the usual case: no container per call).
        self._calls: dict[str, str | dict[str, None]] = {}
        #: call_id -> ids of `function_call_output` items that answer it.
        self.outputs_by_call: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self.items

    def __iter__(self) -> Iterator[Item]:
        items = self.items
        cur = self.head
        while cur is not None:
            item = items[cur]
            yield item
            cur = item.next_id

    def ids(self) -> list[str]:
        return [item.id for item in self]

    def get(self, item_id: str) -> Item | None:
        return self.items.get(item_id)

    def linked_copy(self) -> Order:
        """The order of this conversation as an `Order` whose own inserts and removes leave this one alone (for
        `Connection.expected_ids`; O(items), as what it is for)."""
        return Order(self)

    def previous_of(self, item_id: str) -> str | None:
        item = self.items.get(item_id)
        return None if item is None else item.prev_id

    def insert(self, item: Item, previous_id: str | None) -> bool:
        """Insert `item` after `previous_id` (None: first). False (and appended at the end) when the previous id
        is unknown. A duplicate id is not inserted again: its `copies` count grows (see `Item.copies`)."""
        items = self.items
        item_id = item.id
        existing = items.get(item_id)
        if existing is not None:
            existing.copies += 1
            return True
        found = True
        before = None
        if previous_id is not None:
            before = items.get(previous_id)
            if before is None:
                found = False
                if self.tail is not None:
                    before = items[self.tail]
        items[item_id] = item
        if before is None:
            nxt = self.head
            self.head = item_id
            item.prev_id = None
        else:
            # The links hold the id strings the conversation has (the items' own), not the event's copies.
            nxt = before.next_id
            before.next_id = item_id
            item.prev_id = before.id
        item.next_id = nxt
        if nxt is None:
            self.tail = item_id
        else:
            items[nxt].prev_id = item_id
        if item.call_id is not None:
            self._index(item)
        return found

    def append(self, item: Item) -> None:
        self.insert(item, self.tail)

    def remove(self, item_id: str) -> Item | None:
        """Take `item_id` out, with all its copies (see the ground rules); the item, or None when it is not here."""
        items = self.items
        item = items.pop(item_id, None)
        if item is None:
            return None
        before, after = item.prev_id, item.next_id
        item.prev_id = item.next_id = None
        if before is None:
            self.head = after
        else:
            items[before].next_id = after
        if after is None:
            self.tail = before
        else:
            items[after].prev_id = before
        if item.call_id is not None:
            self._unindex(item)
        return item

    def reindex(self, item: Item, old_call_id: str | None) -> None:
        """Keep the call_id indexes right after an item's call_id became known."""
        if old_call_id == item.call_id:
            return
        if old_call_id is not None:
            tmp = Item(id=item.id, type=item.type, call_id=old_call_id)
            self._unindex(tmp)
        self._index(item)

    def _index(self, item: Item) -> None:
        if item.call_id is None:
            return
        if item.type == "function_call":
            calls = self._calls.get(item.call_id)
            if calls is None or calls == item.id:
                self._calls[item.call_id] = item.id
            else:
                if type(calls) is str:
                    calls = self._calls[item.call_id] = {calls: None}
                calls.pop(item.id, None)  # type: ignore[union-attr]
                calls[item.id] = None  # type: ignore[index]
            self.by_call[item.call_id] = item.id
        elif item.type == "function_call_output":
            self.outputs_by_call.setdefault(item.call_id, set()).add(item.id)

    def _unindex(self, item: Item) -> None:
        if item.call_id is None:
            return
        if item.type == "function_call":
            calls = self._calls.get(item.call_id)
            if type(calls) is str:
                calls = {calls: None}
            elif calls is None:
                calls = {}
            calls.pop(item.id, None)  # type: ignore[union-attr]
            if self.by_call.get(item.call_id) == item.id:
                # Another function_call may carry the same call_id (a replay, a duplicate): the latest takes over.
                if calls:
                    self.by_call[item.call_id] = next(reversed(calls))
                else:
                    del self.by_call[item.call_id]
            if not calls:
                self._calls.pop(item.call_id, None)
            elif len(calls) == 1:
                self._calls[item.call_id] = next(iter(calls))
            else:
                self._calls[item.call_id] = calls
        elif item.type == "function_call_output":
            outs = self.outputs_by_call.get(item.call_id)
            if outs is not None:
                outs.discard(item.id)
                if not outs:
                    del self.outputs_by_call[item.call_id]


class Order:
    """The order of a `Conversation`'s ids, copied (`Conversation.linked_copy`): inserts and removes change only
    the copy. Ids only: an insert takes an `Item` for the same calls as the conversation's, keeps its id."""

    __slots__ = ("_next", "_prev")

    def __init__(self, conv: Conversation) -> None:
        # None stands for both ends: `_next[None]` is the first id, `_prev[None]` the last.
        self._next: dict[str | None, str | None] = {None: conv.head}
        self._prev: dict[str | None, str | None] = {None: conv.tail}
        for item in conv:
            self._next[item.id] = item.next_id
            self._prev[item.id] = item.prev_id

    @property
    def tail(self) -> str | None:
        return self._prev[None]

    def __contains__(self, item_id: object) -> bool:
        return item_id is not None and item_id in self._next

    def insert(self, item: Item, previous_id: str | None) -> bool:
        """As `Conversation.insert` (an id already here is not inserted again)."""
        item_id = item.id
        if item_id in self:
            return True
        found = previous_id is None or previous_id in self
        after = previous_id if found else self.tail
        nxt = self._next[after]
        self._next[after] = item_id
        self._prev[item_id] = after
        self._next[item_id] = nxt
        self._prev[nxt] = item_id
        return found

    def remove(self, item_id: str) -> None:
        if item_id not in self:
            return
        before = self._prev.pop(item_id)
        after = self._next.pop(item_id)
        self._next[before] = after
        self._prev[after] = before

    def ids(self) -> list[str]:
        out: list[str] = []
        cur = self._next[None]
        while cur is not None:
            out.append(cur)
            cur = self._next[cur]
        return out
