"""Rules about client pushes (creates, deletes, truncates): stale snapshots, missing acks, bad truncates,
and a client whose own conversation drifts from the server's."""

from __future__ import annotations

from bisect import bisect_left, insort

from ..core.conversation import Item
from ..core.facts import ChangeAnswered, ChangeSent, ConnClosed, Fact, ItemAdded, ItemDeleted, LocalSnapshot
from ..core.state import Change, Connection, Divergence, TraceState, divergence
from .base import ITEM_CHANGES, Burst, Bursts, Config, Finding, Rule, Witness, ms, on


class StaleSnapshotDelete(Rule[Config]):
    """The client deleted an item right after its create was confirmed, in a burst that creates other items.

    **What it means.** The push that contains the delete was computed from a snapshot of the conversation taken
    while the item's create was still in flight: the snapshot did not hold the item, the diff saw an "extra"
    item on the server, and deleted it. This is the race behind `deleted-function-call-output`.

    **How it is judged.** The delete comes less than the create's own round-trip after the confirmation (the
    confirmation arrived too recently for a decision that knew about it), and its burst (changes sent within
    `--burst-window` of each other) also creates other items. For items the server added by itself (an in-flight
    `function_call` of a response) the round-trip is the median ack delay measured on that connection. A delete
    followed by a create of the same id (an update in place) is not reported.

    **Minimal example.**

        t=0.720 C> create function_call_output item_out       (in flight ...)
        t=0.770 S> added item_out                             (round-trip 50 ms)
        t=0.772 C> delete item_out                            (1.7 ms later, < 50 ms)
        t=0.772 C> create user message item_msg               (same burst)

    **Usual cause.** Two writers of the conversation: a tool-result push and a turn push, each diffing its own
    copy (livekit/agents #4960, #5021; fixed by placeholders in #5114 and by serializing pushes).

    **Fix.** Serialize pushes behind one lock and diff against the confirmed conversation plus in-flight
    creates; or take the snapshot after the previous push is acknowledged.
    """

    id = "RT102"
    needs = ("timestamps",)
    slug = "stale-snapshot-delete"
    severity = "error"
    title = "a push deleted an item it had just created, computed from a stale snapshot"
    fix = (
        "Serialize conversation pushes and compute each diff from the confirmed conversation plus in-flight "
        "creates, never from a copy taken before the previous push was acknowledged."
    )

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.bursts = Bursts(self.config.burst_window, ids=True)
        #: conn -> the latest ack delays of its creates. A connection's state goes when it ends: a change sent on
        #: a connection that ended is no push the server applies (it is indeterminate at once), and is not judged.
        self.rtts: dict[int, list[float]] = {}
        #: conn -> the current burst and its deletes waiting for a create: (delete, item, create, reference rtt).
        self.waiting: dict[int, tuple[Burst, list[tuple[Change, Item, Witness | None, float]]]] = {}
        #: conn -> its `rtts` in ascending order (None once one is NaN, which has no place in an order): their
        #: median is read at each delete of a response's item, which is no sort of up to 64 delays then.
        self.ranked: dict[int, list[float] | None] = {}

    @on(ChangeAnswered, kinds=["conversation.item.create"])
    def answered(self, fact: ChangeAnswered, state: TraceState) -> None:
        change = fact.change
        conn = state.conns.get(change.conn)
        if conn is not None:
            self.bursts.answered(change, conn)
        if change.kind == "conversation.item.create" and change.status == "confirmed":
            latency = change.latency()
            if latency is not None:
                samples = self.rtts.setdefault(change.conn, [])
                ranked = self.ranked.setdefault(change.conn, [])
                samples.append(latency)
                if ranked is not None:
                    if latency == latency:
                        insort(ranked, latency)  # after its equals: `ranked` is the stable sort of `samples`
                    else:
                        self.ranked[change.conn] = ranked = None
                if len(samples) > 64:
                    oldest = samples.pop(0)
                    if ranked is not None:
                        del ranked[bisect_left(ranked, oldest)]  # the first of its equals: the oldest of them

    @on(ChangeSent, kinds=ITEM_CHANGES)
    def sent(self, fact: ChangeSent, state: TraceState) -> list[Finding] | None:
        change = fact.change
        if change.kind not in ITEM_CHANGES:
            return None
        conn = state.conns[change.conn]
        if not conn.open:
            return None
        burst = self.bursts.add(change)
        held = self.waiting.get(conn.n)
        if held is not None and held[0] is not burst:
            del self.waiting[conn.n]  # that burst ended without a create: a deliberate delete
        if change.kind == "conversation.item.create":
            return self._judge_waiting(conn, burst)
        if change.kind != "conversation.item.delete" or not change.item_id:
            return None
        item = conn.conv.get(change.item_id)
        if item is None or not item.added_line:
            return None
        gap = change.t - item.added_t
        if not 0 <= gap:  # (first: the reference below is the costly part, and a delete per item is common)
            return None
        # The reference: the item's own create's ack delay (when the client created it: `Witness.created` is
        # that create), else the connection's median.
        created = item.source == "client" and item.created_line is not None and item.created_t is not None
        if created:
            rtt = item.added_t - item.created_t  # type: ignore[operator]
        elif item.source == "response" and self.rtts.get(conn.n):
            rtt = self._median_rtt(conn.n)
        else:
            return None
        if not gap < rtt:
            return None
        create = Witness.created(item, conn) if created else None
        self.waiting.setdefault(conn.n, (burst, []))[1].append((change, item, create, rtt))
        return self._judge_waiting(conn, burst)

    @on(ConnClosed)
    def closed(self, fact: ConnClosed, state: TraceState) -> None:
        n = fact.conn.n
        self.bursts.forget(n)
        self.rtts.pop(n, None)
        self.ranked.pop(n, None)
        self.waiting.pop(n, None)

    def _median_rtt(self, n: int) -> float:
        """The median of connection `n`'s latest create ack delays (it has some), as `statistics.median` gives it."""
        ranked = self.ranked.get(n)
        if ranked is None:
            from statistics import median  # here: the module costs start-up time to every command

            return median(self.rtts[n])
        half = len(ranked) // 2
        return ranked[half] if len(ranked) % 2 else (ranked[half - 1] + ranked[half]) / 2

    def _judge_waiting(self, conn: Connection, burst: Burst) -> list[Finding] | None:
        held = self.waiting.get(conn.n)
        if held is None or held[0] is not burst:
            return None
        waiting = held[1]
        out = []
        for entry in list(waiting):
            delete, item, create, rtt = entry
            others = burst.creates_besides(item.id)
            if burst.creates_id(item.id, conn):
                waiting.remove(entry)  # delete + create of the same id: an update in place
                continue
            if not others:
                continue
            waiting.remove(entry)
            out.append(self._finding(conn, delete, item, create, rtt, others))
        if not waiting:
            del self.waiting[conn.n]
        return out

    def _finding(
        self, conn: Connection, delete: Change, item: Item, create: Witness | None, rtt: float, others: list[Change]
    ) -> Finding:
        gap = delete.t - item.added_t
        first = others[0]
        if create is not None:
            flight = (
                f"while its create (line {create.line}) was in flight, "
                f"between t={create.t:.6f} s and t={item.added_t:.6f} s"
            )
            basis = f"that create's own round-trip ({ms(rtt)}, line {create.line} to line {item.added_line})"
        else:
            flight = f"before the server's item arrived at line {item.added_line}"
            basis = f"the connection's median ack delay ({ms(rtt)})"
        return self.finding(
            conn.n,
            f"delete of {item.label()} at line {delete.line} comes {ms(gap)} after its confirmation: stale snapshot",
            f"Line {delete.line} deletes {item.label()} {ms(gap)} after the server "
            f"{'confirmed' if create is not None else 'added'} it at line "
            f"{item.added_line}, less than {basis}. The delete is in the same burst as the create of "
            f"{first.item_label() or first.summary} at line {first.line}: "
            f"the push was computed from a snapshot taken {flight}.",
            [
                create,
                Witness.added(item, conn),
                Witness.sent(delete),
                *(Witness.sent(c) for c in others[:3]),
            ],
            max(delete.line, first.line),
            items=[item.id, *(c.item_id for c in others[:3])],
            call_ids=[item.call_id],
            event_ids=[delete.event_id],
        )


