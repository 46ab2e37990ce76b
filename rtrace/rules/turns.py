"""Rules about a turn the client leaves without an end after a connection ends: a response cut in flight that is
never asked for again after the reconnect, and a client that never comes back after an injected abnormal close.
What the wire shows of a client that hangs or gives up, beyond its exit code."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.facts import ChangeSent, ConnClosed, FaultInjected, Reconnected, ResponseCreated
from ..core.state import Connection, Response, TraceState
from .base import Config, Finding, Rule, Witness, on

#: The close code of a normal end (the session is over): any other close a fault caused is one a client should come
#: back from, and a client that ends a connection with it ended it on purpose.
NORMAL_CLOSE = 1000


class TurnNeverCompleted(Rule[Config]):
    """A response was generating when its connection ended, the client reconnected, and no connection after it
    asked for a response again (nor got one the server started on its own) within `--reply-timeout`.

    **What it means.** The user's turn has no answer and never will: the response that was to answer it died with
    the socket, and the client, though connected again (often reporting its state restored), either waits for a
    `response.done` that cannot come (the app hangs on the turn) or ends the turn unanswered.

    **How it is judged.** Needs the end of the trace. The response was created and had no `response.done` when
    its connection closed (a noted close, not the end of the recording); a reconnect replaced that connection; no
    later connection sent `response.create` (in the conversation or out of band) or got a server-started response;
    and the trace shows the client had the time: the trace goes on `--reply-timeout` (default 10 s) after the
    replacing connection opened, or that connection ended without asking, after the client restored the
    conversation on it (a replay: it meant to go on) or abnormally (not 1000: the client killed, its socket
    dropped). A trace that stops soon after the reconnect (the
    recording ended) is not reported, nor a close with no reconnect (`changes-lost-at-final-close`,
    `no-reconnect-after-abnormal-close`). A `response.create` with no answer at the close is
    `response-create-lost-on-reconnect`.

    **Minimal example.**

        [conn 1] C> response.create
        [conn 1] S< response.created resp_1
        [conn 1] -- closed 1011 --              <- resp_1 never done
        [conn 2] C> session.update, conversation.item.create ...   (replay, no response.create)
        ... 10 s, nothing asked ...

    **Usual cause.** A reconnect that restores the conversation but forgets the generation in flight: the turn's
    future stays pending, or is ended as if answered (livekit-agents 1.8.9 and 2.0.0b1: a close right after
    `response.created` discards the generation with a logged warning, and the turn ends with no reply and no error).

    **Fix.** On reconnect, fail the turn in flight visibly or ask for its response again (`response.create`).
    """

    id = "RT126"
    slug = "turn-never-completed"
    severity = "warning"
    title = "a response cut by a close was never asked for again after the reconnect"
    fix = "On reconnect, ask again for the response the close cut (response.create), or fail the turn visibly."
    needs = ("reconnect-replay",)

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        #: Responses cut by a close and not asked for again since, by the ordinal of the connection that lost
        #: them: (the response, its connection, the close, the connection that replaced it or None).
        self.cut: dict[int, tuple[Response, Connection, Witness | None, Connection | None]] = {}
        #: Ordinals of the connections the client sent something on after a reconnect (its replay, a turn).
        self.restoring: set[int] = set()

    @on(ConnClosed)
    def closed(self, fact: ConnClosed, state: TraceState) -> None:
        response = fact.orphaned
        if fact.conn.ended_by == "trace-end" or response is None or response.done_line is not None:
            return
        replaced = state.conns.get(fact.conn.replaced_by) if fact.conn.replaced_by is not None else None
        self.cut[fact.conn.n] = (response, fact.conn, Witness.closed(fact.conn), replaced)

    @on(Reconnected)
    def reconnected(self, fact: Reconnected, state: TraceState) -> None:
        lost = self.cut.get(fact.previous.n)
        if lost is not None:
            self.cut[fact.previous.n] = (*lost[:3], fact.conn)
        for change in fact.early:
            if change.kind == "response.create":
                self._asked(change.conn)

    @on(ChangeSent, after=[Reconnected])
    def sent(self, fact: ChangeSent, state: TraceState) -> None:
        conn = state.conns.get(fact.change.conn)
        if conn is not None and conn.replaces is not None:  # a connection that replaced another: restoring it
            self.restoring.add(conn.n)
        if fact.change.kind == "response.create":
            self._asked(fact.change.conn)

    @on(ResponseCreated, after=[Reconnected])
    def response_created(self, fact: ResponseCreated, state: TraceState) -> None:
        if fact.response.request is None:  # the server started one (VAD): the turn goes on
            self._asked(fact.conn.n)

    def _asked(self, conn: int) -> None:
        """A request on `conn` settles every response cut on an older connection."""
        for n in [n for n in self.cut if n < conn]:
            del self.cut[n]

    def finish(self, state: TraceState) -> Iterable[Finding] | None:
        out = []
        bound = self.config.reply_timeout
        for response, conn, closed, replacing in self.cut.values():
            if replacing is None or not replacing.replay_visible:
                continue  # no reconnect, or one whose replay (which may ask again) is unseen
            waited = (state.last_t or 0.0) - replacing.opened_t
            # it ended abnormally (the client killed, its socket dropped), or after the client restored the
            # conversation on it (a client that only reopened and closed 1000 ended the session on purpose)
            ended = replacing.ended_by == "closed"
            gave_up = ended and (replacing.close_code != NORMAL_CLOSE or replacing.n in self.restoring)
            if waited < bound and not gave_up:
                continue  # the recording stopped before the client had the time to ask again
            how = (
                f"connection {replacing.n} closed at line {replacing.closed_line} without asking"
                if gave_up and waited < bound
                else f"nothing was asked in the {waited:.1f} s the trace goes on after connection {replacing.n} "
                f"opened at line {replacing.opened_line}"
            )
            created = Witness.response_created(response)
            out.append(
                self.finding(
                    conn.n,
                    f"response {response.id} cut at line {conn.closed_line} never completed nor asked again",
                    f"Response {response.id} (created at line {response.created_line}) had no response.done when "
                    f"connection {conn.n} ended at line {conn.closed_line}; connection {replacing.n} replaced it, "
                    f"and {how}: the turn never completes.",
                    [created, closed, _opened(replacing)],
                    state.last_line,
                    responses=[response.id],
                )
            )
        return out


def _opened(conn: Connection) -> Witness:
    return Witness(conn.opened_line, conn.opened_t, "meta", conn.n, "connection.opened", f"connection {conn.n} opened")


class NoReconnectAfterAbnormalClose(Rule[Config]):
    """A fault the fake endpoint injected closed the connection abnormally (1001, 1006, 1011, 1012, 1013, an
    expiry), and the client never opened another one.

    **What it means.** The client gave up on the session at the first network fault: the user's conversation
    ends there, and unless the app surfaces the close (nothing on the wire can show that), the user is left with a
    silent agent.

    **How it is judged.** Only on a trace recorded by `rtrace serve --script` or a hunt: the close follows a script
    turn's `fault.injected` note (`action` `close` or `expire`) on its connection, and no connection opens after it
    until the trace ends. A real server's close is not judged: a recording that stops after it cannot show whether
    the client came back.

    **Minimal example.**

        [conn 1] -- fault.injected (close) --
        [conn 1] -- closed 1011 --
        (end of trace: no conn 2)

    **Usual cause.** A client whose session loop ends on `ConnectionClosed` instead of reconnecting.

    **Fix.** Reconnect (and restore the conversation), or surface the close to the app.
    """

    id = "RT127"
    slug = "no-reconnect-after-abnormal-close"
    severity = "warning"
    title = "an abnormal close a fault caused was never followed by a reconnect"
    fix = "Reconnect, or surface the close to the app."

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        #: Ordinals of the connections a fault is closing (their note seen, their close not yet).
        self.closing: set[int] = set()
        #: The last abnormal close a fault caused, not followed by any connection yet: (conn, the fault's note).
        self.last: tuple[Connection, Witness] | None = None
        self.notes: dict[int, Witness] = {}

    @on(FaultInjected)
    def fault(self, fact: FaultInjected, state: TraceState) -> None:
        if fact.action in ("close", "expire"):
            self.closing.add(fact.conn.n)
            self.notes[fact.conn.n] = Witness.of(fact.rec)

    @on(ConnClosed)
    def closed(self, fact: ConnClosed, state: TraceState) -> None:
        n = fact.conn.n
        if n in self.closing and fact.conn.ended_by == "closed" and fact.conn.close_code != NORMAL_CLOSE:
            self.last = (fact.conn, self.notes[n])
        self.closing.discard(n)

    @on(Reconnected)
    def reconnected(self, fact: Reconnected, state: TraceState) -> None:
        self.last = None

    def finish(self, state: TraceState) -> Iterable[Finding] | None:
        if self.last is None:
            return None
        conn, note = self.last
        if any(other.opened_line > (conn.closed_line or 0) for other in state.conns.values()):
            return None  # a connection opened after it (paired or not): the client came back
        code = conn.close_code if conn.close_code is not None else "without a code"
        return [
            self.finding(
                conn.n,
                f"connection {conn.n} closed {code} at line {conn.closed_line} by a fault; the client never came back",
                f"A fault closed connection {conn.n} at line {conn.closed_line} (code {code}, noted at line "
                f"{note.line}); no connection opened after it until the trace ends at line {state.last_line}.",
                [note, Witness.closed(conn)],
                state.last_line,
            )
        ]
