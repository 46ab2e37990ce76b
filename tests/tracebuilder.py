"""A small builder of protocol-plausible traces, for golden samples and tests.

Each method appends one line and returns its 1-based line number, so a test can name the lines it expects.
Times advance by `dt` (seconds) per call; server acks are placed `latency` after the client event.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson


def user_msg(item_id: str, text: str) -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant_msg(item_id: str, text: str = "") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text}] if text else []
    return {"id": item_id, "type": "message", "role": "assistant", "content": content}


def fc(item_id: str, call_id: str, arguments: str = '{"city": "Paris"}', name: str = "get_weather") -> dict[str, Any]:
    return {"id": item_id, "type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def fco(item_id: str | None, call_id: str, output: str = "sunny, 21C") -> dict[str, Any]:
    item: dict[str, Any] = {"type": "function_call_output", "call_id": call_id, "output": output}
    if item_id is not None:
        item["id"] = item_id
    return item


class TraceBuilder:
    def __init__(self, latency: float = 0.05, beta: bool = False) -> None:
        self.lines: list[dict[str, Any]] = []
        self.t = 0.0
        self.latency = latency
        self.beta = beta
        self.conn = 1
        self._ids = itertools.count(1)

    # -- low level -------------------------------------------------------------------------------

    def add(self, direction: str, event: dict[str, Any], dt: float = 0.001, conn: int | None = None) -> int:
        self.t = round(self.t + dt, 6)
        self.lines.append({"t": self.t, "dir": direction, "conn": conn or self.conn, "event": event})
        return len(self.lines)

    def client(self, event: dict[str, Any], dt: float = 0.001) -> int:
        event.setdefault("event_id", f"evt_c{next(self._ids):04d}")
        return self.add("client", event, dt)

    def server(self, event: dict[str, Any], dt: float = 0.0001) -> int:
        event.setdefault("event_id", f"event_s{next(self._ids):05d}")
        return self.add("server", event, dt)

    def meta(self, event: dict[str, Any], dt: float = 0.001, conn: int | None = None) -> int:
        return self.add("meta", event, dt, conn)

    def local(self, event: dict[str, Any], dt: float = 0.0005) -> int:
        return self.add("local", event, dt)

    # -- connections -----------------------------------------------------------------------------

    def open(self, conn: int | None = None, dt: float = 0.001) -> int:
        if conn is not None:
            self.conn = conn
        line = self.meta({"type": "connection.opened", "path": "/v1/realtime?model=gpt-realtime"}, dt)
        self.server({"type": "session.created", "session": {"id": f"sess_{self.conn}", "type": "realtime"}})
        return line

    def close(self, code: int | None = 1000, dt: float = 0.001, conn: int | None = None) -> int:
        """Close the current connection (or `conn`, e.g. one the client replaced before its close was noted)."""
        event: dict[str, Any] = {"type": "connection.closed"}
        if code is not None:
            event["code"] = code
        return self.meta(event, dt, conn)

    # -- items -----------------------------------------------------------------------------------

    def create(self, item: dict[str, Any], prev: str | None = None, dt: float = 0.001, **kw: Any) -> int:
        event: dict[str, Any] = {"type": "conversation.item.create", "item": dict(item), **kw}
        if prev is not None:
            event["previous_item_id"] = prev
        return self.client(event, dt)

    def added(self, item: dict[str, Any], prev: str | None, dt: float | None = None) -> int:
        full = {"object": "realtime.item", "status": "completed", **item}
        kind = "conversation.item.created" if self.beta else "conversation.item.added"
        line = self.server({"type": kind, "previous_item_id": prev, "item": full}, self.latency if dt is None else dt)
        if not self.beta:
            self.server({"type": "conversation.item.done", "previous_item_id": prev, "item": full}, 0.00005)
        return line

    def delete(self, item_id: str, dt: float = 0.001) -> int:
        return self.client({"type": "conversation.item.delete", "item_id": item_id}, dt)

    def deleted(self, item_id: str, dt: float | None = None) -> int:
        return self.server(
            {"type": "conversation.item.deleted", "item_id": item_id}, self.latency if dt is None else dt
        )

    def error(self, code: str, message: str, event_id: str | None = None, dt: float | None = None) -> int:
        err = {"type": "invalid_request_error", "code": code, "message": message, "param": None, "event_id": event_id}
        return self.server({"type": "error", "error": err}, self.latency if dt is None else dt)

    def event_id(self, line: int) -> str:
        return str(self.lines[line - 1]["event"]["event_id"])

    # -- responses -------------------------------------------------------------------------------

    def response_create(self, dt: float = 0.001, **body: Any) -> int:
        line = self.client({"type": "response.create", "response": body}, dt)
        event_id = self.event_id(line)
        self.lines[line - 1]["event"]["response"].setdefault("metadata", {"client_event_id": event_id})
        return line

    def response_created(self, rid: str, client_event_id: str | None = None, dt: float | None = None) -> int:
        resp: dict[str, Any] = {"object": "realtime.response", "id": rid, "status": "in_progress", "output": []}
        resp["conversation_id"] = "conv_1"
        if client_event_id:
            resp["metadata"] = {"client_event_id": client_event_id}
        return self.server({"type": "response.created", "response": resp}, self.latency if dt is None else dt)

    def response_done(
        self,
        rid: str,
        status: str = "completed",
        output: list[dict[str, Any]] | None = None,
        dt: float = 0.0001,
        error: dict[str, Any] | None = None,
    ) -> int:
        resp: dict[str, Any] = {"object": "realtime.response", "id": rid, "status": status, "output": output or []}
        resp["status_details"] = {"type": status, "error": error} if error else None
        return self.server({"type": "response.done", "response": resp}, dt)

    def output_item(
        self,
        rid: str,
        item: dict[str, Any],
        prev: str | None,
        index: int = 0,
        text_chunks: list[str] | None = None,
        audio_b64: list[str] | None = None,
    ) -> int:
        """One generated output item: output_item.added, conversation.item.added, deltas, done events.
        Returns the line of conversation.item.added."""
        start = {**item, "object": "realtime.item", "status": "in_progress"}
        if item["type"] == "function_call":
            start["arguments"] = ""
        if item["type"] == "message":
            start["content"] = []
        self.server({"type": "response.output_item.added", "response_id": rid, "output_index": index, "item": start})
        kind = "conversation.item.created" if self.beta else "conversation.item.added"
        line = self.server({"type": kind, "previous_item_id": prev, "item": start})
        base = {"response_id": rid, "item_id": item["id"], "output_index": index}
        if item["type"] == "function_call":
            self.server(
                {
                    "type": "response.function_call_arguments.delta",
                    **base,
                    "call_id": item["call_id"],
                    "delta": item["arguments"],
                }
            )
            self.server(
                {
                    "type": "response.function_call_arguments.done",
                    **base,
                    "call_id": item["call_id"],
                    "name": item["name"],
                    "arguments": item["arguments"],
                }
            )
        for chunk in text_chunks or []:
            kind = "response.text.delta" if self.beta else "response.output_text.delta"
            self.server({"type": kind, **base, "content_index": 0, "delta": chunk}, 0.01)
        for chunk in audio_b64 or []:
            kind = "response.audio.delta" if self.beta else "response.output_audio.delta"
            self.server({"type": kind, **base, "content_index": 0, "delta": chunk}, 0.01)
        final = {**item, "object": "realtime.item", "status": "completed"}
        self.server({"type": "response.output_item.done", "response_id": rid, "output_index": index, "item": final})
        if not self.beta:
            self.server({"type": "conversation.item.done", "previous_item_id": prev, "item": final})
        return line

    # -- output ----------------------------------------------------------------------------------

    def dumps(self) -> bytes:
        return b"".join(orjson.dumps(line) + b"\n" for line in self.lines)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.dumps())
        return path