class AckTimeout(Rule[Config]):
    """A client create, delete or truncate got no answer within `--ack-timeout` (default 5 s) while its
    connection stayed open.

    **What it means.** The client cannot know whether the change happened. LiveKit's `update_chat_ctx` raises
    "update_chat_ctx timed out." after 5 s and carries on with a conversation it can no longer trust.

    **Minimal example.**

        t=1.0 C> conversation.item.create item_x
        ...   (no conversation.item.added for item_x, no error, connection open)
        t=6.2 S> conversation.item.added item_x          <- 5.2 s: too late

    A late answer is reported at the answer; a change never answered is reported when its connection ends, if
    the connection lived longer than the timeout after it.

    **Usual cause.** A server that dropped the event, an ack joined to the wrong event (an `error` with a null
    `event_id`), a connection that stalled, or a client that sent to a socket that was already closing.

    **Fix.** Correlate acks by item id and `error.event_id`, treat a missing ack as "state unknown" and resync
    (retrieve or re-push) rather than assuming success.
    """

    id = "RT110"
    needs = ("timestamps",)
    slug = "ack-timeout"
    severity = "warning"
    title = "a create/delete/truncate got no answer within the ack timeout"
    fix = (
        "Correlate answers by item id and error.event_id; on a timeout, resync the conversation instead of assuming it."
    )

    @on(ChangeAnswered, kinds=ITEM_CHANGES)
    def answered(self, fact: ChangeAnswered, state: TraceState) -> list[Finding] | None:
        change = fact.change
        latency = change.latency()
        if change.kind in ITEM_CHANGES and latency is not None and latency > self.config.ack_timeout:
            return [self._finding(change, f"answered only after {ms(latency)}", Witness.of(fact.rec), fact.rec.line)]
        return None

    @on(ConnClosed)
    def conn_closed(self, fact: ConnClosed, state: TraceState) -> list[Finding]:
        limit = self.config.ack_timeout
        out = []
        for change in fact.indeterminate:
            if change.kind in ITEM_CHANGES and change.answer_t is not None and change.answer_t - change.t > limit:
                out.append(
                    self._finding(
                        change,
                        f"never answered; the connection stayed open {ms(change.answer_t - change.t)} after it",
                        Witness.answer(change),
                        fact.rec.line,
                    )
                )
        return out

    def _finding(self, change: Change, what: str, answer: Witness | None, at: int) -> Finding:
        return self.finding(
            change.conn,
            f"{change.short} at line {change.line} {what.split(';')[0]}",
            f"Line {change.line} ({change.summary}) was {what} (timeout {ms(self.config.ack_timeout)}).",
            [Witness.sent(change), answer],
            at,
            items=[change.item_id],
            event_ids=[change.event_id],
        )


