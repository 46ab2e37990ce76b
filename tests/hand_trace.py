"""Traces written by hand for the reducer's tests: each call appends one record, folds it and keeps its facts."""

from __future__ import annotations

from typing import Any

from rtrace.core.catalog import BETA_TO_GA
from rtrace.core.facts import Fact
from rtrace.core.reducer import step
from rtrace.core.state import Connection, TraceState
from rtrace.core.trace import Record

from .strategies import check_invariants


class Trace:
    """Records built by hand; each call appends one and returns its line. `run()` folds them, keeping facts."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.facts: dict[int, list[Fact]] = {}
        self.state = TraceState()

    def __call__(self, direction: str, etype: str, conn: int = 1, **fields: Any) -> int:
        line = len(self.records) + 1
        event = {"type": etype, **fields}
        ga = BETA_TO_GA.get(etype, etype)
        rec = Record(line - 1, line, line / 100, direction, conn, event, ga, etype)  # type: ignore[arg-type]
        self.records.append(rec)
        _, facts = step(self.state, rec)
        self.facts[line] = list(facts)
        check_invariants(self.state)
        return line

    def c(self, etype: str, conn: int = 1, **fields: Any) -> int:
        return self("client", etype, conn, **fields)

    def s(self, etype: str, conn: int = 1, **fields: Any) -> int:
        return self("server", etype, conn, **fields)

    def conn(self, n: int = 1) -> Connection:
        conn = self.state.conns[n]
        return conn

    def ids(self, n: int = 1) -> list[str]:
        return self.conn(n).conv.ids()

    def fact(self, line: int, cls: type[Fact]) -> Any:
        found = [f for f in self.facts[line] if isinstance(f, cls)]
        assert len(found) == 1, (line, cls.__name__, self.facts[line])
        return found[0]

    def added(self, item_id: str, prev: str | None, conn: int = 1, **item: Any) -> int:
        item = {"id": item_id, "type": "message", "role": "user", **item}
        return self.s("conversation.item.added", conn, previous_item_id=prev, item=item)

    def create(self, item_id: str | None, prev: str | None = None, conn: int = 1, **item: Any) -> int:
        body = {"type": "message", "role": "user", **item}
        if item_id is not None:
            body["id"] = item_id
        fields: dict[str, Any] = {"item": body, "event_id": f"ev_{len(self.records) + 1}"}
        if prev is not None:
            fields["previous_item_id"] = prev
        return self.c("conversation.item.create", conn, **fields)


def response_body(rid: str, **kw: Any) -> dict[str, Any]:
    """A response object as the server sends it, with id `rid`."""
    return {"id": rid, "object": "realtime.response", "conversation_id": "conv_1", **kw}
