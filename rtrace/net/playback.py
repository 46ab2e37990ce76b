"""Recorded responses (`rtrace serve --from`): a trace's server responses cut out in order with their pacing
(`recorded_responses`), handed out one per `response.create` across a server's connections (`ResponseSource`).

Reads `rtrace.core.trace.Record`s; no I/O of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any


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


def remap(obj: Any, ids: dict[str, str]) -> Any:
    """`obj` with every string that is a recorded id replaced by this connection's (any key, any depth)."""
    if isinstance(obj, str):
        return ids.get(obj, obj)
    if isinstance(obj, dict):
        return {k: remap(v, ids) for k, v in obj.items()}
    if isinstance(obj, list):
        return [remap(v, ids) for v in obj]
    return obj