class TruncateBeyondAudio(Rule[Config]):
    """`conversation.item.truncate` with `audio_end_ms` of 0, past the audio the item received, or on an item
    that has no audio.

    **What it means.** The server answers with an error (`Audio content of Xms is already shorter than Yms`,
    `Only model output audio messages can be truncated`) and the transcript the user did not hear stays in the
    conversation; a truncate at 0 ms should have been a delete.

    **How it is judged.** The item's audio length comes from the `response.output_audio.delta` payloads (or the
    byte counts a recorder keeps when it drops audio) at the session's output format.

    **Usual cause.** Playback position measured on a different clock than the audio sent, an interruption
    before any audio played, or a replayed text-only assistant message after a reconnect (livekit/agents
    #6157, #6158; agents-js #977).

    **Fix.** Clamp `audio_end_ms` to the audio received, delete instead of truncating at 0, and never truncate
    items re-created by a replay.
    """

    id = "RT114"
    slug = "truncate-beyond-audio"
    severity = "warning"
    title = "a truncate at 0 ms, past the item's audio, or on an item without audio"
    fix = "Clamp audio_end_ms to the audio actually received; delete instead of truncating at 0; skip replayed items."
    needs = ("output-audio-bytes",)

    @on(ChangeSent, kinds=["conversation.item.truncate"])
    def sent(self, fact: ChangeSent, state: TraceState) -> list[Finding] | None:
        change = fact.change
        if change.kind != "conversation.item.truncate" or not change.item_id or change.audio_end_ms is None:
            return None
        conn = state.conns[change.conn]
        item = conn.conv.get(change.item_id)
        end = change.audio_end_ms
        if end == 0:
            why = "audio_end_ms is 0: nothing was heard, the item should be deleted instead"
        elif item is None:
            return None
        elif item.audio_bytes > 0 and end > conn.audio_ms(item) + 1:
            why = f"audio_end_ms {end} is past the {conn.audio_ms(item):.0f} ms of audio the item received"
        elif item.audio_bytes == 0 and item.source == "client":
            why = "the item was created by the client (a text copy, e.g. replayed after a reconnect) and has no audio"
        else:
            return None
        witness = [Witness.added(item, conn) if item is not None and item.added_line else None, Witness.sent(change)]
        return [
            self.finding(
                conn.n,
                f"truncate of {change.item_id} at {end} ms (line {change.line}): {why.split(':')[0]}",
                f"Line {change.line} truncates {item.label() if item else change.item_id}: {why}.",
                witness,
                change.line,
                items=[change.item_id],
                event_ids=[change.event_id],
            )
        ]


