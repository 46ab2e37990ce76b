"""Rules about the server's own event stream (docs/protocol.md section 5: A9, A13, A14, A18, A19, A21): events a
client mirror cannot place, duplicates, expiry, and reconnect loops on fatal errors."""

from __future__ import annotations

from ..core.catalog import FATAL_ERROR_CODES
from ..core.facts import ConnClosed, ItemAdded, ResponseDone, ServerError
from ..core.state import TraceState
from .base import Config, Finding, Rule, Witness, on


class ResponseDoneWithoutCreated(Rule[Config]):
    """`response.done` for a response that never had `response.created` on this connection.

    **What it means.** A client that opens its generation on `response.created` has nothing to close: the done
    is dropped (LiveKit ignores it: "OpenAI has a race condition … during interruption"), and whatever the
    response produced is never attached to a turn. Also the sign of a recorder or proxy that lost events.

    **Fix.** Key generations by `response.id`; accept a done for an unknown id by creating and closing it.
    """

    id = "RT116"
    slug = "response-done-without-created"
    severity = "warning"
    title = "response.done for a response never created on this connection"
    fix = "Key generations by response id and close (or create-and-close) on any response.done."
    @on(ResponseDone)
    def response_done(self, fact: ResponseDone, state: TraceState) -> list[Finding] | None:
        if not fact.unknown:
            return None
        resp = fact.response
        return [
            self.finding(
                fact.conn.n,
                f"response.done for unknown response {resp.id} at line {fact.rec.line}",
                f"Line {fact.rec.line} ends response {resp.id} ({resp.status}), which connection {fact.conn.n} never "
                "created: a client that tracks generations from response.created cannot close it.",
                [Witness.of(fact.rec)],
                fact.rec.line,
                responses=[resp.id],
            )
        ]


class UnknownPreviousItem(Rule[Config]):
    """The server added an item after a `previous_item_id` that is not in the conversation as the events tell it.

    **What it means.** A client mirror that inserts by `previous_item_id` (LiveKit's `RemoteChatContext`) fails
    ("failed to insert item … previous_item_id not found"), logs a warning, and silently diverges from the
    server from then on (livekit/agents #4960, #5021). rtrace appends the item at the end and goes on.

    **Usual cause.** Server events the client never saw (a lost event, a trace started mid-connection), or an
    id the client rewrote locally.

    **Fix.** Treat an unplaceable item as a resync trigger: retrieve the conversation state or re-push.
    """

    id = "RT117"
    slug = "unknown-previous-item"
    severity = "warning"
    title = "an item was added after an id the conversation does not hold"
    fix = "On an item whose previous_item_id is unknown, resync the mirror instead of dropping the item."
    @on(ItemAdded)
    def item_added(self, fact: ItemAdded, state: TraceState) -> list[Finding] | None:
        if fact.position_known or fact.duplicate:
            return None
        return [
            self.finding(
                fact.conn.n,
                f"{fact.item.label()} added after unknown item {fact.previous_item_id} (line {fact.rec.line})",
                f"Line {fact.rec.line} adds {fact.item.label()} after {fact.previous_item_id}, which is not in "
                f"connection {fact.conn.n}'s conversation: a mirror that inserts by previous_item_id cannot place it.",
                [Witness.of(fact.rec)],
                fact.rec.line,
                items=[fact.item.id, fact.previous_item_id],
            )
        ]


class DuplicateItemId(Rule[Config]):
    """An item id was added to a conversation that already holds it.

    **What it means.** The API accepts a create with an existing id: on current models it appends a second copy
    (the model sees the message twice) and reports `previous_item_id` equal to the item's own id; older models
    ignored it (docs/protocol.md 2.3). Mirrors keyed by id break either way.

    **Usual cause.** A retry of a create whose ack was slow, or an update sent as a create without the delete.

    **Fix.** Make creates idempotent on the client side: never re-send a create whose id the server holds;
    update by delete + create.
    """

    id = "RT118"
    slug = "duplicate-item-id"
    severity = "warning"
    title = "an item id was added twice to one conversation"
    fix = (
        "Never re-create an id the server holds; update by delete + create, "
        "and retry creates only after a timeout check."
    )
    @on(ItemAdded)
    def item_added(self, fact: ItemAdded, state: TraceState) -> list[Finding] | None:
        if not fact.duplicate:
            return None
        item = fact.item
        return [
            self.finding(
                fact.conn.n,
                f"{item.label()} added again at line {fact.rec.line} ({item.copies} copies)",
                f"Line {fact.rec.line} adds {item.label()}, already added at line {item.added_line}: the "
                "conversation now holds it twice (or the server ignored the copy, depending on the model).",
                [Witness.added(item, fact.conn), Witness.of(fact.rec)],
                fact.rec.line,
                items=[item.id],
            )
        ]


