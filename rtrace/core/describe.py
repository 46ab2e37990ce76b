"""One-line summaries of events, for witnesses, timelines and reports.

Pure functions of an event dict. Text from the trace is returned as is: escaping is the renderers' job.
"""

from __future__ import annotations

from typing import Any, Final

_SHORT: Final = 60
#: The event types `describe` says more of than their type; of any other type the summary is the type itself.
DESCRIBED: frozenset[str] = frozenset(
    {
        "conversation.item.create",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.delete",
        "conversation.item.deleted",
        "conversation.item.retrieve",
        "conversation.item.truncate",
        "conversation.item.truncated",
        "error",
        "response.created",
        "response.done",
        "response.create",
        "response.cancel",
        "response.output_item.added",
        "response.output_item.done",
        "connection.opened",
        "connection.closed",
        "local.conversation",
    }
)


def _s(value: Any, limit: int = _SHORT) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def item_label(item: Any) -> str:
    if not isinstance(item, dict):
        return "item"
    kind = item.get("type") or "item"
    item_id = item.get("id") or "(no id)"
    if type(item_id) is not str or len(item_id) > _SHORT:  # (a short string is its own `_s`: one call a change)
        item_id = _s(item_id)
    if kind == "message":
        return f"{item.get('role') or '?'} message {item_id}"
    call = item.get("call_id")
    return f"{kind} {item_id}" + (f" ({_s(call)})" if call else "")


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def describe(event_type: str, event: dict[str, Any]) -> str:
    """`create function_call_output item_x (call_y) after item_z`, `error invalid_tool_call_id: ...`; the type
    itself for a type not in `DESCRIBED`."""
    ev = event
    if event_type == "conversation.item.create":
        prev = ev.get("previous_item_id")
        if prev == "root":
            where = " at the start"
        elif not prev:
            where = " at the end"
        else:
            where = f" after {prev if type(prev) is str and len(prev) <= _SHORT else _s(prev)}"
        return f"create {item_label(ev.get('item'))}{where}"
    if event_type in ("conversation.item.added", "conversation.item.done"):
        verb = "added" if event_type.endswith("added") else "done"
        prev = ev.get("previous_item_id")
        where = f" after {_s(prev)}" if prev else " first"
        return f"{verb} {item_label(ev.get('item'))}{where}"
    if event_type in ("conversation.item.delete", "conversation.item.deleted", "conversation.item.retrieve"):
        verb = event_type.rsplit(".", 1)[-1]
        return f"{verb} {_s(ev.get('item_id'))}"
    if event_type in ("conversation.item.truncate", "conversation.item.truncated"):
        verb = event_type.rsplit(".", 1)[-1]
        return f"{verb} {_s(ev.get('item_id'))} at {ev.get('audio_end_ms')} ms"
    if event_type == "error":
        err = _obj(ev.get("error"))
        code = err.get("code") or err.get("type") or "error"
        return f"error {_s(code, 50)}: {_s(err.get('message'), 90)}"
    if event_type in ("response.created", "response.done"):
        resp = _obj(ev.get("response"))
        status = resp.get("status")
        verb = event_type.rsplit(".", 1)[-1]
        return f"response {_s(resp.get('id'))} {verb}" + (f" ({status})" if verb == "done" else "")
    if event_type == "response.create":
        body = _obj(ev.get("response"))
        oob = " out-of-band" if body.get("conversation") == "none" else ""
        return f"response.create{oob} {_s(ev.get('event_id') or '')}".rstrip()
    if event_type == "response.cancel":
        return f"response.cancel {_s(ev.get('response_id') or '')}".rstrip()
    if event_type in ("response.output_item.added", "response.output_item.done"):
        return f"{event_type.rsplit('.', 1)[-1]} output {item_label(ev.get('item'))}"
    if event_type == "connection.opened":
        return f"connection opened {_s(ev.get('path') or '')}".rstrip()
    if event_type == "connection.closed":
        code = ev.get("code")
        reason = ev.get("reason")
        return "connection closed" + (f" {code}" if code is not None else "") + (f" {_s(reason)}" if reason else "")
    if event_type == "local.conversation":
        items = ev.get("items")
        return f"local conversation ({len(items) if isinstance(items, list) else 0} items)"
    return event_type
