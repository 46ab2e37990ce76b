"""Facts: what a record *meant*, as `reducer.step` reports it (a change confirmed, an item added by a response, a
response left open). Rules subscribe to fact classes (`rtrace.rules.base.on`); every class here is one `step` can
report, listed in `FACTS`. Pure data.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any, Final

from .conversation import Item
from .state import Change, Connection, Response
from .trace import Record


@dataclasses.dataclass(slots=True, eq=False)
class Fact:
    """Base of everything `step` reports: `rec` is the record that revealed it."""

    rec: Record

    def __init__(self, rec: Record) -> None:
        self.rec = rec


@dataclasses.dataclass(slots=True, eq=False)
class ConnOpened(Fact):
    conn: Connection

    def __init__(self, rec: Record, conn: Connection) -> None:
        self.rec = rec
        self.conn = conn


@dataclasses.dataclass(slots=True, eq=False)
class ConnClosed(Fact):
    """A connection ended. `rec` is the record that ended it (the close note, the next connection's first
    record, or the last record of the trace)."""

    conn: Connection
    #: Changes that were pending and are now indeterminate.
    indeterminate: list[Change]
    #: The response that was generating, now orphaned.
    orphaned: Response | None

    def __init__(self, rec: Record, conn: Connection, indeterminate: list[Change], orphaned: Response | None) -> None:
        self.rec = rec
        self.conn = conn
        self.indeterminate = indeterminate
        self.orphaned = orphaned


@dataclasses.dataclass(slots=True, eq=False)
class FaultInjected(Fact):
    """A fault the fake endpoint injected acts here (its `fault.injected` note, written where the fault acts, before
    what it sends): the server events of `conn` that answer for it (an `error`, a failed or cancelled response, a
    close) are the fault's, not the server's verdict on what the client sent. A real server's trace has none."""

    conn: Connection
    #: What the fault does (`error`, `close`, `fail`, `cancel`, `expire`, ...); "" when the note does not say.
    action: str

    def __init__(self, rec: Record, conn: Connection, action: str) -> None:
        self.rec = rec
        self.conn = conn
        self.action = action


@dataclasses.dataclass(slots=True, eq=False)
class SentIntoClosing(Fact):
    """Changes sent on a connection after its close was noted: frames the client wrote into a socket the server
    was closing (it notes the close when it sends its close frame; the client writes on until it reads it). They
    belong to that connection's end, as its `ConnClosed.indeterminate` do, and are indeterminate at once."""

    conn: Connection
    changes: list[Change]

    def __init__(self, rec: Record, conn: Connection, changes: list[Change]) -> None:
        self.rec = rec
        self.conn = conn
        self.changes = changes


@dataclasses.dataclass(slots=True, eq=False)
class Reconnected(Fact):
    """`conn` replaces `previous`, which ended: a reconnect. `rec` is the record at which the pairing became
    known: `conn`'s first record, or `previous`'s close when the client opened the new socket first (then
    `early` holds the changes `conn` sent before that close, oldest first; else it is empty)."""

    previous: Connection
    conn: Connection
    early: list[Change]

    def __init__(self, rec: Record, previous: Connection, conn: Connection, early: list[Change]) -> None:
        self.rec = rec
        self.previous = previous
        self.conn = conn
        self.early = early


@dataclasses.dataclass(slots=True, eq=False)
class ChangeSent(Fact):
    change: Change

    def __init__(self, rec: Record, change: Change) -> None:
        self.rec = rec
        self.change = change


@dataclasses.dataclass(slots=True, eq=False)
class ChangeAnswered(Fact):
    """A pending change got its answer: `change.status` is `confirmed` or `rejected`.

    `how` says how the answer was joined: `item-id`, `event-id`, `quoted-id`, `named-field`, `order` or
    `metadata`."""

    change: Change
    how: str

    def __init__(self, rec: Record, change: Change, how: str) -> None:
        self.rec = rec
        self.change = change
        self.how = how


@dataclasses.dataclass(slots=True, eq=False)
class ItemAdded(Fact):
    conn: Connection
    item: Item
    previous_item_id: str | None
    #: False when `previous_item_id` named no item of the conversation (the item was appended instead).
    position_known: bool
    #: True when the id was already in the conversation (the API appends a second copy).
    duplicate: bool

    def __init__(
        self,
        rec: Record,
        conn: Connection,
        item: Item,
        previous_item_id: str | None,
        position_known: bool,
        duplicate: bool,
    ) -> None:
        self.rec = rec
        self.conn = conn
        self.item = item
        self.previous_item_id = previous_item_id
        self.position_known = position_known
        self.duplicate = duplicate


@dataclasses.dataclass(slots=True, eq=False)
class ItemDone(Fact):
    conn: Connection
    item: Item

    def __init__(self, rec: Record, conn: Connection, item: Item) -> None:
        self.rec = rec
        self.conn = conn
        self.item = item


@dataclasses.dataclass(slots=True, eq=False)
class ItemUpdated(Fact):
    """A server event changed an item already in the conversation without adding, finishing or removing it: its
    final form from `response.output_item.done`, its arguments from `response.function_call_arguments.done`."""

    conn: Connection
    item: Item

    def __init__(self, rec: Record, conn: Connection, item: Item) -> None:
        self.rec = rec
        self.conn = conn
        self.item = item


