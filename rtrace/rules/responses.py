"""Rules about responses: generations left open, failed turns never retried, retries raced, concurrent
`response.create`, and every server error joined to its cause."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.facts import (
    ChangeAnswered,
    ChangeSent,
    ConnClosed,
    LocalGeneration,
    ResponseCreated,
    ResponseDone,
    ServerError,
)
from ..core.state import Change, Response, TraceState
from .base import Config, Finding, Rule, Witness, on
from .base import injected as _injected


class OrphanedGeneration(Rule[Config]):
    """A response never reached its terminal `response.done`: a new `response.created` on the same connection
    took over while it was open, or its connection ended while it generated.

    **What it means.** Whatever waits for that response (a turn, a speech handle, a `generate_reply` future)
    waits forever unless the client closes it itself: the agent hangs mid-turn.

    **Replaced** (another `response.created` while it is open): an error, the server's event stream itself
    left it open.

    **Cut by the connection** (the socket closed mid-response: a server fault, a network drop, the client's own
    close). A wire trace cannot show whether the client then closed its own generation, so without `local`
    annotations this is a warning: the client must close the generation when the socket ends, fail what waits
    for it, and ask for the response again on the next connection. With `local.generation.opened` / `.closed`
    annotations the client's side decides: a generation the client never closes (neither before the close nor
    after it, until the trace ends) is an error; one it closed is not reported.

    **Minimal example.**

        S> response.created resp_1
        S> response.output_text.delta resp_1 ...
        -- connection closed (1011) --           <- no response.done for resp_1

    **With `local` annotations**, a client generation still open when its connection ended and never closed, or
    opened again while the previous one is open, is reported too (an error): LiveKit overwrote
    `_current_generation` without closing it (livekit/agents #5276, #5566).

    A trace that simply stops while a response generates is not reported (the recording ended, not the
    response).

    **Fix.** Close every open generation on `response.created` of another response, on reconnect and on close;
    resolve its waiters with an error rather than leaving them pending, and ask again on the new connection.
    """

    id = "RT107"
    slug = "orphaned-generation"
    severity = "error"
    title = "a response (or client generation) was never closed"
    fix = "Close the open generation when another response starts, on reconnect and on close; fail its waiters."

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.replaced: dict[str, tuple[Response, Witness]] = {}
        #: conn -> the client generation it opened and has not closed (from `local.generation.*`).
        self.local_open: dict[int, Witness] = {}
        #: Connections with `local.generation.*` annotations: the client's side is known there.
        self.local_seen: set[int] = set()
        #: Client generations still open when their connection ended, with the response cut (if any) and the
        #: close: reported at the end unless the client closes them (it may, once it sees the socket closed).
        self.left_open: list[tuple[int, Response | None, Witness, Witness | None]] = []

    @on(ResponseCreated)
    def response_created(self, fact: ResponseCreated, state: TraceState) -> None:
        if fact.replaced is not None:
            self.replaced[fact.replaced.id] = (fact.replaced, Witness.of(fact.rec))

    @on(ResponseDone)
    def response_done(self, fact: ResponseDone, state: TraceState) -> None:
        self.replaced.pop(fact.response.id, None)

    @on(ConnClosed)
    def conn_closed(self, fact: ConnClosed, state: TraceState) -> list[Finding]:
        conn = fact.conn
        out = []
        for rid, (resp, by) in list(self.replaced.items()):
            if resp.conn != conn.n:
                continue
            del self.replaced[rid]
            out.append(
                self.finding(
                    conn.n,
                    f"response {rid} replaced at line {by.line} while still open",
                    f"Response {rid} (created at line {resp.created_line}) was still open when another response was "
                    f"created at line {by.line}, and it never reached response.done.",
                    [Witness.response_created(resp), by],
                    by.line,
                    responses=[rid],
                )
            )
        seen = conn.n in self.local_seen
        self.local_seen.discard(conn.n)
        opened = self.local_open.pop(conn.n, None)
        if conn.ended_by == "trace-end":
            return out  # the recording stopped, not the response
        if opened is not None:
            self.left_open.append((conn.n, fact.orphaned, opened, Witness.closed(conn)))
        elif fact.orphaned is not None and not seen:
            out.append(self._cut(fact, fact.orphaned))
        return out

    def _cut(self, fact: ConnClosed, resp: Response) -> Finding:
        conn = fact.conn
        code = f" (code {conn.close_code})" if conn.close_code is not None else ""
        by = fact.rec.event.get("by")
        who = f"; the recorder says the {by} closed it" if isinstance(by, str) and by else ""
        return self.finding(
            conn.n,
            f"response {resp.id} cut when connection {conn.n} ended (line {fact.rec.line})",
            f"Response {resp.id} (created at line {resp.created_line}) had no response.done when connection "
            f"{conn.n} ended at line {fact.rec.line}{code}{who}: the connection (server, network or client) cut it "
            "mid-response. The trace cannot show whether the client closed its own generation: it must close it "
            "when the socket ends, fail whatever waits for it, and ask for the response again on the next "
            "connection (local.generation.* annotations would show it).",
            [Witness.response_created(resp), Witness.closed(conn)],
            fact.rec.line,
            severity="warning",
            responses=[resp.id],
        )

    @on(LocalGeneration)
    def generation(self, fact: LocalGeneration, state: TraceState) -> list[Finding] | None:
        n = fact.conn.n
        self.local_seen.add(n)
        if not fact.opened:
            if self.local_open.pop(n, None) is None:
                # The client closes a generation it left open at a close (it saw the socket end).
                for k, entry in enumerate(self.left_open):
                    if entry[0] <= n:
                        del self.left_open[k]
                        break
            return None
        previous = self.local_open.get(n)
        self.local_open[n] = Witness.of(fact.rec)
        if previous is None:
            return None
        return [
            self.finding(
                n,
                f"client generation opened at line {previous.line} overwritten at line {fact.rec.line}",
                f"The client opened a new generation at line {fact.rec.line} while the one opened at line "
                f"{previous.line} was still open; the first is never closed.",
                [previous, Witness.of(fact.rec)],
                fact.rec.line,
            )
        ]

    def finish(self, state: TraceState) -> Iterable[Finding] | None:
        out = []
        for n, resp, opened, closed in self.left_open:
            end = closed.line if closed else state.last_line
            if resp is not None:
                message = (
                    f"response {resp.id} cut when connection {n} ended (line {end}), client generation never closed"
                )
                text = (
                    f"Response {resp.id} (created at line {resp.created_line}) had no response.done when connection "
                    f"{n} ended at line {end}, and the client never closed its generation opened at line "
                    f"{opened.line}: anything waiting for it waits forever."
                )
            else:
                message = f"client generation opened at line {opened.line} never closed"
                text = (
                    f"The client opened a generation at line {opened.line} and had not closed it when connection {n} "
                    f"ended at line {end}, nor later."
                )
            witness = [Witness.response_created(resp) if resp else None, opened, closed]
            out.append(
                self.finding(n, message, text, witness, state.last_line, responses=[resp.id if resp else None])
            )
        return out


class FailedResponseNotRetried(Rule[Config]):
    """A `response.done` with status `failed` and no output item, and the turn is never asked for again.

    **What it means.** The agent's turn silently disappears: the user spoke, the model failed before saying
    anything, and nothing asks again (livekit/agents #6205).

    A later `response.create` from the client, or a server-initiated response, on any connection counts as
    asking again. Needs the end of the trace.

    **Fix.** Retry a failed response that produced no output (bounded, with backoff), or tell the user.
    """

    id = "RT108"
    slug = "failed-response-not-retried"
    severity = "warning"
    title = "a response failed before any output and was never retried"
    fix = "Retry a response that failed before any output (bounded, with backoff), or surface the failure."

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.failed: list[tuple[Response, Witness]] = []

    @on(ResponseDone)
    def response_done(self, fact: ResponseDone, state: TraceState) -> None:
        resp = fact.response
        if resp.status == "failed" and not resp.output:
            self.failed.append((resp, Witness.of(fact.rec)))

    @on(ChangeSent, kinds=["response.create"])
    def sent(self, fact: ChangeSent, state: TraceState) -> None:
        if fact.change.kind == "response.create":
            self.failed.clear()

    @on(ResponseCreated)
    def response_created(self, fact: ResponseCreated, state: TraceState) -> None:
        if fact.response.request is None:
            self.failed.clear()

    def finish(self, state: TraceState) -> Iterable[Finding] | None:
        out = []
        for resp, done in self.failed:
            code = (resp.error or {}).get("code") or (resp.error or {}).get("type") or "no error code"
            out.append(
                self.finding(
                    resp.conn,
                    f"response {resp.id} failed at line {done.line} ({code}) and was never retried",
                    f"Response {resp.id} ended failed at line {done.line} ({code}) with no output, and nothing asked "
                    f"for a response again until the trace ends at line {state.last_line}.",
                    [Witness.response_created(resp) if resp.created_line != done.line else None, done],
                    state.last_line,
                    responses=[resp.id],
                )
            )
        return out


class RetryRacedByNewResponse(Rule[Config]):
    """After a response failed before any output, a new `response.created` arrived before the client's retry
    `response.create`.

    **What it means.** A client that keeps the failed generation open to retry it adopts the new, unrelated
    response as the retry (or opens a second one on top of it): one of them is orphaned, and the retry is
    rejected with `conversation_already_has_active_response` (livekit/agents PR #6454 review).

    **Minimal example.**

        S> response.done   resp_1 failed (no output)
        S> response.created resp_2               <- server VAD, or an earlier request
        C> response.create                       <- the retry, too late

    **Fix.** Close the failed generation first; match responses to requests by `metadata.client_event_id`, and
    drop the retry when another response has started.
    """

    id = "RT109"
    slug = "retry-raced-by-new-response"
    severity = "warning"
    title = "a new response started before the client's retry of a failed one"
    fix = (
        "Close the failed generation at once; match responses by metadata.client_event_id; "
        "skip the retry if another response started."
    )

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        #: conn -> (failed response witness, racing response witness or None)
        self.after_failure: dict[int, tuple[Witness, Witness | None]] = {}

    @on(ResponseDone)
    def response_done(self, fact: ResponseDone, state: TraceState) -> None:
        resp = fact.response
        if resp.status == "failed" and not resp.output:
            self.after_failure[resp.conn] = (Witness.of(fact.rec), None)

    @on(ResponseCreated)
    def response_created(self, fact: ResponseCreated, state: TraceState) -> None:
        entry = self.after_failure.get(fact.conn.n)
        if entry is None or entry[1] is not None:
            return
        failed, _ = entry
        request = fact.response.request
        if request is not None and request.line > failed.line:
            del self.after_failure[fact.conn.n]  # the retry itself
        else:
            self.after_failure[fact.conn.n] = (failed, Witness.of(fact.rec))

    @on(ChangeSent, kinds=["response.create"])
    def sent(self, fact: ChangeSent, state: TraceState) -> list[Finding] | None:
        change = fact.change
        if change.kind != "response.create":
            return None
        entry = self.after_failure.pop(change.conn, None)
        if entry is None:
            return None
        failed, racer = entry
        if racer is None:
            return None
        return [
            self.finding(
                change.conn,
                f"retry at line {change.line} comes after a new response started at line {racer.line}",
                f"The response that failed at line {failed.line} produced no output; before the client's retry "
                f"(line {change.line}) another response was created at line {racer.line}. A client holding the "
                "failed generation open for the retry orphans it or takes the new response for the retry.",
                [failed, racer, Witness.sent(change)],
                change.line,
                event_ids=[change.event_id],
            )
        ]


class ConcurrentResponseCreate(Rule[Config]):
    """`response.create` while a response is active on the connection.

    **What it means.** The server answers `conversation_already_has_active_response` and the request is lost;
    a client waiting for its `response.created` times out (LiveKit: "generate_reply timed out.").

    **How it is judged.** Active means a response between `response.created` and `response.done`, or an
    earlier `response.create` not yet answered (the server will have started it first). Out-of-band requests
    (`conversation: "none"`) may run in parallel and are not reported. When the trace has the answer, the
    answer decides: a `response.created` means the server had finished in time.

    **Fix.** Wait for `response.done` (or cancel and wait for it) before asking again; queue requests.
    """

    id = "RT111"
    slug = "concurrent-response-create"
    severity = "warning"
    title = "response.create while a response is active"
    fix = "Wait for response.done (or cancel and await it) before the next response.create; queue requests."

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.suspect: dict[int, tuple[Change, Witness | None]] = {}

    @on(ChangeSent, kinds=["response.create"])
    def sent(self, fact: ChangeSent, state: TraceState) -> None:
        change = fact.change
        if change.kind != "response.create" or change.conversation == "none":
            return
        conn = state.conns[change.conn]
        if conn.active is not None and conn.active.open:
            self.suspect[change.seq] = (change, Witness.response_created(conn.active))
            return
        for other in conn.pending.oldest_replies(True, 2):
            if other is not change:
                self.suspect[change.seq] = (change, Witness.sent(other))
                break

    @on(ChangeAnswered, kinds=["response.create"])
    def answered(self, fact: ChangeAnswered, state: TraceState) -> list[Finding] | None:
        change = fact.change
        entry = self.suspect.pop(change.seq, None)
        if change.kind != "response.create":
            return None
        code = (change.error or {}).get("code")
        # an injected answer (a fault's note before it) is no verdict: only what the trace shows of the client is
        told = code == "conversation_already_has_active_response" and not _injected(fact.rec, change, state)
        if change.status == "rejected" and (entry is not None or told):
            return [self._finding(change, entry[1] if entry else None, Witness.of(fact.rec), fact.rec.line)]
        return None

    @on(ConnClosed)
    def conn_closed(self, fact: ConnClosed, state: TraceState) -> list[Finding]:
        out = []
        for change in fact.indeterminate:
            entry = self.suspect.pop(change.seq, None)
            if entry is not None:
                out.append(self._finding(change, entry[1], Witness.answer(change), fact.rec.line))
        return out

    def _finding(self, change: Change, active: Witness | None, answer: Witness | None, at: int) -> Finding:
        why = f" (active since line {active.line})" if active else ""
        outcome = (
            f"the server rejected it at line {answer.line}" if answer and answer.type == "error" else "no answer came"
        )
        return self.finding(
            change.conn,
            f"response.create at line {change.line} while a response is active",
            f"Line {change.line} asks for a response while one is active{why}; {outcome}.",
            [active, Witness.sent(change), answer],
            at,
            event_ids=[change.event_id],
        )


class ServerErrorRule(Rule[Config]):
    """Every server `error` event, joined to the client event that caused it.

    **How it is joined.** By `error.event_id` when the server filled it; else by an id quoted in the error
    message (an item id, a call id); else by the field it names: the client event whose `param`
    (`item.content[0].type`) holds the value the message refuses ('text'), as a schema error is answered
    ahead of the acks of the events before it; else by arrival order (the server answers a connection's
    events in order).
    Quoted ids and order only consider the client events the error's code can answer, from the catalogue's
    table: `response_cancel_not_active` answers only a `response.cancel`, `invalid_tool_call_id` only a
    `conversation.item.create`, a generic code such as `invalid_value` the event its `param` names
    (`item.call_id`: a create), and a session-level error (`session_expired`, `insufficient_quota`) answers
    none. A code rtrace does not know may answer any event. The explanation says which way the join was made.

    **Minimal example.**

        C> conversation.item.delete item_x
        C> response.cancel
        S> error response_cancel_not_active (event_id null)   <- answers the cancel, not the older delete

    `info` severity: most errors are recoverable, and the other rules say which ones matter.
    """

    id = "RT112"
    slug = "server-error"
    severity = "info"
    title = "the server sent an error"
    fix = "Handle the error where the client sends the event it answers; see the other findings for its cause."

    @on(ServerError)
    def server_error(self, fact: ServerError, state: TraceState) -> list[Finding] | None:
        err = fact.error
        code = err.get("code") or err.get("type") or "error"
        message = str(err.get("message") or "")
        cause, answers = fact.cause, fact.answers
        kinds = " or ".join(sorted(answers)) if answers else ""
        if cause is not None:
            if fact.how == "event-id":
                how = "by error.event_id"
            elif fact.how == "quoted-id":
                how = "by an id quoted in the message"
            elif fact.how == "named-field":
                how = f"by the field it names ({err.get('param')})"
            elif answers is None:
                how = "by order (error.event_id was not set)"
            else:
                how = f"by order, as the oldest pending {kinds} ({code} answers no other event)"
            text = (
                f"Line {fact.rec.line}: {code}: {message!r}. "
                f"It answers line {cause.line} ({cause.summary}), joined {how}."
            )
        elif answers is not None and not answers:
            text = f"Line {fact.rec.line}: {code}: {message!r}. A session-level error: it answers no client event."
        elif answers is not None and fact.conn.pending:
            text = (
                f"Line {fact.rec.line}: {code}: {message!r}. {code} answers only {kinds}, and none is pending: "
                "the pending client events stay pending."
            )
        else:
            text = f"Line {fact.rec.line}: {code}: {message!r}. No pending client event to join it to."
        return [
            self.finding(
                fact.conn.n,
                f"{code} at line {fact.rec.line}" + (f" answering line {cause.line}" if cause else ""),
                text,
                [Witness.sent(cause) if cause else None, Witness.of(fact.rec)],
                fact.rec.line,
                event_ids=[
                    cause.event_id if cause else None,
                    err.get("event_id") if isinstance(err.get("event_id"), str) else None,
                ],
                items=[cause.item_id if cause else None],
            )
        ]
