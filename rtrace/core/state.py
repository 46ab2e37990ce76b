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

No I/O, no asyncio, no rendering here. The fake server (`rtrace.net.fake.endpoint`) keeps its conversations in the same
`Conversation` and each of its responses in a `Response`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from mypy_extensions import mypyc_attr

from .audio import DEFAULT_FORMAT, audio_ms
from .conversation import Conversation, Item
from .pending import Change, Pending

_CREATE: Final = "conversation.item.create"
_DELETE: Final = "conversation.item.delete"


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
    #: Responses by id: every open one and the latest done ones (see `answers.KEPT_DONE_RESPONSES`).
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
            elif change.item_type is not None:
                found = change.sent_item()
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
                found = change.sent_item()
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
                item = change.sent_item()
                assert item is not None
                outs.append(item)
        return outs

    def _replayed(self, call_id: str, item_type: str, held: list[Item]) -> list[Change]:
        """The pending changes that can change which `item_type` items carry `call_id`, oldest first: the creates
        of such items, and the deletes of them or of the `held` ones (no other change can touch them)."""
        creates = [c for c in self.pending.creates_for_call(call_id) if c.item_type == item_type]
        ids = {item.id for item in held}
        ids.update(c.item_id or "" for c in creates)
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
    #: nothing to fold into it (`answers._s_item_done`).
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
