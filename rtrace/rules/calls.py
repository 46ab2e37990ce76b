"""Rules about a call's identity across pushes and reconnects: an output needs the call it answers in the session
that receives it, and a call created again keeps its arguments."""

from __future__ import annotations

from typing import Final

from ..core.facts import (
    ChangeAnswered,
    ChangeSent,
    ConnClosed,
    ItemAdded,
    ItemDeleted,
    ItemDone,
    ItemUpdated,
    ServerError,
)
from ..core.state import Change, TraceState
from .base import Config, Finding, Rule, Witness, on
from .base import injected as _injected


class OutputForUnknownCall(Rule[Config]):
    """A `function_call_output` was sent for a `call_id` with no `function_call` in that connection's conversation.

    **What it means.** The server rejects the output with `invalid_tool_call_id` ("Tool call ID '…' not found in
    conversation."), often with `error.event_id` null, and the tool's result is lost.

    **Why it matters.** The model never sees the result; a client that ignores the error keeps waiting, or
    retries forever.

    **Minimal example.**

        [conn 2] C> conversation.item.create function_call_output (call_1)   <- call_1 lived on conn 1
        [conn 2] S> error invalid_tool_call_id

    The conversation judged is the confirmed one plus every earlier pending change (a call and its output may be
    pipelined back to back); when the server's answer is in the trace, the answer decides. The finding names the
    cause when the trace shows it: a reconnect that dropped the call, or a delete of the call.

    **Usual cause.** A reconnect replay that leaves out function calls (livekit/agents `exclude_function_call`),
    a racing push that deleted the call, or a tool result that outlived its session.

    **Fix.** Replay `function_call` items on reconnect before their outputs, or drop outputs whose call is gone.
    """

    id = "RT104"
    slug = "output-for-unknown-call"
    severity = "error"
    title = "a function_call_output names a call_id the conversation does not hold"
    fix = (
        "Re-create the function_call (with its call_id) before its output after a reconnect, or drop "
        "outputs whose call is no longer in the conversation."
    )

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.suspect: dict[int, Change] = {}
        #: conn -> call_id -> where the function_call was deleted; a connection's entries go when it closes.
        self.deleted_call: dict[int, dict[str, Witness]] = {}
        #: Seqs of the `error` records already reported through the change they answer.
        self.joined: set[int] = set()
        #: call_id -> ordinals of the connections whose conversation held a `function_call` carrying it (at some
        #: point; the finding checks the conversation as it is): where to look for the call's home.
        self.homes: dict[str, list[int]] = {}

    @on(ItemAdded, ItemDone, ItemUpdated, items=["function_call"])
    def call_seen(self, fact: ItemAdded | ItemDone | ItemUpdated, state: TraceState) -> None:
        item = fact.item
        if item.type == "function_call" and item.call_id:
            homes = self.homes.setdefault(item.call_id, [])
            if not homes or homes[-1] != fact.conn.n:
                homes.append(fact.conn.n)

    @on(ChangeSent, kinds=["conversation.item.create"], items=["function_call_output"])
    def sent(self, fact: ChangeSent, state: TraceState) -> None:
        change = fact.change
        call_id = change.call_id
        if change.kind == "conversation.item.create" and change.item_type == "function_call_output":
            if call_id and state.conns[change.conn].expected_call(call_id) is None:
                self.suspect[change.seq] = change

    @on(ItemDeleted, items=["function_call"])
    def deleted(self, fact: ItemDeleted, state: TraceState) -> None:
        if fact.item is not None and fact.item.type == "function_call" and fact.item.call_id:
            self.deleted_call.setdefault(fact.conn.n, {})[fact.item.call_id] = Witness.of(fact.rec)

    @on(ChangeAnswered, kinds=["conversation.item.create"], items=["function_call_output"])
    def answered(self, fact: ChangeAnswered, state: TraceState) -> list[Finding] | None:
        change = fact.change
        suspect = self.suspect.pop(change.seq, None)
        if change.status != "rejected":
            return None
        code = (change.error or {}).get("code")
        # an injected answer (a fault's note before it) is no verdict: only what the trace shows of the client is
        if suspect is None and (code != "invalid_tool_call_id" or _injected(fact.rec, change, state)):
            return None
        if change.item_type != "function_call_output" or change.call_id is None:
            return None
        self.joined.add(fact.rec.seq)
        return [self._finding(state, change, Witness.of(fact.rec), fact.rec.line)]

    @on(ConnClosed)
    def closed(self, fact: ConnClosed, state: TraceState) -> list[Finding]:
        out = []
        for change in fact.indeterminate:
            if self.suspect.pop(change.seq, None) is not None:
                out.append(self._finding(state, change, Witness.answer(change), fact.rec.line))
        # Nothing sent on this connection can be judged after this, and a connection opened again under the
        # same ordinal starts a new conversation: its deleted calls are forgotten (memory stays flat).
        self.deleted_call.pop(fact.conn.n, None)
        return out

    @on(ServerError)
    def error(self, fact: ServerError, state: TraceState) -> list[Finding] | None:
        joined = fact.rec.seq in self.joined
        self.joined.discard(fact.rec.seq)  # the error's own record: no later fact names it
        injected = fact.conn.injected_line == fact.rec.line
        if fact.cause is None and fact.error.get("code") == "invalid_tool_call_id" and not joined and not injected:
            msg = fact.error.get("message")
            return [
                self.finding(
                    fact.conn.n,
                    f"server rejected a function_call_output at line {fact.rec.line} (invalid_tool_call_id)",
                    f"Line {fact.rec.line}: the server says {msg!r}; the output it rejects was not in the trace.",
                    [Witness.of(fact.rec)],
                    fact.rec.line,
                )
            ]
        return None

    def _finding(self, state: TraceState, change: Change, answer: Witness | None, at: int) -> Finding:
        call_id = change.call_id
        assert call_id is not None
        witness: list[Witness | None] = [Witness.sent(change), answer]
        cause = ""
        deleted = self.deleted_call.get(change.conn, {}).get(call_id)
        if deleted is not None:
            cause = f" The function_call for {call_id} was deleted at line {deleted.line}."
            witness.insert(0, deleted)
        else:
            for n in sorted(set(self.homes.get(call_id, ())), reverse=True):
                if n >= change.conn or n not in state.conns:
                    continue
                old = state.conns[n]
                item_id = old.conv.by_call.get(call_id)
                if item_id is not None:
                    call = old.conv.items[item_id]
                    end = old.closed_line
                    cause = (
                        f" The call lived on connection {n} ({call.label()}, line {call.added_line}); connection {n} "
                        f"ended at line {end} and connection {change.conn} never re-created it."
                    )
                    witness[:0] = [Witness.added(call, old), Witness.closed(old)]
                    break
        if answer is not None and answer.type == "error":
            outcome = f"the server rejected it at line {answer.line}"
        elif answer is not None:
            outcome = f"the connection ended at line {answer.line} before any answer"
        else:
            outcome = "no answer is in the trace"
        return self.finding(
            change.conn,
            f"function_call_output for unknown call {call_id} at line {change.line}",
            f"Line {change.line} sends {change.item_label()} but connection {change.conn} holds no function_call with "
            f"call_id {call_id}; {outcome}.{cause}",
            witness,
            at,
            items=[change.item_id],
            call_ids=[call_id],
            event_ids=[change.event_id],
        )


