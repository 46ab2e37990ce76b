"""Every fault action, declared once (`ACTIONS`), as toxiproxy registers a toxic: its search kind and moments, the
script key its turn carries and how that value is read and written, its words, its canonical value, what the
hunt's search draws and how it shrinks it, its cost, whether a link can make it, and the `serve` flags that compile
to it. The flags (`rtrace.net.faults.flags`), the script's keys (`rtrace.net.faults.script`), the search's kinds
(`schedule`, `search`, `shrink`), the link's (`link`) and every description derive from it. Pure: imports only
`rtrace.core`; no I/O, no event loop, no endpoint. Adding a fault: one `Action` here plus its behaviour.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

from ...core.catalog import ACK_TYPES
from ...core.durations import format_duration, parse_duration

#: What a fault flag takes: `specs` (repeated or comma-separated `TYPE[:ITEM_TYPE]` of one side), `count` (a whole
#: number), `numbers` (repeated whole numbers), `duration` (in the grammar of `rtrace.core.durations`).
FlagKind = Literal["specs", "count", "numbers", "duration"]
#: The form of a search fault's value: a time in seconds, a close code, a word (an error code, a reason, a limit).
Form = Literal["seconds", "code", "word"]
#: Where a search fault acts, and the script moment (`rtrace.net.faults.script.Moment`) of each.
SCRIPT_MOMENT: dict[str, str] = {"event": "event", "sent": "sent", "response": "response", "session": "opened",
                                 "transcription": "transcription"}  # fmt: skip

#: The close code of a drop: no close frame at all (the TCP connection ends; the client's websocket says 1006).
ABNORMAL = 1006
#: A close frame without a status code (the receiver reports 1005).
NO_STATUS = 1005
#: The reasons a response is cancelled for (`status_details.reason`): the server cancels on its own only when it
#: hears the user (`turn_detected`), the first.
CANCEL_REASONS = ("turn_detected", "client_cancelled")
#: The limits a `rate_limits.updated` names (a rate-limited response's; the first is the flags' and the search's).
RATE_LIMITS = ("tokens", "requests")
#: Failure codes a response may end with (`response.done` status `failed`); the first is the canonical one.
FAIL_CODES = ("server_error", "rate_limit_exceeded")
#: The code the real API answers a client event with when it refuses it (protocol reference, "Known codes").
ERROR_CODES: dict[str, str] = {
    "conversation.item.create:function_call_output": "invalid_tool_call_id",
    "conversation.item.create": "invalid_previous_item_id",
    "conversation.item.delete": "item_delete_invalid_item_id",
    "conversation.item.retrieve": "item_retrieve_invalid_item_id",
    "conversation.item.truncate": "unsupported_content_type",
    "input_audio_buffer.commit": "input_audio_buffer_commit_empty",
    "response.create": "conversation_already_has_active_response",
    "response.cancel": "response_cancel_not_active",
    "session.update": "invalid_value",
}
#: Close codes the random phase draws (1006: no close frame; 1000 normal, 1001 going away, 1011 server error, 1012
#: restart, 1013 try again later).
CLOSE_CODES = (1006, 1000, 1001, 1011, 1012, 1013)
#: Below this a latency or a delay is not shrunk further (it is dropped, or kept); below this a pace (real time).
SHRINK_FLOOR = 0.005
PACE_FLOOR = 1.0
#: Client events the clean run may send many of and whose faults the systematic phase leaves to the random one.
STREAMED = ("input_audio_buffer.append",)
_SPEC = "TYPE[:ITEM_TYPE]"
#: The longest a delay, a barge-in's moment, a hold or a stall may be in a script.
DAY = 86400.0


def error_code(spec: str) -> str:
    """The code the real API answers the client event `spec` (`TYPE[:ITEM_TYPE]`) with when it refuses it."""
    return ERROR_CODES.get(spec) or ERROR_CODES.get(spec.partition(":")[0]) or "server_error"


def seconds_text(seconds: float) -> str:
    """Seconds as a duration that reads back exactly (`10.0s`, `0.00001s`; `rtrace.core.durations`)."""
    import decimal  # here, not at the top: every command line builds its options from this module (8 ms)

    return f"{decimal.Decimal(repr(seconds)):f}s"


def valid_close_code(code: int) -> bool:
    """Codes a fault may close with: a close frame may carry 1000-1003, 1007-1014 and 3000-4999; 1005 and 1006 are
    how a close frame without a code and a connection without a close frame are reported. 1015 (TLS failure)
    cannot be produced by a server."""
    return code in (1000, 1001, 1002, 1003, NO_STATUS, ABNORMAL) or 1007 <= code <= 1014 or 3000 <= code <= 4999


# -- script values: how a turn's action is read (checked) and written ------------------------------------------


@dataclasses.dataclass(frozen=True)
class Reader:
    """How a script key's value is read (`read(key, value)`: the value the turn holds, or ValueError with the
    message) and written back as a TOML value's Python form (`write`: `rtrace.net.faults.script` quotes it)."""

    read: Callable[[str, Any], Any]
    write: Callable[[Any], Any] = lambda v: v