class SessionExpired(Rule[Config]):
    """The server ended the session at its maximum duration (`session_expired`, then close 1001).

    **What it means.** Everything on the connection is gone: the conversation, a response being generated,
    unacknowledged changes. Realtime sessions last at most 60 minutes (30 before GA); a client that does not
    rotate sessions before the limit loses a turn mid-way.

    **Fix.** Rotate the connection before the limit at a turn boundary (LiveKit's `max_session_duration`), and
    replay the conversation, function calls included.
    """

    id = "RT119"
    needs = ("timestamps",)
    slug = "session-expired"
    severity = "warning"
    title = "the session hit its maximum duration"
    fix = (
        "Rotate the session before the limit at a turn boundary and replay the conversation (function calls included)."
    )
    @on(ServerError)
    def server_error(self, fact: ServerError, state: TraceState) -> list[Finding] | None:
        if fact.error.get("code") != "session_expired":
            return None
        conn = fact.conn
        active = conn.active
        cut = f"; response {active.id} was still generating" if active is not None and active.open else ""
        age = fact.rec.t - conn.opened_t
        return [
            self.finding(
                conn.n,
                f"session expired at line {fact.rec.line} after {age / 60:.1f} min",
                f"Line {fact.rec.line}: the server expired connection {conn.n} after {age:.0f} s{cut}.",
                [
                    Witness.response_created(active) if active is not None and active.open else None,
                    Witness.of(fact.rec),
                ],
                fact.rec.line,
                responses=[active.id if active is not None else None],
            )
        ]


class ReconnectLoopOnFatalError(Rule[Config]):
    """The client reconnected after a fatal error (`insufficient_quota`, `invalid_api_key`,
    `account_deactivated`, `billing_hard_limit_reached`) and got it again.

    **What it means.** These errors do not go away by reconnecting: the client loops, burning connections and
    log space, and the user hears nothing (livekit/agents #6352).

    **Fix.** Treat these codes as fatal: stop reconnecting and surface the error.
    """

    id = "RT120"
    slug = "reconnect-loop-on-fatal-error"
    severity = "error"
    title = "the client reconnected after a fatal error and got it again"
    fix = "Stop reconnecting on insufficient_quota, invalid_api_key, account_deactivated, billing_hard_limit_reached."

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.fatal_in: dict[int, Witness] = {}
        self.ended_fatal: list[Witness] = []
        self.reported = False

    @on(ConnClosed)
    def conn_closed(self, fact: ConnClosed, state: TraceState) -> None:
        seen = self.fatal_in.pop(fact.conn.n, None)
        if seen is not None:
            self.ended_fatal.append(seen)

    @on(ServerError)
    def server_error(self, fact: ServerError, state: TraceState) -> list[Finding] | None:
        code = fact.error.get("code")
        if code not in FATAL_ERROR_CODES or fact.conn.n in self.fatal_in:
            return None
        here = Witness.of(fact.rec)
        self.fatal_in[fact.conn.n] = here
        if not self.ended_fatal or self.reported:
            return None
        self.reported = True
        first = self.ended_fatal[0]
        return [
            self.finding(
                fact.conn.n,
                f"{code} again on connection {fact.conn.n} (line {fact.rec.line}) after a reconnect",
                f"Connection {first.conn} got a fatal {code} at line {first.line}; the client reconnected and got "
                f"{code} again at line {fact.rec.line} ({len(self.ended_fatal) + 1} connections so far).",
                [first, here],
                fact.rec.line,
            )
        ]


class DuplicateResponseDone(Rule[Config]):
    """A second `response.done` for a response that was already done.

    **What it means.** A terminal event arrived twice: a client that appends the final transcript or output at
    `response.done` duplicates it in its mirror (livekit/agents #4652), and a waiter may be resolved twice.

    **Fix.** Make terminal handling idempotent: ignore a done for a response already done.
    """

    id = "RT121"
    slug = "duplicate-response-done"
    severity = "warning"
    title = "a response got two response.done events"
    fix = "Ignore a terminal event for a response that is already done."
    @on(ResponseDone)
    def response_done(self, fact: ResponseDone, state: TraceState) -> list[Finding] | None:
        if fact.again is None:
            return None
        line, t = fact.again
        here = Witness.of(fact.rec)
        first = Witness(line, t, "server", fact.conn.n, "response.done", f"response {fact.response.id} done")
        return [
            self.finding(
                fact.conn.n,
                f"response {fact.response.id} done again at line {fact.rec.line}",
                f"Response {fact.response.id} ended at line {first.line} and again at line {fact.rec.line}.",
                [first, here],
                fact.rec.line,
                responses=[fact.response.id],
            )
        ]
