"""Rules about tool calls: a `function_call` must keep its `function_call_output`, and an output needs its call."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from ..core.conversation import Item
from ..core.facts import (
    ChangeAnswered,
    ChangeSent,
    ConnClosed,
    Fact,
    ItemAdded,
    ItemDeleted,
    ItemDone,
    ResponseCreated,
    ResponseDone,
    SentIntoClosing,
    ServerError,
    SessionUpdated,
)
from ..core.state import Change, Connection, Response, TraceState, unfinished_call
from .base import ITEM_CHANGES, Burst, Bursts, Config, Finding, Rule, Witness, ms, on

_FUNCTION_ITEMS: Final = ("function_call", "function_call_output")


class DeletedFunctionCallOutput(Rule[Config]):
    """The client deleted a `function_call_output` while its `function_call` stayed in the conversation.

    **What it means.** The server confirmed that the conversation lost the tool's result but kept the call. From
    then on every response is generated as if the tool never answered: the model says the tool "is still
    running", calls it again, or makes up a result.

    **Why it matters.** Nothing fails: no error event, no exception, no timeout. The turn looks normal in the
    logs and only the answers are wrong.

    **Minimal example.**

        C> conversation.item.create  function_call_output item_out (call_1)
        S> conversation.item.added   item_out
        C> conversation.item.delete  item_out          <- while function_call (call_1) stays
        S> conversation.item.deleted item_out

    A delete followed in the same burst by a create of the same id (an in-place update) is not a loss and is
    not reported; neither is a delete of the output together with its call.

    **Usual cause.** Two pushes of the conversation built from different snapshots: one adds the tool output,
    the other was diffed against a copy taken before the output was acknowledged and "removes" it
    (livekit/agents #4960, #5021; see `stale-snapshot-delete`).

    **Fix.** Serialize conversation pushes and diff against the server-confirmed conversation *including*
    in-flight creates; never delete an item whose create is unacknowledged or was just acknowledged.
    """

    id = "RT101"
    needs = ("timestamps",)
    slug = "deleted-function-call-output"
    severity = "error"
    title = "a function_call_output was deleted while its function_call stayed"
    fix = (
        "Diff pushes against the confirmed conversation plus in-flight creates, serialize them, and never "
        "delete a function_call_output whose function_call stays."
    )

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.bursts = Bursts(self.config.burst_window)
        #: The burst of each delete still waiting for its answer.
        self.burst_of: dict[int, Burst] = {}

    @on(ChangeSent, kinds=(*ITEM_CHANGES, "conversation.item.retrieve"))
    def sent(self, fact: ChangeSent, state: TraceState) -> None:
        change = fact.change
        if change.kind.startswith("conversation.item.") and state.conns[change.conn].open:
            # (a change sent after its connection ended can have no answer: no delete of it is ever confirmed)
            burst = self.bursts.add(change)
            if change.kind == "conversation.item.delete":
                self.burst_of[change.seq] = burst

    @on(ChangeAnswered, kinds=["conversation.item.delete"])
    def answered(self, fact: ChangeAnswered, state: TraceState) -> None:
        self.burst_of.pop(fact.change.seq, None)

    @on(ConnClosed)
    def closed(self, fact: ConnClosed, state: TraceState) -> None:
        for change in fact.indeterminate:
            self.burst_of.pop(change.seq, None)
        self.bursts.forget(fact.conn.n)

    @on(ItemDeleted, items=["function_call_output"])
    def deleted(self, fact: ItemDeleted, state: TraceState) -> list[Finding] | None:
        delete, gone, conn = fact.change, fact.item, fact.conn
        if delete is None or gone is None or gone.type != "function_call_output" or not gone.call_id:
            return None
        burst = self.burst_of.get(delete.seq)
        call = conn.expected_call(gone.call_id)
        if call is None or conn.expected_outputs(gone.call_id):
            return None
        return [self._finding(fact, conn, gone, call, delete, burst)]

    def _finding(
        self, fact: ItemDeleted, conn: Connection, item: Item, call: Item, delete: Change, burst: Burst | None
    ) -> Finding:
        create = Witness.created(item, conn)
        mates = burst.creates[:3] if burst is not None else []
        parts = []
        if create is not None:
            parts.append(
                f"Line {create.line} created {item.label()}; the server confirmed it at line {item.added_line}; "
            )
            parts.append(f"line {delete.line} deleted it {ms(delete.t - item.added_t)} later")
        else:
            parts.append(f"{item.label()} was added at line {item.added_line}; line {delete.line} deleted it")
        if mates:
            listed = ", ".join(f"{c.item_label() or c.summary} at line {c.line}" for c in mates[:3])
            parts.append(f", in the same burst as the create of {listed}")
        parts.append(f", while {call.label()} stayed. ")
        parts.append(f"From line {fact.rec.line} on, every response is generated without the tool result.")
        witness = [
            Witness.added(call, conn) if call.added_line else None,
            create,
            Witness.added(item, conn),
            Witness.sent(delete),
            *(Witness.sent(c) for c in mates[:3]),
            Witness.of(fact.rec),
        ]
        return self.finding(
            conn.n,
            f"{item.label()} deleted at line {delete.line} while {call.label()} stays",
            "".join(parts),
            witness,
            fact.rec.line,
            items=[item.id, call.id],
            call_ids=[item.call_id],
            event_ids=[delete.event_id],
        )


class UnansweredFunctionCall(Rule[Config]):
    """A response was asked for (or started by the server on its own, or the session ended) while a
    `function_call` had no `function_call_output`.

    **What it means.** The model generates the next response without the tool's result: it says the tool is
    "still running", answers from nothing, or calls the tool again.

    **Why it matters.** Sometimes intended (a chatty agent that speaks while a slow tool runs), often not: the
    output was deleted by a racing push, rejected, or lost on a reconnect. Each unanswered stretch of a call is
    reported once, at the first `response.create` in it; later ones in the same stretch are not reported again.

    **Minimal example.**

        S> conversation.item.added  function_call item_fc (call_1)
        C> response.create                                 <- no function_call_output for call_1

    When an output for the call was sent but rejected, or was still unconfirmed when its connection ended, or was
    written into the closing connection after the server's close was noted, the finding says so and names that
    line. A connection that ends with the call unanswered is reported only when
    no later connection answers it. A
    `function_call` whose arguments never finished (its response was cut before
    `response.function_call_arguments.done`) is not a call the client could answer and is not reported.

    A `response.create` sent while the output (or, in a pipelined replay, the call itself) is still pending is
    judged once its response ran: fine when the output was confirmed; when it was rejected, never confirmed or
    written into the closing connection, the finding names the response generated without it (its
    `response.created` and `response.done` lines), as it does when the `response.create` follows the error.

    **Usual cause.** The output was never sent, was deleted (`deleted-function-call-output`), or the client asks
    for a reply before the tool returns.

    **Fix.** Send the `function_call_output` before the next `response.create`; if speech must go on while the
    tool runs, make it explicit (an out-of-band response with `conversation: "none"`).
    """

    id = "RT103"
    slug = "unanswered-function-call"
    severity = "warning"
    title = "a response was requested while a function_call had no output"
    fix = (
        "Create the function_call_output before asking for the next response, or use an out-of-band "
        "response (conversation: none) for speech while the tool runs."
    )

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        #: conn -> call_id -> the witness of why it is unanswered now (call added, or its output deleted); a
        #: connection's calls go when it closes.
        self.unanswered: dict[int, dict[str, list[Witness]]] = {}
        #: (conn, call_id) -> True once its current unanswered stretch was reported (reported once per stretch).
        self.reported: dict[tuple[int, str], bool] = {}
        self.answered_calls: set[str] = set()
        #: (conn, call_id) -> the latest output sent for it that the server rejected, or that was unconfirmed when
        #: the connection ended: its create and its answer (the error, or the close).
        self.failed: dict[tuple[int, str], tuple[Change, Witness | None]] = {}
        self.at_close: list[tuple[int, Item, list[Witness], Witness | None]] = []
        #: response.creates sent while an output (or its call) they depend on was still pending, by the seq of the
        #: response.create: judged once the response ran and each such output is confirmed or failed.
        self.pipelined: dict[int, _Pipelined] = {}
        #: The seqs of `pipelined` by connection.
        self.pipelined_on: dict[int, list[int]] = {}

    @on(ItemAdded, ItemDone, items=_FUNCTION_ITEMS)
    def item(self, fact: ItemAdded | ItemDone, state: TraceState) -> None:
        item, conn = fact.item, fact.conn
        if item.type == "function_call" and item.call_id and isinstance(fact, ItemAdded):
            self.unanswered.setdefault(conn.n, {}).setdefault(item.call_id, [Witness.added(item, conn)])
        elif item.type == "function_call_output" and item.call_id:
            self.unanswered.get(conn.n, {}).pop(item.call_id, None)
            self.reported.pop((conn.n, item.call_id), None)
            self.failed.pop((conn.n, item.call_id), None)
            self.answered_calls.add(item.call_id)

    @on(ChangeAnswered, kinds=["conversation.item.create"], items=_FUNCTION_ITEMS)
    def answered(self, fact: ChangeAnswered, state: TraceState) -> list[Finding] | None:
        change = fact.change
        if change.status == "rejected" and (call_id := _output_call(change)) is not None:
            self.failed[(change.conn, call_id)] = (change, Witness.answer(change))
        if change.conn in self.pipelined_on and _call_of(change) is not None:
            return self._pipelined_ready(state.conns[change.conn], fact.rec.line, closing=False)
        return None

    @on(ItemDeleted, items=_FUNCTION_ITEMS)
    def deleted(self, fact: ItemDeleted, state: TraceState) -> None:
        gone, conn = fact.item, fact.conn
        if gone is None or not gone.call_id:
            return
        key = (conn.n, gone.call_id)
        if gone.type == "function_call":
            self.unanswered.get(conn.n, {}).pop(gone.call_id, None)
        elif gone.type == "function_call_output" and gone.call_id in conn.conv.by_call:
            call = conn.conv.items[conn.conv.by_call[gone.call_id]]
            self.unanswered.setdefault(conn.n, {})[gone.call_id] = [Witness.added(call, conn), Witness.of(fact.rec)]
            self.reported.pop(key, None)

    @on(SentIntoClosing)
    def sent_into_closing(self, fact: SentIntoClosing, state: TraceState) -> None:
        for change in fact.changes:
            if (call_id := _output_call(change)) is not None:
                self.failed[(fact.conn.n, call_id)] = (change, Witness.closed(fact.conn))

    @on(ConnClosed)
    def closed(self, fact: ConnClosed, state: TraceState) -> list[Finding] | None:
        conn = fact.conn
        for change in fact.indeterminate:
            if (call_id := _output_call(change)) is not None:
                self.failed[(conn.n, call_id)] = (change, Witness.answer(change))
        out = self._pipelined_ready(conn, fact.rec.line, closing=True) if conn.n in self.pipelined_on else None
        for call_id, why in self.unanswered.pop(conn.n, {}).items():
            if self.reported.pop((conn.n, call_id), False):
                continue
            item_id = conn.conv.by_call.get(call_id)
            if item_id is not None and not unfinished_call(conn.conv.items[item_id]):
                self.at_close.append((conn.n, conn.conv.items[item_id], why, Witness.closed(conn)))
        return out

    @on(ResponseCreated)
    def response_created(self, fact: ResponseCreated, state: TraceState) -> list[Finding] | None:
        # A response the server starts on its own (server VAD) answers without the tool result too.
        resp = fact.response
        if resp.request is not None:
            pipelined = self.pipelined.get(resp.request.seq)
            if pipelined is not None:
                pipelined.response = resp
            return None
        if not resp.in_conversation:
            return None
        trigger = Witness.of(fact.rec)
        return self._judge(fact.conn, trigger, f"the server starts response {resp.id} on its own", None)

    @on(ResponseDone)
    def response_done(self, fact: ResponseDone, state: TraceState) -> list[Finding] | None:
        request = fact.response.request
        if request is None or request.seq not in self.pipelined:
            return None
        return self._pipelined_ready(fact.conn, fact.rec.line, closing=False)

    @on(ChangeSent, kinds=["response.create"])
    def sent(self, fact: ChangeSent, state: TraceState) -> list[Finding] | None:
        change = fact.change
        if change.kind != "response.create" or change.conversation == "none":
            return None
        conn = state.conns[change.conn]
        out = None  # no call waiting, no finding: the witness is built only when `_judge` has calls to look at
        if self.unanswered.get(conn.n):
            out = self._judge(conn, Witness.sent(change), "asks for a response", change.event_id)
        if conn.pending.count("conversation.item.create") > 0 and conn.ended_by is None:
            self._pipeline(conn, change)
        return out

    def _pipeline(self, conn: Connection, change: Change) -> None:
        """Keep a response.create sent while creates of function items are pending: the response may run without
        the output they carry, whatever the few milliseconds between them."""
        calls: dict[str, Change] = {}
        for pending in conn.pending.values():
            call_id = _call_of(pending)
            if call_id is not None and call_id not in conn.conv.outputs_by_call:
                if call_id not in calls or _output_call(pending) is not None:
                    calls[call_id] = pending  # the output the response waits for, else the pending call
        calls = {c: p for c, p in calls.items() if not self.reported.get((conn.n, c))}
        if calls:
            self.pipelined[change.seq] = _Pipelined(change, calls)
            self.pipelined_on.setdefault(conn.n, []).append(change.seq)

    def _pipelined_ready(self, conn: Connection, at: int, closing: bool) -> list[Finding] | None:
        """Judge the pipelined response.creates of `conn` that can be: each whose response ran (`response.done`,
        or created and cut by the close) and none of whose outputs is still pending. A call whose output the
        server confirmed is fine; one with an output rejected, written into the closing socket or unconfirmed at
        the close is named with the response that ran without it."""
        out: list[Finding] = []
        seqs = self.pipelined_on.get(conn.n, [])
        for seq in list(seqs):
            p = self.pipelined[seq]
            resp = p.response
            ran = resp is not None and (resp.done_line is not None or (closing and resp.orphaned is not None))
            if not closing and not ran:
                continue
            missing: list[tuple[str, Change | None]] = []
            for call_id, sent in p.calls.items():
                if not self._without(conn, call_id):
                    continue  # confirmed, or the call is not in this session: not this rule's
                output = self._output_for(conn, call_id, sent)
                if output is not None and output.status == "pending" and not closing:
                    break
                missing.append((call_id, output))
            else:
                seqs.remove(seq)
                del self.pipelined[seq]
                if ran and resp is not None:
                    out.extend(self._ran_without(conn, p, resp, missing, at))
        if not seqs:
            self.pipelined_on.pop(conn.n, None)
        return out or None

    def _without(self, conn: Connection, call_id: str) -> bool:
        """Whether the session holds the call of `call_id` (finished, not reported in this stretch) and no output
        of it."""
        if call_id in conn.conv.outputs_by_call:
            return False
        item_id = conn.conv.by_call.get(call_id)
        if item_id is None or unfinished_call(conn.conv.items[item_id]):
            return False
        return not self.reported.get((conn.n, call_id))

    def _output_for(self, conn: Connection, call_id: str, sent: Change) -> Change | None:
        """The output create of `call_id` a pipelined response waited for: the one pending then, or one that failed
        since (None: no output was sent)."""
        failed = self.failed.get((conn.n, call_id))
        if failed is not None and failed[0].seq >= sent.seq:
            return failed[0]
        return sent if _output_call(sent) is not None else None

    def _ran_without(
        self, conn: Connection, p: _Pipelined, resp: Response, missing: list[tuple[str, Change | None]], at: int
    ) -> list[Finding]:
        out = []
        trigger = p.request
        for call_id, output in missing:
            call = conn.conv.items[conn.conv.by_call[call_id]]
            self.reported[(conn.n, call_id)] = True
            if output is None:
                state = f"{call.label()} is still pending (a pipelined replay) and no output for it was sent"
            elif output.status == "rejected":
                state = (
                    f"the function_call_output of {call.label()} (line {output.line}) is still pending, and the "
                    f"server rejected it at line {output.answer_line} with {_code(output)}"
                )
            elif conn.closed_line is not None and output.line > conn.closed_line:
                state = (
                    f"the function_call_output of {call.label()} (line {output.line}) is written into the closing "
                    f"connection after its close at line {conn.closed_line}"
                )
            else:
                state = (
                    f"the function_call_output of {call.label()} (line {output.line}) is still pending, and it was "
                    "never confirmed"
                )
            lines = f"lines {resp.created_line}-{resp.done_line}" if resp.done_line else f"line {resp.created_line}"
            created = Witness(
                resp.created_line, resp.created_t, "server", conn.n, "response.created", f"response.created {resp.id}"
            )
            done = (
                Witness(
                    resp.done_line, resp.done_t or resp.created_t, "server", conn.n, "response.done",
                    f"response.done {resp.id} ({resp.status})",
                )
                if resp.done_line
                else None
            )
            out.append(
                self.finding(
                    conn.n,
                    f"response {resp.id} ran without the output of {call.label()}",
                    f"Line {trigger.line} asks for a response while {state}: response {resp.id} ({lines}) was "
                    "generated without the tool result.",
                    [Witness.added(call, conn), *(_failure_witness((output, Witness.answer(output))) if output else []),
                     Witness.sent(trigger), created, done],
                    max(at, resp.done_line or resp.created_line),
                    items=[call.id],
                    call_ids=[call_id],
                    event_ids=[trigger.event_id],
                )
            )  # fmt: skip
        return out

    def _judge(self, conn: Connection, trigger: Witness, what: str, event_id: str | None) -> list[Finding]:
        out = []
        n = conn.n
        for call_id, why in self.unanswered.get(n, {}).items():
            if self.reported.get((n, call_id)):
                continue
            pending_call = conn.expected_call(call_id)
            if pending_call is None or conn.expected_outputs(call_id) or unfinished_call(pending_call):
                continue
            rid = pending_call.response_id
            if rid and (resp := conn.responses.get(rid)) is not None and resp.open:
                continue  # the call is still being generated; `concurrent-response-create` covers this
            self.reported[(n, call_id)] = True
            failed = self.failed.get((n, call_id))
            if failed is not None:
                cause = f" confirmed function_call_output ({_failure(*failed, at_close=False)})"
            else:
                cause = f" function_call_output{' after its output was deleted' if len(why) > 1 else ''}"
            out.append(
                self.finding(
                    conn.n,
                    f"{trigger.type} at line {trigger.line} while {pending_call.label()} has no output",
                    f"Line {trigger.line} {what} while {pending_call.label()} "
                    f"(line {pending_call.added_line}) has no{cause}: the model answers without the tool result.",
                    [*why, *_failure_witness(failed), trigger],
                    trigger.line,
                    items=[pending_call.id],
                    call_ids=[call_id],
                    event_ids=[event_id],
                )
            )
        return out

    def finish(self, state: TraceState) -> Iterable[Finding] | None:
        out = []
        failed_by_call: dict[str, list[tuple[int, Change, Witness | None]]] = {}
        for (n, call_id), (change, answer) in sorted(self.failed.items()):
            failed_by_call.setdefault(call_id, []).append((n, change, answer))
        for n, call, why, closed in self.at_close:
            if call.call_id in self.answered_calls or call.call_id is None:
                continue
            end = closed.line if closed else state.last_line
            failed = self.failed.get((n, call.call_id))
            what = "no function_call_output"
            if failed is not None and failed[0].line > end:
                what = (
                    f"no function_call_output before the close (the one at line {failed[0].line} was written into "
                    "the closing connection, after the server's close: it never reached the session)"
                )
            elif failed is not None:
                what = f"no confirmed function_call_output ({_failure(*failed, at_close=True)})"
            later = [
                f"connection {m} sent one at line {change.line} and {_outcome(change, answer)}"
                for m, change, answer in failed_by_call.get(call.call_id, ())
                if m > n
            ]
            tail = f" ({'; '.join(later)})" if later else ""
            out.append(
                self.finding(
                    n,
                    f"connection {n} ended with {call.label()} unanswered",
                    f"{call.label()} (line {call.added_line}) had {what} when connection {n} "
                    f"ended at line {end}, and no later connection answered call {call.call_id}{tail}.",
                    [*why, *_failure_witness(failed), closed],
                    max(end, failed[0].line) if failed is not None else end,  # an output written after the close
                    items=[call.id],
                    call_ids=[call.call_id],
                )
            )
        return out



class _Pipelined:
    """A response.create sent while creates of function items were pending (`UnansweredFunctionCall`)."""

    __slots__ = ("calls", "request", "response")

    def __init__(self, request: Change, calls: dict[str, Change]) -> None:
        self.request = request
        #: call_id -> the pending create it waited for (the output, or the call of a pipelined replay).
        self.calls = calls
        self.response: Response | None = None


def _call_of(change: Change) -> str | None:
    """The call_id of a create of a `function_call` or a `function_call_output`."""
    if change.kind == "conversation.item.create" and change.item_type in _FUNCTION_ITEMS:
        return change.call_id
    return None


def _output_call(change: Change) -> str | None:
    """The call_id a change answers, when it creates a `function_call_output`."""
    if change.kind == "conversation.item.create" and change.item_type == "function_call_output":
        return change.call_id
    return None


def _code(change: Change) -> str:
    return str((change.error or {}).get("code") or (change.error or {}).get("type") or "error")


def _outcome(change: Change, answer: Witness | None) -> str:
    """What happened to an output a later connection sent: `the server rejected it at line 32 with CODE`."""
    at = answer.line if answer else "?"
    if change.status == "rejected":
        return f"the server rejected it at line {at} with {_code(change)}"
    return f"it was still unconfirmed when that connection ended at line {at}"


def _failure(change: Change, answer: Witness | None, at_close: bool) -> str:
    """What happened to the output sent for the call: `the one sent at line 15 was rejected at line 16 with CODE`."""
    at = answer.line if answer else "?"
    if change.status == "rejected":
        return f"the one sent at line {change.line} was rejected at line {at} with {_code(change)}"
    if at_close:
        return f"the one sent at line {change.line} was still unconfirmed"
    return f"the one sent at line {change.line} was unconfirmed when its connection ended at line {at}"


def _failure_witness(failed: tuple[Change, Witness | None] | None) -> list[Witness | None]:
    return [Witness.sent(failed[0]), failed[1]] if failed is not None else []


class NoResponseAfterToolOutput(Rule[Config]):
    """A `function_call_output` was sent and no response was asked for within `--reply-timeout` (default 10 s),
    while the trace went on.

    **What it means.** The model does not answer a tool output on its own: the client must send
    `response.create` (docs/protocol.md 2.6). Without it the agent goes silent after its tool answered, and the user
    waits for an answer that never comes.

    **How it is judged.** From the output's create, on its connection: a `response.create` (in the conversation
    or out of band) or a response the server starts on its own (the user spoke) ends the wait. The finding is
    made at the first event after the timeout, or when the connection or the trace ends after it. A connection
    or a trace that ends within the timeout is not reported (nothing says the agent stayed silent), nor is an
    output the server rejected, nor one for a call whose output the server had already confirmed (a reconnect
    replay re-creating the conversation).

    **Minimal example.**

        C> conversation.item.create function_call_output item_out (call_1)
        S> conversation.item.added  item_out
        ...                                      <- 10 s, no response.create

    **Usual cause.** A tool path that forgets to ask for the reply (it only does so for some tools, or only
    after all of several parallel calls returned and one never did), or a reply request dropped by a race.

    **Fix.** Send `response.create` after the last `function_call_output` of a turn, every time; if the tool
    is meant to be silent, say so in the tool's contract.
    """

    id = "RT125"
    needs = ("timestamps",)
    slug = "no-response-after-tool-output"
    severity = "warning"
    title = "no response was asked for after a tool output"
    fix = "Send response.create after the function_call_output(s) of a turn, every time."

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        #: conn -> outputs sent since the last response asked for on it, by seq (oldest first).
        self.waiting: dict[int, dict[int, Change]] = {}
        #: call_ids whose output the server confirmed: a later create of an output for them is a replay.
        self.answered: set[str] = set()
        #: No connection's oldest waiting output was sent before this (exact after each look at the outputs,
        #: lowered as one becomes the oldest): until a fact comes `reply_timeout` after it, none is overdue and the
        #: outputs are not looked at (a fold of outputs waiting for long would look at them at every fact).
        self.earliest = math.inf
        self.limit = config.reply_timeout

    @on(ChangeSent)
    def sent(self, fact: ChangeSent, state: TraceState) -> list[Finding] | None:
        out = None if fact.rec.t - self.earliest <= self.limit else self._overdue(fact)
        change = fact.change
        call_id = _output_call(change)
        if call_id is not None and call_id not in self.answered:
            outputs = self.waiting.setdefault(change.conn, {})
            if not outputs:
                self._oldest(change)
            outputs[change.seq] = change
        elif change.kind == "response.create":
            self.waiting.pop(change.conn, None)
        return out

    @on(ChangeAnswered)
    def change_answered(self, fact: ChangeAnswered, state: TraceState) -> list[Finding] | None:
        out = None if fact.rec.t - self.earliest <= self.limit else self._overdue(fact)
        change = fact.change
        if (call_id := _output_call(change)) is not None:
            if change.status == "confirmed":
                self.answered.add(call_id)
            outputs = self.waiting.get(change.conn)
            if change.status == "rejected" and outputs:
                oldest = next(iter(outputs))
                outputs.pop(change.seq, None)
                if outputs and oldest == change.seq:
                    self._oldest(next(iter(outputs.values())))
        return out

    @on(ResponseCreated)
    def response_created(self, fact: ResponseCreated, state: TraceState) -> list[Finding] | None:
        out = None if fact.rec.t - self.earliest <= self.limit else self._overdue(fact)
        if fact.response.request is None:
            self.waiting.pop(fact.conn.n, None)
        return out

    @on(ConnClosed)
    def closed(self, fact: ConnClosed, state: TraceState) -> list[Finding] | None:
        out = None if fact.rec.t - self.earliest <= self.limit else self._overdue(fact)
        self.waiting.pop(fact.conn.n, None)
        return out

    @on(ItemAdded, ResponseDone, ServerError, SessionUpdated)
    def clock(
        self, fact: ItemAdded | ResponseDone | ServerError | SessionUpdated, state: TraceState
    ) -> list[Finding] | None:
        """Any other fact only moves the clock."""
        return None if fact.rec.t - self.earliest <= self.limit else self._overdue(fact)

    def _oldest(self, change: Change) -> None:
        """`change` is now the oldest waiting output of its connection."""
        if not change.t >= self.earliest:  # (a time that is not a number lowers it too: every fact looks)
            self.earliest = change.t

    def _overdue(self, fact: Fact) -> list[Finding]:
        """The findings of the connections whose oldest waiting output is overdue at `fact` (each handler calls it
        only when `earliest` says one may be: a call per fact costs what the rest of the handler does)."""
        t, limit = fact.rec.t, self.limit
        out = []
        self.earliest = math.inf
        for n, sent in list(self.waiting.items()):
            if not sent:
                del self.waiting[n]
                continue
            first = next(iter(sent.values()))
            if t - first.t <= limit:
                self._oldest(first)
                continue
            del self.waiting[n]
            outputs = list(sent.values())
            last = outputs[-1]
            labels = ", ".join(f"{c.item_label() or c.summary} (line {c.line})" for c in outputs[:3])
            answered = Witness.answer(last) if last.status == "confirmed" else None
            out.append(
                self.finding(
                    n,
                    f"no response asked for within {ms(limit)} of the tool output at line {first.line}",
                    f"Connection {n} sent {labels} and asked for no response in the {ms(limit)} that followed "
                    f"(line {fact.rec.line} is {ms(t - first.t)} later): the agent went silent after its tool "
                    "answered.",
                    [*(Witness.sent(c) for c in outputs[:3]), answered, Witness.of(fact.rec)],
                    fact.rec.line,
                    items=[c.item_id for c in outputs],
                    call_ids=[c.call_id for c in outputs],
                    event_ids=[c.event_id for c in outputs],
                )
            )
        return out
