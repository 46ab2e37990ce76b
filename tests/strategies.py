"""Hypothesis strategies shared by the core tests: random trace records with colliding ids, and the bounded profile.

Ids come from tiny alphabets so that creates, deletes, acks, errors and responses keep hitting the same items,
calls and responses across connections; some field values are of the wrong JSON type on purpose.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from rtrace.core.catalog import BETA_TO_GA
from rtrace.core.pending import Change
from rtrace.core.trace import Record

#: The suite's bound for property tests: enough examples to find collisions, no per-example deadline.
BOUNDED = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ITEM_IDS = st.sampled_from(["a", "b", "c"])
CALL_IDS = st.sampled_from(["k1", "k2"])
RESP_IDS = st.sampled_from(["r1", "r2"])
EVENT_IDS = st.sampled_from(["e1", "e2", "e3"])
CONNS = st.sampled_from([1, 1, 1, 1, 1, 2, 2, 3])
#: A value of the wrong JSON type (one strategy, so `one_of(x, JUNK)` draws it about half the time at most).
JUNK = st.sampled_from([None, 0, -1, 3, True, "", "zz", [], [None], {}])


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


@st.composite
def wire_item(draw: st.DrawFn, with_id: bool = True) -> dict[str, Any]:
    kind = draw(st.sampled_from(["message", "function_call", "function_call_output", "mcp_call"]))
    item: dict[str, Any] = {"type": kind}
    if with_id or draw(st.booleans()):
        item["id"] = draw(st.one_of(ITEM_IDS, ITEM_IDS, ITEM_IDS, ITEM_IDS, JUNK))
    if kind == "message":
        item["role"] = draw(st.sampled_from(["user", "assistant", "system"]))
        item["content"] = draw(
            st.one_of(st.just([{"type": "input_text", "text": "hi"}]), st.just([]), st.just([{"transcript": "x"}]))
        )
    elif kind in ("function_call", "function_call_output"):
        item["call_id"] = draw(st.one_of(CALL_IDS, CALL_IDS, JUNK))
        if kind == "function_call":
            item["arguments"] = draw(st.sampled_from(["", "{}", '{"x": 1}']))
        else:
            item["output"] = draw(st.sampled_from(["ok", ""]))
    if draw(st.booleans()):
        item["status"] = draw(st.sampled_from(["in_progress", "completed", "incomplete"]))
    return item


def _prev() -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.just("root"), st.just(""), ITEM_IDS, ITEM_IDS, JUNK)


@st.composite
def event(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """(direction, event) with fields drawn to collide."""
    kind = draw(
        st.sampled_from(
            [
                "create",
                "create",
                "delete",
                "truncate",
                "retrieve",
                "response.create",
                "response.cancel",
                "session.update",
                "commit",
                "added",
                "added",
                "done",
                "created",
                "deleted",
                "truncated",
                "retrieved",
                "error",
                "response.created",
                "response.done",
                "output_item.added",
                "output_item.done",
                "args.done",
                "audio.delta",
                "committed",
                "session.created",
                "session.updated",
                "opened",
                "closed",
                "local.conversation",
                "local.generation",
                "quiet",
                "quiet",
                "quiet",
                "unknown",
            ]
        )
    )
    ev: dict[str, Any]
    if kind == "create":
        item = draw(st.one_of(wire_item(with_id=False), wire_item(with_id=False), wire_item(with_id=False), JUNK))
        ev = {"type": "conversation.item.create", "item": item}
        if draw(st.booleans()):
            ev["previous_item_id"] = draw(_prev())
        return "client", _with_event_id(draw, ev)
    if kind in ("delete", "truncate", "retrieve"):
        ev = {"type": f"conversation.item.{kind}", "item_id": draw(st.one_of(ITEM_IDS, JUNK))}
        if kind == "truncate":
            ev["audio_end_ms"] = draw(st.one_of(st.integers(0, 3000), JUNK))
        return "client", _with_event_id(draw, ev)
    if kind == "response.create":
        body: dict[str, Any] = {}
        if draw(st.booleans()):
            body["metadata"] = {"client_event_id": draw(EVENT_IDS)}
        if draw(st.booleans()):
            body["conversation"] = draw(st.sampled_from(["auto", "none"]))
        return "client", _with_event_id(
            draw, {"type": "response.create", "response": draw(st.one_of(st.just(body), JUNK))}
        )
    if kind in ("response.cancel", "session.update", "commit"):
        name = {"commit": "input_audio_buffer.commit"}.get(kind, kind)
        return "client", _with_event_id(draw, {"type": name})
    if kind in ("added", "done", "created"):
        name = {"added": "conversation.item.added", "done": "conversation.item.done"}.get(
            kind, "conversation.item.created"
        )
        item = draw(st.one_of(wire_item(), wire_item(), wire_item(), wire_item(), JUNK))
        ev = {"type": name, "previous_item_id": draw(_prev()), "item": item}
        return "server", ev
    if kind in ("deleted", "truncated"):
        ev = {"type": f"conversation.item.{kind}", "item_id": draw(st.one_of(ITEM_IDS, JUNK))}
        if kind == "truncated":
            ev["audio_end_ms"] = draw(st.one_of(st.integers(0, 3000), JUNK))
        return "server", ev
    if kind == "retrieved":
        return "server", {"type": "conversation.item.retrieved", "item": draw(st.one_of(wire_item(), JUNK))}
    if kind == "error":
        quoted = draw(st.one_of(ITEM_IDS, CALL_IDS, st.just("zz")))
        err: Any = {
            "type": "invalid_request_error",
            "code": draw(st.sampled_from(["invalid_tool_call_id", "item_delete_invalid_item_id", None])),
            "message": draw(st.sampled_from([f"Item '{quoted}' not found", "no quote", ""])),
            "event_id": draw(st.one_of(EVENT_IDS, st.none())),
        }
        return "server", {"type": "error", "error": draw(st.one_of(st.just(err), JUNK))}
    if kind in ("response.created", "response.done"):
        resp: dict[str, Any] = {"id": draw(st.one_of(RESP_IDS, RESP_IDS, JUNK))}
        if draw(st.booleans()):
            resp["conversation_id"] = draw(st.sampled_from([None, "conv_1"]))
        if draw(st.booleans()):
            resp["metadata"] = draw(st.one_of(st.fixed_dictionaries({"client_event_id": EVENT_IDS}), JUNK))
        if kind == "response.done":
            resp["status"] = draw(st.one_of(st.sampled_from(["completed", "cancelled", "failed", "incomplete"]), JUNK))
            resp["output"] = draw(st.one_of(st.lists(st.fixed_dictionaries({"id": ITEM_IDS}), max_size=2), JUNK))
            resp["status_details"] = draw(st.one_of(st.just({"error": {"code": "x"}}), JUNK))
        return "server", {"type": kind, "response": draw(st.one_of(st.just(resp), JUNK))}
    if kind in ("output_item.added", "output_item.done"):
        ev = {
            "type": f"response.{kind}",
            "response_id": draw(st.one_of(RESP_IDS, JUNK)),
            "item": draw(st.one_of(wire_item(), JUNK)),
        }
        return "server", ev
    if kind == "args.done":
        ev = {
            "type": "response.function_call_arguments.done",
            "item_id": draw(ITEM_IDS),
            "arguments": draw(st.one_of(st.just('{"y": 2}'), JUNK)),
        }
        return "server", ev
    if kind == "audio.delta":
        ev = {"type": draw(st.sampled_from(["response.output_audio.delta", "response.audio.delta"]))}
        ev["item_id"] = draw(st.one_of(ITEM_IDS, JUNK))
        if draw(st.booleans()):
            ev["delta"] = draw(st.sampled_from(["AAAA", "AA==", "", "A"]))
        if draw(st.booleans()):
            ev["rtrace_audio_bytes"] = draw(st.one_of(st.integers(0, 9600), JUNK))
        return "server", ev
    if kind == "quiet":  # no transition: the bulk of real traces, on the fast path of an analysis
        return draw(
            st.sampled_from(
                [
                    ("client", {"type": "input_audio_buffer.append", "audio": "AAAA"}),
                    ("server", {"type": "response.output_text.delta", "item_id": "a", "delta": "hi"}),
                    ("server", {"type": "response.output_audio_transcript.delta", "item_id": "a", "delta": "hi"}),
                    ("server", {"type": "rate_limits.updated", "rate_limits": []}),
                ]
            )
        )
    if kind == "committed":
        return "server", {"type": "input_audio_buffer.committed", "item_id": draw(st.one_of(ITEM_IDS, JUNK))}
    if kind in ("session.created", "session.updated"):
        session = draw(
            st.one_of(
                st.just({"audio": {"output": {"format": {"type": "audio/pcmu"}}}}),
                st.just({"output_audio_format": "g711_ulaw"}),
                st.just({"audio": {"output": {"format": {"rate": 16000}}}}),
                JUNK,
            )
        )
        return "server", {"type": kind, "session": session}
    if kind == "opened":
        return "meta", {"type": "connection.opened", "path": draw(st.one_of(st.just("/v1/realtime"), JUNK))}
    if kind == "closed":
        return "meta", {"type": "connection.closed", "code": draw(st.one_of(st.just(1000), JUNK))}
    if kind == "local.conversation":
        items = draw(st.one_of(st.lists(wire_item(), max_size=4), JUNK))
        return "local", {"type": "local.conversation", "items": items}
    if kind == "local.generation":
        name = draw(st.sampled_from(["local.generation.opened", "local.generation.closed"]))
        return "local", {"type": name, "response_id": draw(st.one_of(RESP_IDS, JUNK))}
    return draw(st.sampled_from(["client", "server", "meta", "local"])), {"type": "x.unknown", "item_id": "a"}


def _with_event_id(draw: st.DrawFn, ev: dict[str, Any]) -> dict[str, Any]:
    if draw(st.booleans()):
        ev["event_id"] = draw(EVENT_IDS)
    return ev


@st.composite
def envelopes(draw: st.DrawFn, max_size: int = 40) -> list[dict[str, Any]]:
    """Native trace lines `{"t", "dir", "conn", "event"}` with monotonic times.

    Connections mostly follow each other (1, then 2, then 3) as a client's sockets do, with a few strays to
    another ordinal (a late event on a connection that ended, a recorder that interleaves).
    """
    moves = st.sampled_from(["stay"] * 12 + ["next", "stray"])
    steps = draw(
        st.lists(st.tuples(event(), moves, CONNS, st.floats(0, 0.5)), min_size=min(8, max_size), max_size=max_size)
    )
    out = []
    t = 0.0
    current = 1
    for (direction, ev), move, stray, dt in steps:
        t = round(t + dt, 6)
        if move == "next":
            current = min(current + 1, 3)
        conn = stray if move == "stray" else current
        out.append({"t": t, "dir": direction, "conn": conn, "event": ev})
        if ev["type"] == "connection.closed" and conn == current:
            current = min(current + 1, 3)
    return out


def to_records(lines: list[dict[str, Any]]) -> list[Record]:
    """Records as the loader would make them from native lines (beta names normalised)."""
    out = []
    for k, obj in enumerate(lines):
        ev = obj["event"]
        raw = ev["type"]
        out.append(Record(k, k + 1, obj["t"], obj["dir"], obj["conn"], ev, BETA_TO_GA.get(raw, raw), raw))
    return out


def check_invariants(state: Any) -> None:
    """The state invariants that must hold after every step (see `rtrace.core.state`)."""
    for n, conn in state.conns.items():
        assert conn.n == n
        conv = conn.conv
        ids = conv.ids()
        assert len(ids) == len(set(ids)), f"conn {n}: duplicate ids {ids}"
        assert set(ids) == set(conv.items), f"conn {n}: linked list {ids} vs items {sorted(conv.items)}"
        assert [item.id for item in conv] == ids
        assert conv.head == (ids[0] if ids else None)
        assert conv.tail == (ids[-1] if ids else None)
        for k, item_id in enumerate(ids):
            assert conv.items[item_id].id == item_id
            assert conv.previous_of(item_id) == (ids[k - 1] if k else None)
            assert conv.items[item_id].next_id == (ids[k + 1] if k + 1 < len(ids) else None)
        for call_id, item_id in conv.by_call.items():
            item = conv.items.get(item_id)
            assert item is not None and item.type == "function_call" and item.call_id == call_id, (call_id, item_id)
        for call_id, out_ids in conv.outputs_by_call.items():
            assert out_ids, f"empty output set kept for {call_id}"
            for item_id in out_ids:
                item = conv.items.get(item_id)
                assert item is not None and item.type == "function_call_output" and item.call_id == call_id
        for item in conv:
            if item.call_id is None:
                continue
            if item.type == "function_call":
                assert item.call_id in conv.by_call, f"function_call {item.id} ({item.call_id}) not indexed"
            elif item.type == "function_call_output":
                assert item.id in conv.outputs_by_call.get(item.call_id, ()), f"output {item.id} not indexed"
        for seq, change in conn.pending.items():
            assert change.seq == seq and change.status == "pending" and change.conn == n
        assert list(conn.pending) == sorted(conn.pending), "pending not oldest first"
        if not conn.open:
            assert not conn.pending, f"closed conn {n} has pending changes"
            assert not any(r.open for r in conn.responses.values()), f"closed conn {n} has an open response"
            assert conn.active is None
        if conn.active is not None:
            assert conn.active.open and conn.active.in_conversation
        open_in_conv = [r for r in conn.responses.values() if r.open and r.in_conversation]
        assert len(open_in_conv) <= 1, f"conn {n}: several open in-conversation responses"


# -- pending changes (`core.pending`) --------------------------------------------------------------------------

#: The kinds of the pending changes `pending_ops` draws.
PENDING_KINDS = ["conversation.item.create", "conversation.item.delete", "response.create", "session.update"]


@st.composite
def pending_change(draw: st.DrawFn, seq: int) -> Change:
    kind = draw(st.sampled_from(PENDING_KINDS))
    item_type = call_id = None
    item_id = draw(st.sampled_from([None, "", "a", "b"]))
    if kind == "conversation.item.create" and draw(st.booleans()):
        item_type = draw(st.sampled_from(["message", "function_call", "function_call_output"]))
        call_id = draw(st.sampled_from([None, "k1", "k2"]))
    return Change(
        kind, 1, seq, seq + 1, float(seq), event_id=draw(st.sampled_from([None, "e1", "e2"])), item_id=item_id,
        item_type=item_type, call_id=call_id,
        previous_item_id=draw(st.sampled_from([None, "a", "root"])) if kind == "conversation.item.create" else None,
        conversation=draw(st.sampled_from(["auto", "none"])),
    )  # fmt: skip


@st.composite
def pending_ops(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Adds (seq increasing) and removals of pending changes, in any order."""
    ops: list[tuple[str, Any]] = []
    live: list[int] = []
    for seq in range(draw(st.integers(0, 40))):
        if live and draw(st.integers(0, 2)) == 0:
            ops.append(("remove", live.pop(draw(st.integers(0, len(live) - 1)))))
        ops.append(("add", draw(pending_change(seq))))
        live.append(seq)
    return ops
