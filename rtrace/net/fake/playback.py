"""Recorded responses (`rtrace serve --from`): a trace's server responses cut out in order with their pacing
(`recorded_responses`), handed out one per `response.create` across a server's connections (`ResponseSource`), and
played back on a connection with its own ids (`play`).

Reads `rtrace.core.trace.Record`s; no I/O of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from ...core.audio import delta_bytes
from ...core.catalog import normalize_type
from .ids import remap
from .responses import OpenItem, Responses, Run, Steps, tokens
from .wire import item_text


@dataclasses.dataclass
class RecordedResponse:
    """The server events of one response in a recorded trace, with the seconds between consecutive ones."""

    events: list[tuple[float, dict[str, Any]]]


class ResponseSource:
    """Responses taken in order from a recording (`--from`), shared by the connections of one server."""

    def __init__(self, responses: list[RecordedResponse]) -> None:
        self.responses = responses
        self.next = 0

    def take(self) -> RecordedResponse | None:
        if self.next >= len(self.responses):
            return None
        self.next += 1
        return self.responses[self.next - 1]


def recorded_responses(records: Iterable[Any]) -> list[RecordedResponse]:
    """The server's responses of a trace, in order: from `response.created` to its `response.done`, the events
    that belong to it (its own streaming events, the acks of its items), each with the seconds since the previous
    one. Takes `rtrace.core.trace.Record`s."""
    out: list[RecordedResponse] = []
    open_: dict[tuple[int, str], tuple[RecordedResponse, set[str], float]] = {}
    for rec in records:
        if rec.dir != "server":
            continue
        ev = rec.event
        etype = rec.type
        if etype == "response.created":
            created_id = str((ev.get("response") or {}).get("id"))
            resp = RecordedResponse([(0.0, ev)])
            open_[(rec.conn, created_id)] = (resp, set(), rec.t)
            out.append(resp)
            continue
        rid: Any = ev.get("response_id")
        if etype == "response.done":
            rid = (ev.get("response") or {}).get("id")
        key = (rec.conn, str(rid))
        if rid is None and etype in ("conversation.item.added", "conversation.item.done"):
            item_id = (ev.get("item") or {}).get("id")
            for k, (_, items, _) in open_.items():
                if k[0] == rec.conn and item_id in items:
                    key = k
                    break
        entry = open_.get(key)
        if entry is None:
            continue
        resp, items, last_t = entry
        if etype == "response.output_item.added":
            item_id = (ev.get("item") or {}).get("id")
            if isinstance(item_id, str):
                items.add(item_id)
        resp.events.append((max(0.0, rec.t - last_t), ev))
        open_[key] = (resp, items, rec.t)
        if etype == "response.done":
            del open_[key]
    return out


def play(responses: Responses, run: Run, recorded: RecordedResponse) -> Steps:
    """A recorded response, ids remapped: its items get this connection's ids, its predecessors are the real ones
    here, its metadata is this request's; its audio deltas give its items their audio length (what a truncate is
    checked against)."""
    ids: dict[str, str] = {}
    first = True
    for delay, original in recorded.events:
        if not first and delay > 0:
            yield delay
        first = False
        event = remap(original, ids)
        etype = normalize_type(str(event.get("type")))
        if etype == "response.created":
            ids.setdefault(str(original.get("response", {}).get("id")), run.response.id)
            continue  # already sent when the request arrived
        if etype == "response.output_item.added":
            item = original.get("item")
            if isinstance(item, dict):
                yield from responses.start_item(run, _new_ids(responses, item, ids))
            continue
        if etype in ("conversation.item.added", "conversation.item.done"):
            continue  # sent with the output item events, with this connection's predecessors
        if etype == "response.output_item.done":
            item = event.get("item")
            open_ = _open_item(run, item.get("id") if isinstance(item, dict) else None)
            if isinstance(item, dict) and open_ is not None and open_.item.wire is not None:
                open_.item.wire.clear()
                open_.item.wire.update(item)
                run.output_tokens += tokens(item_text(item) + str(item.get("arguments") or ""))
                yield from responses.end_item(run, str(item.get("status") or "completed"), open_.item.id)
            continue
        if etype == "response.done":
            yield _done(responses, run, event)
            return
        if etype in ("response.output_text.delta", "response.output_audio_transcript.delta"):
            open_ = _open_item(run, event.get("item_id"))
            if open_ is not None:
                open_.text += str(event.get("delta") or "")
        elif etype == "response.output_audio.delta":
            target = run.items.get(str(event.get("item_id")))
            if target is not None:
                target.audio_bytes += delta_bytes(event)
        event.pop("event_id", None)
        if "response_id" in event:
            event["response_id"] = run.response.id
        yield event
    yield responses.finish(run, "completed")


def _open_item(run: Run, item_id: Any) -> OpenItem | None:
    """The item being generated that a recorded event names (this connection's id), else the one that started
    last (a recording's items may interleave: a preamble message open while its call streams)."""
    named = next((s for s in run.open_items if s.item.id == item_id), None)
    return named or (run.open_items[-1] if run.open_items else None)


def _new_ids(responses: Responses, item: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """A recorded output item with this connection's ids: a new item id, and the call id that goes with it."""
    new = responses.new_item_id()
    ids[str(item.get("id"))] = new
    old_call = item.get("call_id")
    if isinstance(old_call, str):
        ids[old_call] = responses.call_id(new, 0)
    wire: dict[str, Any] = remap(item, ids)
    wire["id"] = new
    return wire


def _done(responses: Responses, run: Run, event: dict[str, Any]) -> dict[str, Any]:
    """This connection's `response.done` for a recorded one: its status, details and usage."""
    raw = event.get("response")
    resp: dict[str, Any] = raw if isinstance(raw, dict) else {}
    done = responses.finish(run, str(resp.get("status") or "completed"), resp.get("status_details"))
    if isinstance(resp.get("usage"), dict):
        done["response"]["usage"] = resp["usage"]
    return done