#: How much of a call's arguments RT113 quotes (and keeps).
ARGUMENTS_QUOTED: Final = 80


class ArgumentsLostInReplay(Rule[Config]):
    """A `function_call` was created again with empty `arguments`, while the original had arguments.

    **What it means.** After a reconnect (or a re-push) the model sees a call with no arguments: it cannot tell
    what was asked, and may call the tool again or misread the result.

    **Minimal example.**

        [conn 1] S> conversation.item.done function_call item_fc (call_1) arguments='{"city":"Paris"}'
        [conn 2] C> conversation.item.create function_call item_fc (call_1) arguments=''

    **Usual cause.** The client's local copy of the call was taken from `response.output_item.added` (arguments
    still empty) and never updated from `.done` (agents-js port of livekit/agents #7576).

    **Fix.** Update the local function_call from `response.function_call_arguments.done` /
    `response.output_item.done` before it is replayed.
    """

    id = "RT113"
    slug = "arguments-lost-in-replay"
    severity = "warning"
    title = "a function_call was re-created without its arguments"
    fix = "Keep the function_call's final arguments (from .done events) in the copy that is replayed."

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        #: call_id -> the start of its arguments (as quoted in a finding) and where they were done.
        self.args: dict[str, tuple[str, Witness]] = {}

    @on(ItemDone, items=["function_call"])
    def done(self, fact: ItemDone, state: TraceState) -> None:
        item = fact.item
        if item.type == "function_call" and item.call_id and item.arguments.strip():
            self.args[item.call_id] = (item.arguments[:ARGUMENTS_QUOTED], Witness.of(fact.rec))

    @on(ChangeSent, kinds=["conversation.item.create"], items=["function_call"])
    def sent(self, fact: ChangeSent, state: TraceState) -> list[Finding] | None:
        change = fact.change
        call_id = change.call_id
        if change.kind != "conversation.item.create" or change.item_type != "function_call":
            return None
        if not call_id or call_id not in self.args:
            return None
        sent = change.sent_item()  # (its arguments: the event as sent is kept while the change waits)
        if sent is None or sent.arguments.strip():
            return None
        arguments, done = self.args[call_id]
        return [
            self.finding(
                change.conn,
                f"function_call {sent.call_id} re-created at line {change.line} with empty arguments",
                f"Line {change.line} creates {sent.label()} with empty arguments; the call had arguments "
                f"{arguments!r} (line {done.line}).",
                [done, Witness.sent(change)],
                change.line,
                items=[sent.id],
                call_ids=[sent.call_id],
            )
        ]
