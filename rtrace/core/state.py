"""The state of one trace: connections, their server conversation, pending client changes, responses.

Ground rules of this module (the reducer relies on them):

* Everything is keyed by connection. A websocket connection is a new, empty server conversation; no id
  carries over to the next connection unless the client creates it again (protocol.md section 3).
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

import collections
import dataclasses
from typing import Any, Literal

from .audio import DEFAULT_FORMAT, audio_ms
from .conversation import Conversation, Item

ChangeStatus = Literal["pending", "confirmed", "rejected", "indeterminate"]


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
    status: ChangeStatus = "pending"
    #: The line and time of the answer (confirmation, error, or the close that made it indeterminate).
    answer_line: int | None = None
    answer_t: float | None = None
    #: For rejected changes: the error object.
    error: dict[str, Any] | None = None

    @property
    def short(self) -> str:
        """`conversation.item.create` -> `create`."""
        return self.kind.rsplit(".", 1)[-1]

    def latency(self) -> float | None:
        return None if self.answer_t is None else self.answer_t - self.t


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
    conv: Conversation = dataclasses.field(default_factory=Conversation)
    #: Every change still awaiting an answer, oldest first, keyed by seq.
    pending: dict[int, Change] = dataclasses.field(default_factory=dict)
    #: Responses by id: every open one and the latest done ones (see `reducer.KEPT_DONE_RESPONSES`).
    responses: dict[str, Response] = dataclasses.field(default_factory=dict)
    done_responses: collections.deque[str] = dataclasses.field(default_factory=collections.deque)
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

    @property
    def open(self) -> bool:
        return self.ended_by is None

    def audio_ms(self, item: Item) -> float:
        return audio_ms(item.audio_bytes, self.audio_rate, self.audio_sample_bytes)

    # -- the conversation the server will judge the next client event against ----------------------------

    def expected_ids(self) -> list[str]:
        """The client view built from pending changes: confirmed conversation + pending creates - pending deletes.

        This is what the server will hold once it has processed everything already sent (events are handled
        in arrival order), assuming each pending change succeeds.
        """
        order = self.conv.ids()
        for change in self.pending.values():
            if change.kind == "conversation.item.delete" and change.item_id in order:
                order.remove(change.item_id)
            elif change.kind == "conversation.item.create" and change.item_id and change.item_id not in order:
                prev = change.previous_item_id
                if prev == "root":
                    order.insert(0, change.item_id)
                elif prev and prev in order:
                    order.insert(order.index(prev) + 1, change.item_id)
                else:
                    order.append(change.item_id)
        return order

    def expected_item(self, item_id: str) -> Item | None:
        """The item `item_id` as the server will hold it after pending changes (None: not there)."""
        found = None
        item = self.conv.get(item_id)
        if item is not None:
            found = item
        for change in self.pending.values():
            if change.item_id != item_id:
                continue
            if change.kind == "conversation.item.delete":
                found = None
            elif change.kind == "conversation.item.create" and change.item is not None:
                found = change.item
        return found

    def expected_call(self, call_id: str) -> Item | None:
        """The `function_call` item carrying `call_id` once pending changes are applied."""
        item_id = self.conv.by_call.get(call_id)
        found = self.conv.get(item_id) if item_id else None
        for change in self.pending.values():
            if change.kind == "conversation.item.delete" and found is not None and change.item_id == found.id:
                found = None
            elif (
                change.kind == "conversation.item.create"
                and change.item is not None
                and change.item.type == "function_call"
                and change.item.call_id == call_id
            ):
                found = change.item
        return found

    def expected_outputs(self, call_id: str) -> list[Item]:
        """`function_call_output` items answering `call_id` once pending changes are applied."""
        outs = [self.conv.items[i] for i in self.conv.outputs_by_call.get(call_id, ())]
        for change in self.pending.values():
            if change.kind == "conversation.item.delete":
                outs = [o for o in outs if o.id != change.item_id]
            elif (
                change.kind == "conversation.item.create"
                and change.item is not None
                and change.item.type == "function_call_output"
                and change.item.call_id == call_id
            ):
                outs.append(change.item)
        return outs


@dataclasses.dataclass(slots=True, eq=False)
class TraceState:
    """Everything known after some prefix of a trace."""

    conns: dict[int, Connection] = dataclasses.field(default_factory=dict)
    #: The connection of the latest record.
    current: int | None = None
    records: int = 0
    first_t: float | None = None
    last_t: float = 0.0
    last_line: int = 0
    #: Fields of the wrong JSON type that `reducer.step` met and read as absent, the first `MAX_FIELD_PROBLEMS`:
    #: (line, path of the field in the event, what was expected, the record) -- the engine reports them.
    field_problems: list[tuple[int, tuple[str | int, ...], str, Any]] = dataclasses.field(default_factory=list)
    #: How many there were in all.
    field_problem_count: int = 0

    def conn(self, n: int) -> Connection | None:
        return self.conns.get(n)

    def next_conn(self, n: int) -> Connection | None:
        """The connection that opened after `n` (the next ordinal seen), if any."""
        later = [c for c in self.conns if c > n]
        return self.conns[min(later)] if later else None

    def previous_conn(self, n: int) -> Connection | None:
        earlier = [c for c in self.conns if c < n]
        return self.conns[max(earlier)] if earlier else None


def client_view(conn: Connection) -> list[str]:
    """Item ids in the order the client believes them: its latest local snapshot, else the expected ids."""
    if conn.local is not None:
        return [item.id for item in conn.local]
    return conn.expected_ids()


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