@dataclasses.dataclass(slots=True, eq=False)
class ItemDeleted(Fact):
    conn: Connection
    item_id: str
    #: The item as it was (None: the server deleted an id rtrace never saw added).
    item: Item | None
    change: Change | None

    def __init__(self, rec: Record, conn: Connection, item_id: str, item: Item | None, change: Change | None) -> None:
        self.rec = rec
        self.conn = conn
        self.item_id = item_id
        self.item = item
        self.change = change


@dataclasses.dataclass(slots=True, eq=False)
class ItemTruncated(Fact):
    conn: Connection
    item_id: str
    audio_end_ms: int | None

    def __init__(self, rec: Record, conn: Connection, item_id: str, audio_end_ms: int | None) -> None:
        self.rec = rec
        self.conn = conn
        self.item_id = item_id
        self.audio_end_ms = audio_end_ms


@dataclasses.dataclass(slots=True, eq=False)
class ResponseCreated(Fact):
    conn: Connection
    response: Response
    #: The in-conversation response that was still open and is now replaced (orphaned).
    replaced: Response | None

    def __init__(self, rec: Record, conn: Connection, response: Response, replaced: Response | None) -> None:
        self.rec = rec
        self.conn = conn
        self.response = response
        self.replaced = replaced


@dataclasses.dataclass(slots=True, eq=False)
class ResponseDone(Fact):
    conn: Connection
    response: Response
    #: True when no `response.created` was seen for it on this connection.
    unknown: bool
    #: (line, t) of an earlier `response.done` of the same response (a duplicate terminal event), else None.
    again: tuple[int, float] | None = None

    def __init__(
        self, rec: Record, conn: Connection, response: Response, unknown: bool, again: tuple[int, float] | None = None
    ) -> None:
        self.rec = rec
        self.conn = conn
        self.response = response
        self.unknown = unknown
        self.again = again


@dataclasses.dataclass(slots=True, eq=False)
class ServerError(Fact):
    conn: Connection
    error: dict[str, Any]
    #: The client change it answers, when one could be joined.
    cause: Change | None
    how: str | None
    #: The client event types the error's code (and param) can answer (`catalog.error_answers`): None for any,
    #: empty for a session-level error.
    answers: frozenset[str] | None = None

    def __init__(
        self,
        rec: Record,
        conn: Connection,
        error: dict[str, Any],
        cause: Change | None,
        how: str | None,
        answers: frozenset[str] | None = None,
    ) -> None:
        self.rec = rec
        self.conn = conn
        self.error = error
        self.cause = cause
        self.how = how
        self.answers = answers


@dataclasses.dataclass(slots=True, eq=False)
class LocalSnapshot(Fact):
    conn: Connection
    items: list[Item]

    def __init__(self, rec: Record, conn: Connection, items: list[Item]) -> None:
        self.rec = rec
        self.conn = conn
        self.items = items


@dataclasses.dataclass(slots=True, eq=False)
class LocalGeneration(Fact):
    conn: Connection
    opened: bool
    response_id: str | None

    def __init__(self, rec: Record, conn: Connection, opened: bool, response_id: str | None) -> None:
        self.rec = rec
        self.conn = conn
        self.opened = opened
        self.response_id = response_id


@dataclasses.dataclass(slots=True, eq=False)
class SessionUpdated(Fact):
    conn: Connection

    def __init__(self, rec: Record, conn: Connection) -> None:
        self.rec = rec
        self.conn = conn


NO_FACTS: Final[tuple[Fact, ...]] = ()


#: Every fact class `step` (and `reducer.finish`) reports; a rule may subscribe to these only.
FACTS: tuple[type[Fact], ...] = (
    ConnOpened,
    ConnClosed,
    SentIntoClosing,
    FaultInjected,
    Reconnected,
    ChangeSent,
    ChangeAnswered,
    ItemAdded,
    ItemUpdated,
    ItemDone,
    ItemDeleted,
    ItemTruncated,
    ResponseCreated,
    ResponseDone,
    ServerError,
    LocalSnapshot,
    LocalGeneration,
    SessionUpdated,
)


# -- what a subscription can narrow a fact to ------------------------------------------------------------------


#: The client event type of a fact's change (`conversation.item.create`, `response.create`, ...), by fact class: what
#: `rules.base.on(kinds=...)` narrows a subscription to. The engine reads it once per fact, before any handler.
KIND_OF: dict[type[Fact], Callable[[Any], str]] = {
    ChangeSent: operator.attrgetter("change.kind"),
    ChangeAnswered: operator.attrgetter("change.kind"),
}
#: The type of the item a fact is about (`message`, `function_call`, ...; None: it has none, e.g. a change that is not
#: a create, a delete of an item never seen added), by fact class: what `rules.base.on(items=...)` narrows a
#: subscription to. A change's is the type it holds (`Change.item_type`): no item is made to read it.
ITEM_TYPE_OF: Final[dict[type[Fact], Callable[[Any], str | None]]] = {
    ChangeSent: operator.attrgetter("change.item_type"),
    ChangeAnswered: operator.attrgetter("change.item_type"),
    ItemAdded: operator.attrgetter("item.type"),
    ItemDone: operator.attrgetter("item.type"),
    ItemUpdated: operator.attrgetter("item.type"),
    ItemDeleted: lambda fact: None if fact.item is None else fact.item.type,
}


def item_type(fact: Fact) -> str | None:
    """The type of the item `fact` is about (`ITEM_TYPE_OF`), None when it has none."""
    get = ITEM_TYPE_OF.get(type(fact))
    return None if get is None else get(fact)