def _close(key: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not valid_close_code(value):
        codes = "1000-1003, 1007-1014, 3000-4999, 1005 (no code) or 1006 (no close frame)"
        raise ValueError(f"`{key}` must be a close code: {codes}")
    return value


def _code(key: str, value: Any) -> str:
    if value is True:
        return FAIL_CODES[0]
    if isinstance(value, str) and value:
        return value
    raise ValueError(f"`{key}` must be true or an error code")


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"`{key}` must be a non-empty string")
    return value


def _duration(limit: float | None) -> Callable[[str, Any], float]:
    def read(key: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(f'`{key}` must be a duration: "2s", "250ms"')
        try:  # one grammar with the command line: a number needs a unit (0 excepted)
            seconds = parse_duration(value if isinstance(value, str) else repr(value))
        except ValueError as e:
            raise ValueError(f"`{key}`: {getattr(e, 'why', e)}" + (" (in quotes)" if not isinstance(value, str)
                                                                   else "")) from None  # fmt: skip
        if limit is not None and not seconds < limit:
            raise ValueError(f'`{key}` must be under a day: "2s", "250ms"')
        return seconds

    return read


def _choice(choices: tuple[str, ...]) -> Callable[[str, Any], str]:
    def read(key: str, value: Any) -> str:
        if value is True:
            return choices[0]
        if isinstance(value, str) and value in choices:
            return value
        raise ValueError(f"`{key}` must be true or one of {', '.join(choices)}")

    return read


def _factor(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 100:
        raise ValueError(f"`{key}` must be a number above 0, at most 100 (seconds per second of audio; 1: real time)")
    return float(value)


CLOSE = Reader(_close)
CODE = Reader(_code)
TEXT = Reader(_text)
#: A duration under a day (a delay, a moment in a response's audio, a hold), or of any length (an expiry).
SHORT = Reader(_duration(DAY), seconds_text)
LONG = Reader(_duration(None), seconds_text)
FACTOR = Reader(_factor)


# -- what the search reads of a client's surface ---------------------------------------------------------------


class Surface(Protocol):
    """What an action's draws read of a clean run (`rtrace.net.hunt.search.Surface`)."""

    @property
    def client(self) -> tuple[tuple[str, int], ...]: ...

    @property
    def server(self) -> tuple[tuple[str, int], ...]: ...

    @property
    def responses(self) -> int: ...

    @property
    def duration(self) -> float: ...

    @property
    def server_vad(self) -> bool: ...

    @property
    def audio(self) -> bool: ...

    @property
    def transcriptions(self) -> int: ...


class Point(Protocol):
    """A search fault as its words read it (`rtrace.net.faults.schedule.Fault`)."""

    @property
    def kind(self) -> str: ...

    @property
    def moment(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def value(self) -> float | int | str: ...

    @property
    def k(self) -> int: ...


#: A point of the search without its kind: (moment, target, value, k).
Drawn = tuple[str, str, Any, int]


def ack_types(surface: Surface) -> list[str]:
    """The acknowledgement types the client received (latency is by event type, whatever the item)."""
    seen = dict.fromkeys(spec.partition(":")[0] for spec, _ in surface.server)
    return [etype for etype in seen if etype in ACK_TYPES]


def systematic_client(surface: Surface) -> list[str]:
    """The client events the systematic phase faults: all but streamed ones (audio appends)."""
    return [spec for spec, _ in surface.client if spec not in STREAMED]


def systematic_sent(surface: Surface) -> list[str]:
    """The server events the systematic phase closes after or delays: all but streamed parts (deltas)."""
    return [spec for spec, _ in surface.server if not spec.partition(":")[0].endswith(".delta")]


def _client(surface: Surface) -> list[tuple[str, int]]:
    return list(surface.client) or [("session.update", 1)]


def _server(surface: Surface) -> list[tuple[str, int]]:
    return list(surface.server) or [("session.updated", 1)]


def _responses(surface: Surface) -> range:
    return range(1, surface.responses + 1)


def _nth_response(surface: Surface, rng: random.Random) -> int:
    return rng.randint(1, max(1, surface.responses))


def _halved(floor: float) -> Callable[[Any], list[Any]]:
    def smaller(value: Any) -> list[Any]:
        half = round(float(value) / 2, 4)
        return [half] if half >= floor else []

    return smaller


def _nth(f: Point) -> str:
    return f"{ordinal(f.k)} " if f.k > 1 else ""


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _seconds(f: Point) -> str:
    return format_duration(float(f.value))


# -- the declaration --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Flag:
    """A `serve` flag that compiles to turns of its action: `--NAME`, its kind and help (`serve --help`, the docs'
    option table), the `when` key its value goes in, and how `describe` says a turn of it."""

    name: str
    kind: FlagKind
    help: str
    #: The `when` key each value of the flag fills (`event`, `sent`, `sent_count`, `response`, `transcription`,
    #: `opened`: the flag's value is then the action's).
    when: str
    #: What a turn of it does, in words: given its spec (what the flag was given) and how it closes.
    says: Callable[[str, str], str]
    #: What its turns do (None: the action's canonical value).
    value: Any = None
    #: For `specs`: whose events they name.
    side: Literal["client", "server"] | None = None

    @property
    def field(self) -> str:
        return self.name.replace("-", "_")


@dataclasses.dataclass(frozen=True)
class Action:
    """One fault action (see the module docstring)."""

    #: Its name in a hunt's schedule (`Fault.kind`), and the moments it acts at there.
    kind: str
    moments: tuple[str, ...]
    #: The script key its turn carries (None: a `serve` option, not a turn: latency, jitter) and how it is read.
    key: str | None
    reader: Reader | None
    #: The fault in words, one line (`Fault.describe`).
    words: Callable[[Point], str]
    #: Its value in the systematic phase, and the form of its values.
    canonical: Any
    form: Form
    #: Its rank in the systematic phase (cheapest first) and in shrinking (the dearest is dropped first).
    cost: int
    #: The systematic phase's points on a surface, in the order the client met them.
    points: Callable[[Surface], list[Drawn]]
    #: One point drawn at random (the random phase; the order of the generator's draws is part of a seed's meaning).
    draw: Callable[[Surface, random.Random], Drawn]
    #: The one-step-smaller values of a value (the shrinker; `k` shrinks by itself).
    smaller: Callable[[Any], list[Any]] = lambda value: []
    #: Whether a surface lets it act at all (the random phase draws it only then), and its lots in that draw.
    meets: Callable[[Surface], bool] = lambda surface: True
    lots: int = 1
    #: Whether a link to a real server can make it (`rtrace.net.link.upstream`), at the moments a link sees.
    link: bool = False
    #: The `serve` flags that compile to it, in the help's order.
    flags: tuple[Flag, ...] = ()
    #: Whether a turn of it fires once by default (a fault); False: every time (a delay).
    once: bool = True
    #: For a response action that ends the response with no output: how a message calls such a response.
    ends: str | None = None
    #: Whether it acts on a response's output audio (no ending action goes with it).
    audio: bool = False

    def table(self, f: Point) -> dict[str, Any]:
        """The script turn (its table, the values as a script holds them) that makes the search fault `f`."""
        assert self.key is not None and self.reader is not None
        when: dict[str, Any]
        if f.moment in ("event", "sent"):
            when = {f.moment: f.target, **({"nth": f.k} if f.k > 1 else {})}
        elif f.moment == "session":
            when = {"opened": True}
        else:
            when = {f.moment: f.k}
        return {"when": when, self.key: float(f.value) if self.form == "seconds" else f.value, "times": 1}


def _latency_points(surface: Surface) -> list[Drawn]:
    return [("all", "*", CANONICAL_LATENCY, 1)] + [("all", t, CANONICAL_LATENCY * 4, 1) for t in ack_types(surface)]


def _latency_draw(values: tuple[float, ...]) -> Callable[[Surface, random.Random], Drawn]:
    def draw(surface: Surface, rng: random.Random) -> Drawn:
        target = "*" if rng.random() < 0.6 else rng.choice(ack_types(surface) or ["*"])
        return ("all", target, rng.choice(values), 1)

    return draw


def _close_draw(surface: Surface, rng: random.Random) -> Drawn:
    code = rng.choice(CLOSE_CODES)
    if rng.random() < 0.25:
        return ("response", "", code, rng.randint(1, max(1, surface.responses)))
    if rng.random() < 0.5:
        spec, count = rng.choice(_client(surface))
        return ("event", spec, code, rng.randint(1, count))
    spec, count = rng.choice(_server(surface))
    return ("sent", spec, code, rng.randint(1, count))


def _close_words(f: Point) -> str:
    if f.moment == "event":
        return f"close {f.value} on the {_nth(f)}{f.target} (before answering it)"
    if f.moment == "sent":
        return f"close {f.value} right after the {_nth(f)}{f.target}"
    return f"close {f.value} after response {f.k}'s response.done"


def _delay_draw(surface: Surface, rng: random.Random) -> Drawn:
    if rng.random() < 0.5:
        spec, count = rng.choice(_client(surface))
        return ("event", spec, rng.choice(DELAYS), rng.randint(1, count))
    spec, count = rng.choice(_server(surface))
    return ("sent", spec, rng.choice(DELAYS), rng.randint(1, count))


def _delay_words(f: Point) -> str:
    if f.moment == "event":
        return f"answer to the {_nth(f)}{f.target} {_seconds(f)} late"
    return f"the {_nth(f)}{f.target} (and what follows) {_seconds(f)} late"


def _at_responses(value: Any) -> Callable[[Surface], list[Drawn]]:
    return lambda s: [("response", "", value, n) for n in _responses(s)]


def _response_draw(values: Sequence[Any]) -> Callable[[Surface, random.Random], Drawn]:
    def draw(surface: Surface, rng: random.Random) -> Drawn:
        value = rng.choice(values)
        return ("response", "", value, _nth_response(surface, rng))

    return draw


def _first_response_draw(value: Any) -> Callable[[Surface, random.Random], Drawn]:
    return lambda surface, rng: ("response", "", value, _nth_response(surface, rng))


def _audio(surface: Surface) -> bool:
    return surface.audio


#: The canonical values of the systematic phase, and what the random phase draws, for the timed kinds.
CANONICAL_LATENCY = 0.05
CANONICAL_JITTER = 0.05
CANONICAL_DELAY = 0.5
CANONICAL_CLOSE = 1011
LATENCIES = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
DELAYS = (0.1, 0.5, 1.0, 2.0)
#: A barge-in this many seconds into a response's output audio; slow audio at this many seconds per second of
#: audio; bursty audio held this long (the flags' values and the systematic phase's).
BARGE_IN_AFTER = 0.2
SLOW_AUDIO = 2.0
BURST_HOLD = 1.0
#: A stalled response's output audio stops this long after its first chunk, then resumes.
STALL_AUDIO = 3.0


def _barge_smaller(value: Any) -> list[Any]:
    out = _halved(SHRINK_FLOOR)(value)
    return [*out, 0.0] if value > 0 else out  # before any output: the cheapest barge-in


def _barge_words(f: Point) -> str:
    if not f.value:
        return f"the user speaks as response {f.k} starts (before any output)"
    return f"the user speaks {_seconds(f)} into response {f.k}'s audio"


#: Every fault action, in the order `serve --help` lists their flags (and a schedule tries the flags' turns in).
ACTIONS: tuple[Action, ...] = (
    Action(
        kind="close", moments=("event", "sent", "response"), key="close", reader=CLOSE, words=_close_words,
        canonical=CANONICAL_CLOSE, form="code", cost=2,
        points=lambda s: [("sent", spec, CANONICAL_CLOSE, 1) for spec in systematic_sent(s)]
        + [("response", "", CANONICAL_CLOSE, n) for n in _responses(s)],
        draw=_close_draw, lots=2, link=True,
        flags=(
            Flag(
                name="close-after", kind="count", help="Fault: close after N server events.", when="sent_count",
                says=lambda spec, how: f"close ({how}) after {spec} server events", value=1000,
            ),
        ),
    ),
    Action(
        kind="drop", moments=("event", "sent"), key="close", reader=CLOSE, words=_close_words, canonical=ABNORMAL,
        form="code", cost=1, points=lambda s: [("event", spec, ABNORMAL, 1) for spec in systematic_client(s)],
        draw=lambda s, rng: ("event", *(lambda sc: (sc[0], ABNORMAL, rng.randint(1, sc[1])))(rng.choice(_client(s)))),
        link=True,
        flags=(
            Flag(
                name="drop-on", kind="specs", help=f"Fault: drop the socket when a client event is {_SPEC}.",
                when="event", says=lambda spec, how: f"drop the socket ({how}) when the client sends {spec}",
                side="client",
            ),
            Flag(
                name="drop-after", kind="specs",
                help=f"Fault: drop the socket after a server event {_SPEC}, e.g. response.done.", when="sent",
                says=lambda spec, how: f"drop the socket ({how}) right after sending {spec}", side="server",
            ),
        ),
    ),
    Action(
        kind="fail", moments=("response",), key="fail", reader=CODE,
        words=lambda f: f"response {f.k} failed ({f.value})", canonical=FAIL_CODES[0], form="word", cost=4,
        points=_at_responses(FAIL_CODES[0]), draw=_response_draw(FAIL_CODES), ends="a failed",
        flags=(
            Flag(
                name="fail-response", kind="numbers", help="Fault: the connection's Nth response fails.",
                when="response", says=lambda spec, how: f"fail response {spec} of a connection",
            ),
        ),
    ),
    Action(
        kind="cancel", moments=("response",), key="cancel", reader=Reader(_choice(CANCEL_REASONS)),
        words=lambda f: f"response {f.k} cancelled by the server ({f.value})", canonical=CANCEL_REASONS[0], form="word",
        cost=8, points=_at_responses(CANCEL_REASONS[0]), draw=_first_response_draw(CANCEL_REASONS[0]),
        ends="a cancelled",
        flags=(
            Flag(
                name="cancel-response", kind="numbers",
                help="Fault: the server cancels the connection's Nth response (turn_detected).", when="response",
                says=lambda spec, how: f"cancel response {spec} of a connection (turn_detected, no output)",
            ),
        ),
    ),
    Action(
        kind="rate_limit", moments=("response",), key="rate_limit", reader=Reader(_choice(RATE_LIMITS)),
        words=lambda f: f"response {f.k} rate-limited (no {f.value} remaining)", canonical=RATE_LIMITS[0], form="word",
        cost=9, points=_at_responses(RATE_LIMITS[0]), draw=_response_draw(RATE_LIMITS), ends="a rate-limited",
        flags=(
            Flag(
                name="rate-limit-response", kind="numbers",
                help="Fault: the connection's Nth response hits the rate limit.", when="response",
                says=lambda spec, how: f"rate-limit response {spec} of a connection (no tokens "
                    "remaining, failed rate_limit_exceeded)",
            ),
        ),
    ),
    Action(
        kind="transcription", moments=("transcription",), key="fail", reader=CODE,
        words=lambda f: f"input audio transcription {f.k} failed ({f.value})", canonical=FAIL_CODES[0], form="word",
        cost=10, points=lambda s: [("transcription", "", FAIL_CODES[0], k) for k in range(1, s.transcriptions + 1)],
        draw=lambda s, rng: ("transcription", "", FAIL_CODES[0], rng.randint(1, s.transcriptions)),
        meets=lambda s: bool(s.transcriptions),
        flags=(
            Flag(
                name="fail-transcription", kind="numbers",
                help="Fault: the server's Nth input audio transcription fails.", when="transcription",
                says=lambda spec, how: f"fail input audio transcription {spec} (transcription."
                    "failed instead of completed)",
            ),
        ),
    ),
    Action(
        kind="barge_in", moments=("response",), key="barge_in", reader=SHORT, words=_barge_words,
        canonical=BARGE_IN_AFTER, form="seconds", cost=11,
        points=lambda s: _at_responses(BARGE_IN_AFTER)(s) if s.audio and s.server_vad else [],
        draw=_response_draw((0.0, 0.1, 0.2, 0.5, 1.0)), smaller=_barge_smaller,
        meets=lambda s: s.audio and s.server_vad, audio=True,
        flags=(
            Flag(
                name="barge-in", kind="numbers",
                help=f"Fault: the user speaks during the connection's Nth response ({BARGE_IN_AFTER}s of its audio "
                    "in).",
                when="response",
                says=lambda spec, how: f"the user speaks {format_duration(BARGE_IN_AFTER)} into response {spec} of a "
                    "connection (server VAD)",
            ),
        ),
    ),
    Action(
        kind="pace", moments=("response",), key="audio_pace", reader=FACTOR,
        words=lambda f: f"response {f.k}'s output audio at {float(f.value):g}x real time", canonical=SLOW_AUDIO,
        form="seconds", cost=12, points=lambda s: _at_responses(SLOW_AUDIO)(s) if s.audio else [],
        draw=_response_draw((1.5, 2.0, 4.0)), smaller=_halved(PACE_FLOOR), meets=_audio, audio=True,
        flags=(
            Flag(
                name="slow-audio", kind="numbers",
                help=f"Fault: the Nth response's output audio at {SLOW_AUDIO:g}x real time.", when="response",
                says=lambda spec, how: f"the output audio of response {spec} of a connection at "
                    f"{SLOW_AUDIO:g}x real time",
            ),
        ),
    ),
    Action(
        kind="burst", moments=("response",), key="audio_burst", reader=SHORT,
        words=lambda f: f"response {f.k}'s output audio held {_seconds(f)}, then at once", canonical=BURST_HOLD,
        form="seconds", cost=13, points=lambda s: _at_responses(BURST_HOLD)(s) if s.audio else [],
        draw=_response_draw((0.5, 1.0, 2.0)), smaller=_halved(SHRINK_FLOOR), meets=_audio, audio=True,
        flags=(
            Flag(
                name="burst-audio", kind="numbers",
                help=f"Fault: the Nth response's output audio held {BURST_HOLD:g}s, then at once.", when="response",
                says=lambda spec, how: f"the output audio of response {spec} of a connection held "
                    f"{format_duration(BURST_HOLD)}, then in one burst",
            ),
        ),
    ),
    Action(
        kind="stall", moments=("response",), key="stall_audio", reader=SHORT,
        words=lambda f: f"response {f.k}'s output audio stalls {_seconds(f)} after its first chunk, then resumes",
        canonical=STALL_AUDIO, form="seconds", cost=14,
        points=lambda s: _at_responses(STALL_AUDIO)(s) if s.audio else [], draw=_response_draw((1.0, 3.0, 8.0)),
        smaller=_halved(SHRINK_FLOOR), meets=_audio, audio=True,
        flags=(
            Flag(
                name="stall-audio", kind="numbers",
                help=f"Fault: the Nth response's output audio stalls {STALL_AUDIO:g}s after its first chunk, then "
                    "resumes.",
                when="response",
                says=lambda spec, how: f"the output audio of response {spec} of a connection stalls "
                    f"{format_duration(STALL_AUDIO)} after its first chunk, then resumes",
            ),
        ),
    ),
    Action(
        kind="error", moments=("event",), key="error", reader=TEXT,
        words=lambda f: f"error {f.value} answering the {_nth(f)}{f.target}", canonical=FAIL_CODES[0], form="word",
        cost=3, points=lambda s: [("event", spec, error_code(spec), 1) for spec in systematic_client(s)],
        draw=lambda s, rng: (lambda sc: ("event", sc[0], error_code(sc[0]), rng.randint(1, sc[1])))(
            rng.choice(_client(s))),
        link=True,
        flags=(
            Flag(
                name="error-on", kind="specs", help=f"Fault: answer {_SPEC} with an error.", when="event",
                says=lambda spec, how: f"answer {spec} with an error", value="fault_injected", side="client",
            ),
        ),
    ),
    Action(
        kind="expire", moments=("session",), key="expire", reader=LONG,
        words=lambda f: f"session_expired {_seconds(f)} after a connection opened", canonical=10.0, form="seconds",
        cost=6, points=lambda s: [("session", "", round(max(0.1, s.duration / 2), 3), 1)] if s.duration > 0 else [],
        draw=lambda s, rng: ("session", "", round(rng.uniform(0.1, max(0.2, s.duration)), 3), 1), link=True,
        flags=(
            Flag(
                name="expire-after", kind="duration", help="Fault: session_expired, close 1001 after this long (10s).",
                when="opened",
                says=lambda spec, how: f"session_expired and close 1001 {format_duration(float(spec))} after a "
                    "connection opens",
            ),
        ),
    ),
    Action(
        kind="latency", moments=("all",), key=None, reader=None,
        words=lambda f: f"ack latency {_seconds(f)} on {'every server event' if f.target == '*' else f.target}",
        canonical=CANONICAL_LATENCY, form="seconds", cost=0, points=_latency_points, draw=_latency_draw(LATENCIES),
        smaller=_halved(SHRINK_FLOOR), lots=2, link=True,
    ),
    Action(
        kind="jitter", moments=("all",), key=None, reader=None,
        words=lambda f: f"ack jitter +/-{_seconds(f)} on {'every server event' if f.target == '*' else f.target}",
        canonical=CANONICAL_JITTER, form="seconds", cost=7, points=lambda s: [("all", "*", CANONICAL_JITTER, 1)],
        draw=_latency_draw(LATENCIES), smaller=_halved(SHRINK_FLOOR), link=True,
    ),
    Action(
        kind="delay", moments=("event", "sent"), key="delay", reader=SHORT, words=_delay_words,
        canonical=CANONICAL_DELAY, form="seconds", cost=5,
        points=lambda s: [("event", spec, CANONICAL_DELAY, 1) for spec in systematic_client(s)]
        + [("sent", spec, CANONICAL_DELAY, 1) for spec in systematic_sent(s)],
        draw=_delay_draw, smaller=_halved(SHRINK_FLOOR), lots=2, link=True, once=False,
    ),
)  # fmt: skip
ACTION_BY_KIND: dict[str, Action] = {a.kind: a for a in ACTIONS}
#: The search's kinds, cheapest first.
BY_COST: tuple[Action, ...] = tuple(sorted(ACTIONS, key=lambda a: a.cost))


@dataclasses.dataclass(frozen=True)
class Key:
    """A script key that is a fault action, as the script reads it: its reader, the script moments it acts at,
    whether it fires once by default, whether it ends a response (how a message calls it), whether it acts on a
    response's audio, and whether only the fake model makes it (`model`)."""

    key: str
    reader: Reader
    moments: frozenset[str]
    once: bool
    ends: str | None
    audio: bool
    model: bool


def _keys() -> dict[str, Key]:
    out: dict[str, Key] = {}
    for key in dict.fromkeys(a.key for a in ACTIONS if a.key is not None):
        mine = [a for a in ACTIONS if a.key == key]
        readers = {id(a.reader) for a in mine}
        assert len(readers) == 1, f"the actions of script key {key} read it one way"
        reader = mine[0].reader
        assert reader is not None
        moments = frozenset(SCRIPT_MOMENT[m] for a in mine for m in a.moments)
        out[key] = Key(key, reader, moments, any(a.once for a in mine), next((a.ends for a in mine if a.ends), None),
                       any(a.audio for a in mine), not any(a.link for a in mine))  # fmt: skip
    return out


#: The script keys of the fault actions, in the declaration's order (the order a turn writes them in).
KEYS: dict[str, Key] = _keys()
#: The kinds a link to a real server can make.
LINK_KINDS: frozenset[str] = frozenset(a.kind for a in ACTIONS if a.link)
#: Every `serve` flag with its action, in the help's order.
FLAGS: tuple[tuple[Flag, Action], ...] = tuple((flag, a) for a in ACTIONS for flag in a.flags)
