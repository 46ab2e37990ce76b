"""Injected faults: what `rtrace serve` can be told to break (`Faults`), and per connection which fault fires when
(`ConnectionFaults`): spec matching, the fire-once accounting shared by a server's connections, the
`fault.injected` note of each, the close code of each, and `close_after` / `drop_after` cutting a list of
emissions.

A fault is a protocol answer like any other, decided here without I/O; `rtrace.net.server` only executes it. Its
note is an emission in line with the events around it, so the trace shows it where it acts: a drop's note at
the drop (the events still queued never leave), a cut's after the last event sent, a failed response's just
before its `response.done`, an injected error's just before the error.

Close codes: a drop (`drop_on`, `drop_after`) ends the TCP connection without a close frame by default
(`ABNORMAL`, 1006: what a client sees when the network fails); `close_after` sends a close frame 1000. `close_code`
overrides both: 1006 (no close frame), 1005 (a close frame without a code), or any code a close frame may
carry (1000-1003, 1007-1014, 3000-4999; 1001 going away, 1011 server error, 1012 restart, 1013 try again later).
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Literal

from ..core.catalog import CLIENT_EVENTS, ITEM_TYPES, ROLES, SERVER_EVENTS, normalize_type, side_of
from .wire import Emission


@dataclasses.dataclass
class Faults:
    """Injected faults. Each one that fires is also noted as a `fault.injected` meta emission."""

    #: Close the connection once this many server events have been sent on it.
    close_after: int | None = None
    #: Close the connection (no close handshake wait, queued events dropped) when a client event matches one of
    #: these: `TYPE` or `TYPE:ITEM_TYPE` (e.g. `conversation.item.create:function_call_output`), before answering it.
    drop_on: list[str] = dataclasses.field(default_factory=list)
    #: Answer these responses (1-based, per connection: each `response.create` and each automatic response after
    #: speech) with `response.done` status `failed`.
    fail_response: set[int] = dataclasses.field(default_factory=set)
    #: Answer matching client events (`TYPE` or `TYPE:ITEM_TYPE`) with an `error` instead of processing them.
    error_on: list[str] = dataclasses.field(default_factory=list)
    #: Send `session_expired` and close 1001 this many seconds after the connection opened.
    expire_after: float | None = None
    #: Close the connection (as a drop) right after the server sends an event matching one of these: `TYPE` or
    #: `TYPE:ITEM_TYPE`, the item of the event or one of a `response.done`'s outputs (e.g.
    #: `response.done:function_call`: while the client runs the tool).
    drop_after: list[str] = dataclasses.field(default_factory=list)
    #: Close code of every closing fault (see the module docstring); None: 1006 for a drop, 1000 for
    #: `close_after`.
    close_code: int | None = None
    #: How many times each fault (each spec of it) fires in the life of a server; None: every time. The default 1
    #: lets a client that reconnects and replays the event a drop matched get through the second time.
    #: `expire_after` counts when a connection is armed with it.
    times: int | None = 1


#: The close code of a drop: no close frame at all (the TCP connection ends; the client's websocket says 1006).
ABNORMAL = 1006
#: A close frame without a status code (the receiver reports 1005).
NO_STATUS = 1005
#: Codes a fault may close with: a close frame may carry 1000-1003, 1007-1014 and 3000-4999; 1005 and 1006 are
#: how a close frame without a code and a connection without a close frame are reported. 1015 (TLS failure)
#: cannot be produced by a server.
def valid_close_code(code: int) -> bool:
    return code in (1000, 1001, 1002, 1003, NO_STATUS, ABNORMAL) or 1007 <= code <= 1014 or 3000 <= code <= 4999


def matches(spec: str, event: dict[str, Any]) -> bool:
    """`TYPE` matches the event of that type; `TYPE:SUB` one whose item has that type or role (for a
    `response.done`, one of its output items)."""
    etype, _, sub = spec.partition(":")
    if event.get("type") != etype:
        return False
    if not sub:
        return True
    items: list[Any] = [event.get("item")]
    response = event.get("response")
    if isinstance(response, dict) and isinstance(response.get("output"), list):
        items.extend(response["output"])
    return any(isinstance(item, dict) and sub in (item.get("type"), item.get("role")) for item in items)


def check_spec(spec: str, side: Literal["client", "server"], option: str, form: str = "TYPE[:ITEM_TYPE]") -> str:
    """`spec` if it can ever match: its type is one the `side` sends (`rtrace.core.catalog`), and what follows a
    colon is an item type or a role (only where `form` allows one). Raises ValueError naming `option`, with the
    closest name when it looks like a typo."""
    etype, sep, sub = spec.partition(":")
    wanted = CLIENT_EVENTS if side == "client" else SERVER_EVENTS
    takes = f"{option} takes {form} with a {side} event type"
    if etype not in wanted:
        ga = normalize_type(etype)
        other = side_of(ga)
        if ga != etype and ga in wanted:
            why = f"{etype} is the beta name of {ga}; rtrace serve sends and matches the GA names: {option} {ga}"
        elif other is not None and other != side:
            why = f"{etype} is a {other} event; {takes}"
        else:
            close = difflib.get_close_matches(etype, sorted(wanted), n=1, cutoff=0.6)
            example = "conversation.item.create" if side == "client" else "response.done"
            hint = f"did you mean {close[0]}?" if close else f"e.g. {example}"
            why = f"{etype!r} is not a {side} event of the realtime protocol ({hint})"
        raise ValueError(f"{option} {spec}: {why}")
    if sep:
        if ":" not in form:
            raise ValueError(f"{option} {spec}: {takes}, no item type after a colon")
        if sub not in ITEM_TYPES | ROLES:
            close = difflib.get_close_matches(sub, sorted(ITEM_TYPES | ROLES), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else "an item type such as function_call_output, or a role"
            raise ValueError(f"{option} {spec}: {sub!r} is not an item type or a role ({hint})")
    return spec


def check_specs(
    specs: list[str], side: Literal["client", "server"], option: str, form: str = "TYPE[:ITEM_TYPE]"
) -> list[str]:
    """`check_spec` on each of `specs`; the list itself."""
    for spec in specs:
        check_spec(spec, side, option, form)
    return specs


def fault_note(fault: str, spec: str, event: dict[str, Any] | None) -> dict[str, Any]:
    """The `fault.injected` meta record of a fault that fired (on `event`, when a client event set it off)."""
    note: dict[str, Any] = {"type": "fault.injected", "fault": fault, "spec": spec}
    if event is not None:
        note["client_event_type"] = event.get("type")
        if isinstance(event.get("event_id"), str):
            note["client_event_id"] = event["event_id"]
    return note


class ConnectionFaults:
    """The faults of one connection. Each `kind:spec` fires at most `Faults.times` times in the life of a server:
    `fired` counts them and is shared by the server's connections."""

    def __init__(self, faults: Faults, fired: dict[str, int]) -> None:
        self.faults = faults
        self.fired = fired
        #: Server events sent on this connection so far (what `close_after` counts).
        self.events_sent = 0
        #: Whether this connection got the `expire_after` fault (decided when it opens).
        self.expiry_armed = False

    def close_code(self, fault: str) -> int:
        """The close code of a closing fault (`drop-on`, `drop-after`, `close-after`; see the module docstring)."""
        if self.faults.close_code is not None:
            return self.faults.close_code
        return 1000 if fault == "close-after" else ABNORMAL

    def closing(self, note: dict[str, Any], flush: bool) -> list[Emission]:
        """A closing fault acting: its note, then the close (`flush=False`: at once, and what is still queued is
        lost; `flush=True`: after what is queued)."""
        fault = str(note["fault"])
        close = (self.close_code(fault), f"fault: {fault}")
        return [Emission(meta=note, flush=flush), Emission(close=close, flush=flush)]

    def may_fire(self, key: str) -> bool:
        """Whether a fault whose condition holds fires now (see `Faults.times`); counts it when it does."""
        times = self.faults.times
        fired = self.fired.get(key, 0)
        if times is not None and fired >= times:
            return False
        self.fired[key] = fired + 1
        return True

    def drop_on(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The note of a `drop_on` fault `event` sets off, or None."""
        return self._first("drop-on", self.faults.drop_on, event)

    def error_on(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The note of an `error_on` fault `event` sets off, or None."""
        return self._first("error-on", self.faults.error_on, event)

    def _first(self, fault: str, specs: list[str], event: dict[str, Any]) -> dict[str, Any] | None:
        for spec in specs:
            if matches(spec, event) and self.may_fire(f"{fault}:{spec}"):
                return fault_note(fault, spec, event)
        return None

    def fail_response(self, ordinal: int, event: dict[str, Any] | None) -> dict[str, Any] | None:
        """The note of a `fail_response` fault for the connection's `ordinal`-th response (a `response.create`, or
        None: one server VAD began), or None."""
        if ordinal in self.faults.fail_response and self.may_fire(f"fail-response:{ordinal}"):
            return fault_note("fail-response", str(ordinal), event)
        return None

    def arm_expiry(self) -> None:
        """On open: whether this connection gets the `expire_after` fault (it counts as fired when it does)."""
        self.expiry_armed = self.faults.expire_after is not None and self.may_fire("expire-after")

    def expiry(self) -> float | None:
        """The `expire_after` of this connection, when it was armed with it."""
        return self.faults.expire_after if self.expiry_armed else None

    def cut(self, out: list[Emission]) -> tuple[list[Emission], bool]:
        """Apply `close_after` and `drop_after` to emissions about to be carried out: (what is kept, whether the
        connection closes). The list is cut after the connection's Nth server event, or after the first event a
        `drop_after` spec matches, and ends with the fault's note and its close."""
        limit = self.faults.close_after
        count = sum(1 for em in out if em.event is not None)
        if limit is not None and self.events_sent + count >= limit and not self.may_fire("close-after"):
            self.faults.close_after = limit = None  # spent on earlier connections
        kept: list[Emission] = []
        for em in out:
            kept.append(em)
            if em.event is None:
                continue
            self.events_sent += 1
            if limit is not None and self.events_sent >= limit:
                return [*kept, *self.closing(fault_note("close-after", str(limit), None), True)], True
            for spec in self.faults.drop_after:
                if matches(spec, em.event) and self.may_fire(f"drop-after:{spec}"):
                    note = {**fault_note("drop-after", spec, None), "server_event_type": em.event.get("type")}
                    return [*kept, *self.closing(note, True)], True
        return kept, False
