"""Injected faults, declared once: each fault flag of `rtrace serve` (`FAULTS`) is a name, an option kind, its help,
the scenario-script turns it compiles to, and how `describe` says it. `Faults` holds the flags' values; its turns
(`rtrace.net.script.Schedule.of`) run in the one engine with a script's own (`rtrace.net.script.ConnectionScript`):
one matcher, one fire counter, one note format. Also here: the `TYPE[:ITEM_TYPE]` spec grammar and close codes.

Adding a fault: a `Fault` in `FAULTS` (its turn tables and its words) and a field of `Faults` named after it. The
command line, the pytest plugin, `describe` and the docs' option tables read the declaration.

A fault is a protocol answer like any other, decided without I/O; `rtrace.net.server` only executes it. Its note is
an emission in line with the events around it, so the trace shows it where it acts: a drop's note at the drop (the
events still queued never leave), a cut's after the last event sent, a failed response's just before its
`response.done`, an injected error's just before the error.

Close codes: a drop (`drop_on`, `drop_after`) ends the TCP connection without a close frame by default
(`ABNORMAL`, 1006: what a client sees when the network fails); `close_after` sends a close frame 1000. `close_code`
overrides both: 1006 (no close frame), 1005 (a close frame without a code), or any code a close frame may
carry (1000-1003, 1007-1014, 3000-4999; 1001 going away, 1011 server error, 1012 restart, 1013 try again later).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from typing import Any, Literal

from ..core.catalog import CLIENT_EVENTS, ITEM_TYPES, ROLES, SERVER_EVENTS, normalize_type, side_of
from ..core.durations import format_duration, parse_duration

Side = Literal["client", "server"]
#: What a fault flag takes: `specs` (repeated or comma-separated `TYPE[:ITEM_TYPE]` of one side), `count` (a whole
#: number), `numbers` (repeated whole numbers), `duration` (in the grammar of `rtrace.core.durations`).
Kind = Literal["specs", "count", "numbers", "duration"]
#: One scenario-script turn as its TOML table (`rtrace.net.script` reads it with the file's schema).
Table = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Fault:
    """One fault flag: `name` is the option (`--drop-on`), the `fault` of its notes and its field in `Faults`."""

    name: str
    kind: Kind
    #: The option's help (`rtrace serve --help`, the docs' option table).
    help: str
    #: The turns a value of the flag compiles to, given the `--close-code` (None: the fault's own default).
    tables: Callable[[Any, int | None], list[Table]]
    #: What a turn of it does, in words: given its spec (what the flag was given) and how it closes.
    says: Callable[[str, str], str]
    #: For `specs`: whose events they name.
    side: Side | None = None

    @property
    def field(self) -> str:
        return self.name.replace("-", "_")


#: The close code of a drop: no close frame at all (the TCP connection ends; the client's websocket says 1006).
ABNORMAL = 1006
#: A close frame without a status code (the receiver reports 1005).
NO_STATUS = 1005
_SPEC = "TYPE[:ITEM_TYPE]"


def seconds_text(seconds: float) -> str:
    """Seconds as a duration that reads back exactly (`10.0s`, `0.00001s`; `rtrace.core.durations`)."""
    import decimal  # here, not at the top: every command line builds its options from this module (8 ms)

    return f"{decimal.Decimal(repr(seconds)):f}s"


#: The flags' values: a barge-in this many seconds into the response's audio; slow audio this many seconds per
#: second of audio; bursty audio held this long.
BARGE_IN_AFTER = 0.2
SLOW_AUDIO = 2.0
BURST_HOLD = 1.0


def _or(code: int | None, default: int) -> int:
    return default if code is None else code


#: The fault flags, in the order the help and `describe` list them (and, within a moment, they are tried in).
FAULTS: tuple[Fault, ...] = (
    Fault(
        "close-after", "count", "Fault: close after N server events.",
        lambda n, code: [] if n is None else [{"when": {"sent_count": n}, "close": _or(code, 1000)}],
        lambda spec, how: f"close ({how}) after {spec} server events",
    ),
    Fault(
        "drop-on", "specs", f"Fault: drop the socket when a client event is {_SPEC}.",
        lambda specs, code: [{"when": {"event": s}, "close": _or(code, ABNORMAL)} for s in specs],
        lambda spec, how: f"drop the socket ({how}) when the client sends {spec}", side="client",
    ),
    Fault(
        "drop-after", "specs", f"Fault: drop the socket after a server event {_SPEC}, e.g. response.done.",
        lambda specs, code: [{"when": {"sent": s}, "close": _or(code, ABNORMAL)} for s in specs],
        lambda spec, how: f"drop the socket ({how}) right after sending {spec}", side="server",
    ),
    Fault(
        "fail-response", "numbers", "Fault: the connection's Nth response fails.",
        lambda numbers, code: [{"when": {"response": n}, "fail": "server_error"} for n in sorted(numbers)],
        lambda spec, how: f"fail response {spec} of a connection",
    ),
    Fault(
        "cancel-response", "numbers", "Fault: the server cancels the connection's Nth response (turn_detected).",
        lambda numbers, code: [{"when": {"response": n}, "cancel": "turn_detected"} for n in sorted(numbers)],
        lambda spec, how: f"cancel response {spec} of a connection (turn_detected, no output)",
    ),
    Fault(
        "rate-limit-response", "numbers", "Fault: the connection's Nth response hits the rate limit.",
        lambda numbers, code: [{"when": {"response": n}, "rate_limit": "tokens"} for n in sorted(numbers)],
        lambda spec, how: f"rate-limit response {spec} of a connection (no tokens remaining, failed "
                          "rate_limit_exceeded)",
    ),
    Fault(
        "fail-transcription", "numbers", "Fault: the server's Nth input audio transcription fails.",
        lambda numbers, code: [{"when": {"transcription": n}, "fail": True} for n in sorted(numbers)],
        lambda spec, how: f"fail input audio transcription {spec} (transcription.failed instead of completed)",
    ),
    Fault(
        "barge-in", "numbers",
        f"Fault: the user speaks during the connection's Nth response ({BARGE_IN_AFTER}s of its audio in).",
        lambda numbers, code: [{"when": {"response": n}, "barge_in": seconds_text(BARGE_IN_AFTER)}
                               for n in sorted(numbers)],
        lambda spec, how: f"the user speaks {format_duration(BARGE_IN_AFTER)} into response {spec} of a "
                          "connection (server VAD)",
    ),
    Fault(
        "slow-audio", "numbers", f"Fault: the Nth response's output audio at {SLOW_AUDIO:g}x real time.",
        lambda numbers, code: [{"when": {"response": n}, "audio_pace": SLOW_AUDIO} for n in sorted(numbers)],
        lambda spec, how: f"the output audio of response {spec} of a connection at {SLOW_AUDIO:g}x real time",
    ),
    Fault(
        "burst-audio", "numbers", f"Fault: the Nth response's output audio held {BURST_HOLD:g}s, then at once.",
        lambda numbers, code: [{"when": {"response": n}, "audio_burst": seconds_text(BURST_HOLD)}
                               for n in sorted(numbers)],
        lambda spec, how: f"the output audio of response {spec} of a connection held "
                          f"{format_duration(BURST_HOLD)}, then in one burst",
    ),
    Fault(
        "error-on", "specs", f"Fault: answer {_SPEC} with an error.",
        lambda specs, code: [{"when": {"event": s}, "error": "fault_injected"} for s in specs],
        lambda spec, how: f"answer {spec} with an error", side="client",
    ),
    Fault(
        "expire-after", "duration", "Fault: session_expired, close 1001 after this long (10s).",
        lambda seconds, code: [] if seconds is None else [{"when": {"opened": True}, "expire": seconds_text(seconds)}],
        lambda spec, how: f"session_expired and close 1001 {format_duration(float(spec))} after a connection opens",
    ),
)  # fmt: skip
FAULT_BY_NAME: dict[str, Fault] = {f.name: f for f in FAULTS}


@dataclasses.dataclass
class Faults:
    """The fault flags' values (each field a `Fault` of `FAULTS`, by its `field` name), with `--close-code` and
    `--fault-times`. `rtrace.net.script.Schedule.of(faults)` compiles them to turns."""

    #: Close the connection once this many server events have been sent on it.
    close_after: int | None = None
    #: Close the connection (no close handshake wait, queued events dropped) when a client event matches one of
    #: these: `TYPE` or `TYPE:ITEM_TYPE` (e.g. `conversation.item.create:function_call_output`), before answering it.
    drop_on: list[str] = dataclasses.field(default_factory=list)
    #: Answer these responses (1-based, per connection: each `response.create` and each automatic response after
    #: speech) with `response.done` status `failed`.
    fail_response: set[int] = dataclasses.field(default_factory=set)
    #: The server cancels these responses (1-based, per connection) right after `response.created`: `response.done`
    #: status `cancelled`, reason `turn_detected`, no output.
    cancel_response: set[int] = dataclasses.field(default_factory=set)
    #: These responses hit the rate limit: `rate_limits.updated` with no tokens remaining, then `response.done`
    #: status `failed`, code `rate_limit_exceeded`.
    rate_limit_response: set[int] = dataclasses.field(default_factory=set)
    #: These input audio transcriptions (1-based, in the server's life) fail:
    #: `conversation.item.input_audio_transcription.failed` instead of their deltas and `completed`.
    fail_transcription: set[int] = dataclasses.field(default_factory=set)
    #: The user speaks `BARGE_IN_AFTER` seconds into these responses' output audio (server VAD: `speech_started`,
    #: the response cancelled `turn_detected`, then a new user turn).
    barge_in: set[int] = dataclasses.field(default_factory=set)
    #: These responses' output audio comes at `SLOW_AUDIO` seconds per second of audio.
    slow_audio: set[int] = dataclasses.field(default_factory=set)
    #: These responses' output audio is held `BURST_HOLD` seconds, then sent at once.
    burst_audio: set[int] = dataclasses.field(default_factory=set)
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

    @classmethod
    def given(cls, values: dict[str, Any], close_code: int | None = None, times: int | None = 1) -> Faults:
        """The flags' values as the command line gives them (by field name; absent: not given), each read and
        checked as its kind says (`read`). Raises ValueError naming the option."""
        return cls(**{f.field: read(f, values.get(f.field)) for f in FAULTS}, close_code=close_code, times=times)

    def tables(self) -> list[Table]:
        """The turns of every fault given, as script tables (`fault` names each; `times` as `--fault-times`)."""
        out: list[Table] = []
        for fault in FAULTS:
            for table in fault.tables(getattr(self, fault.field), self.close_code):
                out.append({"fault": fault.name, **table, "times": self.times or 0})
        return out


def read(fault: Fault, value: Any) -> Any:
    """A fault flag's value from the command line, checked as its kind says: `specs` repeated or comma-separated
    and checked against the catalog, `numbers` and `count` at least 1, a `duration` in the one grammar. Raises
    ValueError naming the option."""
    option = f"--{fault.name}"
    if fault.kind == "specs":
        assert fault.side is not None
        return check_specs(split_specs(value), fault.side, option)
    if fault.kind == "numbers":
        numbers = set(value or [])
        for n in sorted(numbers):
            if n < 1:
                raise ValueError(f"{option} {n}: counts from 1")
        return numbers
    if value is None:
        return None
    if fault.kind == "count" and value < 1:
        raise ValueError(f"{option} {value}: give at least 1")
    return parse_duration(value, option) if fault.kind == "duration" else value


def split_specs(values: list[str] | None) -> list[str]:
    """Repeated and comma-separated `TYPE[:ITEM_TYPE]` specs."""
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


def closing_words(code: int) -> str:
    """How a closing fault ends the connection, in words (`describe`)."""
    words = {ABNORMAL: "no close frame, 1006", NO_STATUS: "a close frame without a code (1005)"}
    return words.get(code, f"close {code}")


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