class LocalServerDivergence(Rule[Config]):
    """The client's own conversation (from `local.conversation` annotations) and the server's differ, and the
    difference outlives the pending window.

    **What it means.** The symptom behind every other rule: the agent believes in a conversation the model does
    not see (a tool output it thinks was sent, a message the server never got, an item the server still has).

    **How it is judged.** At each local snapshot the client's items are compared with the server conversation
    plus pending changes. A difference is reported when it still holds once nothing is pending on the
    connection and `--ack-timeout` has passed since the snapshot, or when the connection ends. Needs a trace
    with `local` annotations (`rtrace.integrations.livekit.record_session` writes them).

    **Fix.** Resync from the server's conversation after errors and reconnects; treat unacknowledged changes as
    unknown; see the other findings of the same trace for the cause.
    """

    id = "RT115"
    needs = ("timestamps",)
    slug = "local-server-divergence"
    severity = "error"
    title = "the client's conversation and the server's differ beyond the pending window"
    fix = (
        "Resync the local conversation from server events after errors and reconnects; "
        "never assume an unacknowledged change."
    )

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        #: conn -> (snapshot witness, snapshot time) of a divergence not yet resolved.
        self.open: dict[int, tuple[Witness, float]] = {}
        self.reported: set[tuple[int, tuple[str, ...], tuple[str, ...]]] = set()
        #: conn -> how its open divergence's snapshot differs from its server conversation, while neither changed
        #: (a divergence open for seconds is judged at every change: the conversation is walked once, not each time).
        self.diffs: dict[int, Divergence] = {}

    @on(LocalSnapshot)
    def snapshot(self, fact: LocalSnapshot, state: TraceState) -> None:
        conn = fact.conn
        self.diffs.pop(conn.n, None)
        local_ids = [i.id for i in fact.items]
        if divergence(local_ids, conn.expected_ids()):
            self.open.setdefault(conn.n, (Witness.of(fact.rec), fact.rec.t))
        else:
            self.open.pop(conn.n, None)

    @on(ChangeSent, ChangeAnswered, after=[LocalSnapshot])
    def change(self, fact: ChangeSent | ChangeAnswered, state: TraceState) -> list[Finding] | None:
        conn = state.conns.get(fact.change.conn)
        return self._judge(fact, conn) if conn is not None else None

    @on(ItemAdded, ItemDeleted, ConnClosed, after=[LocalSnapshot])
    def server(self, fact: ItemAdded | ItemDeleted | ConnClosed, state: TraceState) -> list[Finding] | None:
        if not isinstance(fact, ConnClosed):
            self.diffs.pop(fact.conn.n, None)  # the conversation changed
        return self._judge(fact, fact.conn)

    def _judge(self, fact: Fact, conn: Connection) -> list[Finding] | None:
        """Whether the divergence open on `conn` outlived the pending window at `fact`."""
        if conn.local is None or conn.n not in self.open:
            return None
        snap, t0 = self.open[conn.n]
        closing = isinstance(fact, ConnClosed)
        if not closing and any(conn.pending.count(kind) for kind in ITEM_CHANGES):
            return None
        diff = self.diffs.get(conn.n)
        if diff is None:
            diff = self.diffs[conn.n] = divergence([i.id for i in conn.local], conn.conv.ids())
        if not closing and diff and fact.rec.t - t0 <= self.config.ack_timeout:
            return None
        del self.open[conn.n]
        del self.diffs[conn.n]
        if not diff:
            return None
        key = (conn.n, diff.only_client, diff.only_server)
        if key in self.reported:
            return None
        self.reported.add(key)
        parts = []
        if diff.only_client:
            parts.append(f"only the client has {', '.join(diff.only_client[:5])}")
        if diff.only_server:
            parts.append(f"only the server has {', '.join(diff.only_server[:5])}")
        if diff.reordered:
            parts.append(f"in a different order: {', '.join(diff.reordered[:5])}")
        return [
            self.finding(
                conn.n,
                f"client and server conversations differ since line {snap.line}: {parts[0]}",
                f"The client's conversation at line {snap.line} differs from the server's, and still does at line "
                f"{fact.rec.line} with nothing pending: {'; '.join(parts)}.",
                [snap, Witness.of(fact.rec) if not closing else Witness.closed(conn)],
                fact.rec.line,
                items=[*diff.only_client, *diff.only_server, *diff.reordered],
            )
        ]


__all__ = ["AckTimeout", "LocalServerDivergence", "StaleSnapshotDelete", "TruncateBeyondAudio"]
