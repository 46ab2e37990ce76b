"""The fault space of `rtrace hunt`, as data: a `Schedule` here is one point of the search (faults + seed) that
compiles to the endpoint's one schedule value, scenario-script turns (`rtrace.net.script.Schedule`, through its
TOML: `script_toml`), plus the `serve` flags of its latency and seed, so every schedule a hunt runs can be run
again by hand (`rtrace serve --script`, `rtrace sweep --script`). Pure: no I/O, no clock; the hunt's runs are
`rtrace.net.hunt`.

- **The surface** (`Surface`, `surface_of`): what a client did in its clean run, read from the records of its
  trace: the client events it sent and the server events it received (`TYPE` or `TYPE:ITEM_TYPE`, with counts),
  its connections, whether it reconnected, its responses. Schedules are drawn from that surface only: a fault at
  an event the client never sees teaches nothing.
- **A fault** (`Fault`) acts at one *point*: ack latency or jitter on every event, or on one server event type; a
  delay of, an `error` answer to or a drop/close on the k-th client event of a type (with its item type); a delay
  before or a close after the k-th server event of a type; the Nth response failed, cancelled by the server,
  rate-limited, or closed after its `response.done`; `session_expired` at a time; the k-th input audio
  transcription failed; the user speaking during the Nth response (barge-in); the Nth response's output audio
  slow or bursty. The kinds a client's surface cannot meet are never drawn: a failed transcription only when its
  clean run had transcriptions, audio pacing only when its responses had audio, a barge-in only then and with
  server VAD.
- **The systematic phase** (`single_faults`): each point of the surface once, with one canonical fault, cheapest
  first (`Fault.cost`: the condition every network has first - latency - then drops, closes, error answers,
  failed responses, delays, expiry, then jitter and the server's own behaviours: cancels, rate limits, failed
  transcriptions, barge-ins, slow and bursty audio; within a kind, earlier points first).
- **The random phase** (`Generator`): seeded combinations of 1-3 faults, drawn fresh or mutated from the schedules
  that showed something new (a new bug key, a new rule, a new sequence of client reactions after a fault). Two
  generators with one seed, told the same outcomes, draw the same schedules.
- **Shrinking** (`shrink`): a coroutine-like generator of candidates (drop a fault, move a latency, a jitter, a
  delay, a barge-in's moment or a burst's hold toward 0 and a slow pace toward real time, k toward 1) that is
  told whether each still reproduces; what it returns reproduces and no single step of it does (1-minimal over
  those steps).
- **One bug, one entry** (`BugKey`, `bug_key`, `reaction`, `linked`): what a finding is about - its rule, the
  kinds of the items it names, the kinds of the faults that acted, the class of the client's reaction - never its
  lines or ids; and which findings of one run are one defect (`linked`: they name one item or call).
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Generator as GeneratorType
from typing import Any, Literal

from ..core.durations import format_duration
from .values import check_fault, check_seed, comment_text

Kind = Literal[
    "latency", "drop", "close", "error", "fail", "delay", "expire", "jitter", "cancel", "rate_limit",
    "transcription", "barge_in", "pace", "burst",
]  # fmt: skip
Moment = Literal["all", "event", "sent", "response", "session", "transcription"]
MOMENTS: tuple[str, ...] = ("all", "event", "sent", "response", "session", "transcription")

#: The rank of each kind of fault in the systematic phase (cheapest first: see the module docstring).
KIND_COST: dict[str, int] = {
    "latency": 0, "drop": 1, "close": 2, "error": 3, "fail": 4, "delay": 5, "expire": 6, "jitter": 7, "cancel": 8,
    "rate_limit": 9, "transcription": 10, "barge_in": 11, "pace": 12, "burst": 13,
}  # fmt: skip
#: The canonical value of each kind in the systematic phase.
CANONICAL_LATENCY = 0.05
CANONICAL_DELAY = 0.5
CANONICAL_CLOSE = 1011
CANONICAL_JITTER = 0.05
#: A barge-in this many seconds into a response's output audio; slow audio at this many seconds per second of
#: audio; bursty audio held this long.
CANONICAL_BARGE_IN = 0.2
CANONICAL_PACE = 2.0
CANONICAL_BURST = 1.0
#: Below this a pace is not shrunk further (1: real time).
PACE_FLOOR = 1.0
#: What the random phase draws for those.
BARGE_INS = (0.0, 0.1, 0.2, 0.5, 1.0)
PACES = (1.5, 2.0, 4.0)
BURSTS = (0.5, 1.0, 2.0)
#: The limits a rate-limited response names (`rate_limits.updated`), and the reason the server cancels for.
RATE_LIMITS = ("tokens", "requests")
CANCEL_REASON = "turn_detected"
TRANSCRIPTION_CODE = "server_error"
#: The server events that tell a client's responses had audio, and that its user audio was transcribed.
OUTPUT_AUDIO = "response.output_audio.delta"
TRANSCRIBED = "conversation.item.input_audio_transcription.completed"
DROP = 1006
#: Close codes the random phase draws (1006: no close frame; 1000 normal, 1001 going away, 1011 server error, 1012
#: restart, 1013 try again later).
CLOSE_CODES = (1006, 1000, 1001, 1011, 1012, 1013)
LATENCIES = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
DELAYS = (0.1, 0.5, 1.0, 2.0)
#: Below this a latency or a delay is not shrunk further (it is dropped, or kept).
SHRINK_FLOOR = 0.005

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
#: Failure codes a response may end with (`response.done` status `failed`).
FAIL_CODES = ("server_error", "rate_limit_exceeded")

#: Server events that answer a client event: where ack latency matters (declared in the catalog).
from ..core.catalog import ACK_TYPES  # noqa: E402

#: Client events the clean run may send many of and whose faults the systematic phase leaves to the random one.
_STREAMED = ("input_audio_buffer.append",)


def error_code(spec: str) -> str:
    """The code the real API answers the client event `spec` (`TYPE[:ITEM_TYPE]`) with when it refuses it."""
    return ERROR_CODES.get(spec) or ERROR_CODES.get(spec.partition(":")[0]) or "server_error"


# -- the surface -----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Surface:
    """What a client did in its clean run (see the module docstring). Specs are in order of first appearance."""

    #: (spec, count) of the client events sent (`conversation.item.create:function_call_output`, ...).
    client: tuple[tuple[str, int], ...] = ()
    #: (spec, count) of the server events received.
    server: tuple[tuple[str, int], ...] = ()
    connections: int = 0
    reconnects: bool = False
    #: Responses the server started (each `response.created`).
    responses: int = 0
    #: Seconds from the first record to the last.
    duration: float = 0.0
    #: Whether the session detected speech (server VAD) as it last said (`session.created` / `session.updated`).
    server_vad: bool = False

    @property
    def audio(self) -> bool:
        """Whether its responses had output audio."""
        return any(spec.partition(":")[0] == OUTPUT_AUDIO for spec, _ in self.server)

    @property
    def transcriptions(self) -> int:
        """How many input audio transcriptions it received."""
        return sum(n for spec, n in self.server if spec.partition(":")[0] == TRANSCRIBED)

    def to_json(self) -> dict[str, Any]:
        return {
            "server_vad": self.server_vad,
            "client_events": dict(self.client),
            "server_events": dict(self.server),
            "connections": self.connections,
            "reconnects": self.reconnects,
            "responses": self.responses,
            "duration": round(self.duration, 3),
        }


def event_spec(event: dict[str, Any], side: str) -> str:
    """`TYPE` or `TYPE:ITEM_TYPE`: the item's type (a message's role) of an item event, the first function call of
    a server `response.done`."""
    etype = str(event.get("type"))
    item = event.get("item")
    if isinstance(item, dict):
        sub = item.get("type")
        if sub == "message" and isinstance(item.get("role"), str):
            sub = item["role"]
        if isinstance(sub, str) and sub:
            return f"{etype}:{sub}"
    if side == "server" and etype == "response.done":
        response = event.get("response")
        output = response.get("output") if isinstance(response, dict) else None
        if isinstance(output, list) and any(isinstance(o, dict) and o.get("type") == "function_call" for o in output):
            return f"{etype}:function_call"
    return etype


def surface_of(records: Iterable[dict[str, Any]]) -> Surface:
    """The surface of a clean run from its trace's records (`{"t", "dir", "conn", "event"}`, no header)."""
    client: dict[str, int] = {}
    server: dict[str, int] = {}
    conns: set[int] = set()
    opened: set[int] = set()  # open now
    seen = {"reconnect": False}  # a connection opened once another had closed and none was open
    responses = 0
    vad = False
    first: float | None = None
    last = 0.0
    for rec in records:
        event = rec.get("event")
        if not isinstance(event, dict):
            continue
        t = rec.get("t")
        if isinstance(t, (int, float)):
            first = t if first is None else first
            last = float(t)
        if isinstance(rec.get("conn"), int):
            conns.add(rec["conn"])
            _track_connection(rec, event, opened, seen)
        side = rec.get("dir")
        if side == "client":
            spec = event_spec(event, "client")
            client[spec] = client.get(spec, 0) + 1
        elif side == "server":
            spec = event_spec(event, "server")
            server[spec] = server.get(spec, 0) + 1
            responses += event.get("type") == "response.created"
            if event.get("type") in ("session.created", "session.updated") and isinstance(event.get("session"), dict):
                vad = _server_vad(event["session"])
    return Surface(
        tuple(client.items()), tuple(server.items()), len(conns), seen["reconnect"], responses,
        max(0.0, last - (first or 0.0)), vad,
    )  # fmt: skip


def _track_connection(rec: dict[str, Any], event: dict[str, Any], opened: set[int], seen: dict[str, bool]) -> None:
    """Follow the connections open (`opened`): one opened while none is, after one was, is a reconnect; one opened
    beside another is a parallel connection, not a reconnect."""
    conn = rec["conn"]
    if rec.get("dir") == "meta" and event.get("type") == "connection.closed":
        opened.discard(conn)
        seen["closed"] = True
    elif conn not in opened and (rec.get("dir") != "meta" or event.get("type") == "connection.opened"):
        if not opened and seen.get("closed"):
            seen["reconnect"] = True
        opened.add(conn)


def _server_vad(session: dict[str, Any]) -> bool:
    """Whether a session's turn detection (GA `audio.input.turn_detection`, beta `turn_detection`) hears speech."""
    audio = session.get("audio")
    found: Any = session.get("turn_detection")
    if isinstance(audio, dict) and isinstance(audio.get("input"), dict) and "turn_detection" in audio["input"]:
        found = audio["input"]["turn_detection"]
    return isinstance(found, dict) and found.get("type") in ("server_vad", "semantic_vad")


# -- faults and schedules --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, order=True)
class Fault:
    """One fault at one point (see the module docstring).

    - `latency`: `target` `*` (every server event) or a server event type; `value` seconds.
    - `drop` / `close`: `moment` `event` (on the k-th client event `target`, before answering it) or `sent` (right
      after the k-th server event `target`); `value` the close code (1006: no close frame).
    - `error`: the k-th client event `target` answered with an `error` of code `value`.
    - `fail`: the `k`-th response ends `failed` with code `value`; `close` at `response`: the socket closes right
      after the `k`-th response's `response.done`, with code `value`.
    - `delay`: `event` (the answer to the k-th client event `target` goes out `value` seconds later) or `sent`
      (the k-th server event `target`, and what follows, go out `value` seconds later).
    - `expire`: `session_expired` and a close 1001 `value` seconds after a connection opened.
    - `jitter`: as `latency`, `value` the +/- seconds each event's delay varies by.
    - `cancel` / `rate_limit` at `response`: the `k`-th response cancelled by the server right after it was
      created (reason `value`), or rate-limited (the limit `value`, `tokens` or `requests`).
    - `transcription`: the `k`-th input audio transcription (in the server's life) fails with code `value`.
    - `barge_in` / `pace` / `burst` at `response`: in the `k`-th response, the user speaks `value` seconds into
      its output audio; its audio comes at `value` seconds per second; its audio is held `value` seconds, then
      sent at once.
    """

    kind: Kind
    moment: Moment
    target: str = ""
    value: float | int | str = 0
    k: int = 1

    @property
    def cost(self) -> tuple[int, int]:
        return (KIND_COST[self.kind], self.k)

    @property
    def point(self) -> tuple[str, str]:
        """Where it acts (its moment and target), whatever its value."""
        return (self.moment, self.target)

    @property
    def signature(self) -> str:
        """What kind of fault at what kind of moment, without values, targets or counts: part of a bug's key (a
        client that gives up on any drop has one bug, not one per event type)."""
        if self.kind in ("latency", "jitter"):
            return self.kind
        return f"{self.kind} {self.moment}"

    def describe(self) -> str:
        """The fault in words, one line."""
        nth = f"{_ordinal(self.k)} " if self.k > 1 else ""
        if self.kind in ("latency", "jitter"):
            where = "every server event" if self.target == "*" else self.target
            if self.kind == "jitter":
                return f"ack jitter +/-{format_duration(float(self.value))} on {where}"
            return f"ack latency {format_duration(float(self.value))} on {where}"
        if self.kind == "cancel":
            return f"response {self.k} cancelled by the server ({self.value})"
        if self.kind == "rate_limit":
            return f"response {self.k} rate-limited (no {self.value} remaining)"
        if self.kind == "transcription":
            return f"input audio transcription {self.k} failed ({self.value})"
        if self.kind == "barge_in" and not self.value:
            return f"the user speaks as response {self.k} starts (before any output)"
        if self.kind == "barge_in":
            return f"the user speaks {format_duration(float(self.value))} into response {self.k}'s audio"
        if self.kind == "pace":
            return f"response {self.k}'s output audio at {float(self.value):g}x real time"
        if self.kind == "burst":
            return f"response {self.k}'s output audio held {format_duration(float(self.value))}, then at once"
        if self.kind in ("drop", "close") and self.moment == "event":
            return f"close {self.value} on the {nth}{self.target} (before answering it)"
        if self.kind in ("drop", "close") and self.moment == "sent":
            return f"close {self.value} right after the {nth}{self.target}"
        if self.kind == "close":
            return f"close {self.value} after response {self.k}'s response.done"
        if self.kind == "error":
            return f"error {self.value} answering the {nth}{self.target}"
        if self.kind == "fail":
            return f"response {self.k} failed ({self.value})"
        if self.kind == "delay" and self.moment == "event":
            return f"answer to the {nth}{self.target} {format_duration(float(self.value))} late"
        if self.kind == "delay":
            return f"the {nth}{self.target} (and what follows) {format_duration(float(self.value))} late"
        return f"session_expired {format_duration(float(self.value))} after a connection opened"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        """A fault as `to_json` wrote it, each value checked (`check_fault`). Raises ValueError."""
        if not isinstance(data, dict):
            raise ValueError(f"a fault must be a table, not {type(data).__name__}")
        unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"a fault has no field {unknown[0]!r}")
        fault = cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})
        check_fault(fault, KIND_COST, MOMENTS)
        return fault




def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclasses.dataclass(frozen=True)
class Schedule:
    """One value for one run: its faults (in a canonical order) and its seed (the fake model's choices)."""

    faults: tuple[Fault, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "faults", tuple(sorted(set(self.faults), key=_fault_order)))

    @property
    def clean(self) -> bool:
        return not self.faults

    @property
    def cost(self) -> tuple[int, ...]:
        return (len(self.faults), *sorted(KIND_COST[f.kind] for f in self.faults))

    def latency(self, kind: Literal["latency", "jitter"] = "latency") -> tuple[float, dict[str, float]]:
        """The latency of every server event and by type (the `--latency` values); of `jitter`: the `--jitter`
        values."""
        default = 0.0
        by_type: dict[str, float] = {}
        for f in self.faults:
            if f.kind == kind:
                if f.target == "*":
                    default = float(f.value)
                else:
                    by_type[f.target] = float(f.value)
        return default, by_type

    def jitter(self) -> tuple[float, dict[str, float]]:
        """The jitter of every server event and by type (the `--jitter` values)."""
        return self.latency("jitter")

    def turn_faults(self) -> list[Fault]:
        """The faults that are script turns (all but latency and jitter), in turn order."""
        return [f for f in self.faults if f.kind not in ("latency", "jitter")]

    def script_toml(self) -> str:
        """The scenario script of this schedule (`rtrace serve --script`); the latency is a flag (`serve_args`),
        written in its comments."""
        lines = ["# rtrace hunt schedule", f"# seed {self.seed}"]
        for f in self.faults:
            lines.append(f"# {comment_text(f.describe())}")
        flags = " ".join(self.serve_args())
        if flags:
            lines.append(f"# run with: rtrace serve {flags} --script THIS_FILE")
        for f in self.turn_faults():
            lines += ["", "[[turn]]", *_turn_lines(f)]
        return "\n".join(lines) + "\n"

    def serve_args(self) -> list[str]:
        """The `rtrace serve` / `sweep` flags besides `--script`: latency, jitter and seed."""
        args: list[str] = []
        for flag, (default, by_type) in (("--latency", self.latency()), ("--jitter", self.jitter())):
            if default:
                args += [flag, format_duration(default)]
            for etype, value in sorted(by_type.items()):
                args += [flag, f"{etype}={format_duration(value)}"]
        if self.seed:
            args += ["--seed", str(self.seed)]
        return args

    def describe(self) -> str:
        return "; ".join(f.describe() for f in self.faults) or "no fault"

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "faults": [f.to_json() for f in self.faults]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Schedule:
        """A schedule as `to_json` wrote it, every value checked. Raises ValueError."""
        if not isinstance(data, dict):
            raise ValueError(f"a schedule must be a table, not {type(data).__name__}")
        unknown = sorted(set(data) - {"faults", "seed"})
        if unknown:
            raise ValueError(f"a schedule has no field {unknown[0]!r} (it has faults and seed)")
        faults = data.get("faults", [])
        if not isinstance(faults, list):
            raise ValueError(f"`faults` must be a list, not {type(faults).__name__}")
        return cls(tuple(Fault.from_json(f) for f in faults), check_seed(data.get("seed", 0)))

    def without(self, fault: Fault) -> Schedule:
        return Schedule(tuple(f for f in self.faults if f != fault), self.seed)

    def replacing(self, old: Fault, new: Fault) -> Schedule:
        return Schedule(tuple(new if f == old else f for f in self.faults), self.seed)


def _fault_order(f: Fault) -> tuple[Any, ...]:
    return (KIND_COST[f.kind], f.moment, f.target, f.k, str(f.value))


def _toml_string(text: str) -> str:
    return json.dumps(text)


def _turn_lines(f: Fault) -> list[str]:
    """The `[[turn]]` body of a fault that is a script turn."""
    if f.kind == "expire":
        return ["when = { opened = true }", f"expire = {_toml_string(format_duration(float(f.value)))}"]
    if f.kind == "transcription":
        return [f"when = {{ transcription = {f.k} }}", f"fail = {_toml_string(str(f.value))}"]
    if f.moment == "response":
        when = f"when = {{ response = {f.k} }}"
        if f.kind in ("fail", "cancel", "rate_limit"):
            return [when, f"{f.kind} = {_toml_string(str(f.value))}"]
        if f.kind in ("barge_in", "burst"):
            key = "barge_in" if f.kind == "barge_in" else "audio_burst"
            return [when, f"{key} = {_toml_string(format_duration(float(f.value)))}"]
        if f.kind == "pace":
            return [when, f"audio_pace = {float(f.value)!r}"]
        return [when, f"close = {int(f.value)}"]
    key = "event" if f.moment == "event" else "sent"
    nth = f", nth = {f.k}" if f.k > 1 else ""
    when = f"when = {{ {key} = {_toml_string(f.target)}{nth} }}"
    if f.kind in ("drop", "close"):
        return [when, f"close = {int(f.value)}"]
    if f.kind == "error":
        return [when, f"error = {_toml_string(str(f.value))}"]
    return [when, f"delay = {_toml_string(format_duration(float(f.value)))}", "times = 1"]


# -- the systematic phase --------------------------------------------------------------------------------------


def _systematic_sent(surface: Surface) -> list[str]:
    """The server events the systematic phase closes after or delays: all but streamed parts (deltas)."""
    return [spec for spec, _ in surface.server if not spec.partition(":")[0].endswith(".delta")]


def _ack_types(surface: Surface) -> list[str]:
    """The acknowledgement types the client received (latency is by event type, whatever the item)."""
    seen = dict.fromkeys(spec.partition(":")[0] for spec, _ in surface.server)
    return [etype for etype in seen if etype in ACK_TYPES]


def single_faults(surface: Surface) -> list[Fault]:
    """Each point of the surface once, with its canonical fault, cheapest first (see the module docstring)."""
    faults: list[Fault] = [Fault("latency", "all", "*", CANONICAL_LATENCY)]
    client = [spec for spec, _ in surface.client if spec not in _STREAMED]
    sent = _systematic_sent(surface)
    faults += [Fault("drop", "event", spec, DROP) for spec in client]
    faults += [Fault("close", "sent", spec, CANONICAL_CLOSE) for spec in sent]
    faults += [Fault("close", "response", "", CANONICAL_CLOSE, n) for n in range(1, surface.responses + 1)]
    faults += [Fault("error", "event", spec, error_code(spec)) for spec in client]
    faults += [Fault("fail", "response", "", FAIL_CODES[0], n) for n in range(1, surface.responses + 1)]
    faults += [Fault("latency", "all", etype, CANONICAL_LATENCY * 4) for etype in _ack_types(surface)]
    faults += [Fault("delay", "event", spec, CANONICAL_DELAY) for spec in client]
    faults += [Fault("delay", "sent", spec, CANONICAL_DELAY) for spec in sent]
    if surface.duration > 0:
        faults.append(Fault("expire", "session", "", round(max(0.1, surface.duration / 2), 3)))
    responses = range(1, surface.responses + 1)
    faults.append(Fault("jitter", "all", "*", CANONICAL_JITTER))
    faults += [Fault("cancel", "response", "", CANCEL_REASON, n) for n in responses]
    faults += [Fault("rate_limit", "response", "", RATE_LIMITS[0], n) for n in responses]
    faults += [Fault("transcription", "transcription", "", TRANSCRIPTION_CODE, k)
               for k in range(1, surface.transcriptions + 1)]  # fmt: skip
    if surface.audio and surface.server_vad:
        faults += [Fault("barge_in", "response", "", CANONICAL_BARGE_IN, n) for n in responses]
    if surface.audio:
        faults += [Fault("pace", "response", "", CANONICAL_PACE, n) for n in responses]
        faults += [Fault("burst", "response", "", CANONICAL_BURST, n) for n in responses]
    # stable: kinds in cost order, points in the order the client met them
    return sorted(faults, key=lambda f: KIND_COST[f.kind])


def systematic(surface: Surface, seed: int = 0) -> list[Schedule]:
    """The systematic phase's schedules: one per fault of `single_faults`."""
    return [Schedule((f,), seed) for f in single_faults(surface)]


# -- the random phase ------------------------------------------------------------------------------------------


def random_fault(surface: Surface, rng: random.Random) -> Fault:
    """One fault drawn from the whole fault space of the surface (any point, any value, any k it reached)."""
    client = list(surface.client) or [("session.update", 1)]
    server = list(surface.server) or [("session.updated", 1)]
    responses = max(1, surface.responses)
    kinds: list[str] = ["latency", "latency", "drop", "close", "close", "error", "fail", "delay", "delay", "expire",
                        "jitter", "cancel", "rate_limit"]  # fmt: skip
    if surface.transcriptions:
        kinds.append("transcription")
    if surface.audio and surface.server_vad:
        kinds.append("barge_in")
    if surface.audio:
        kinds += ["pace", "burst"]
    kind = rng.choice(kinds)
    if kind in ("latency", "jitter"):
        target = "*" if rng.random() < 0.6 else rng.choice(_ack_types(surface) or ["*"])
        return Fault(kind, "all", target, rng.choice(LATENCIES))  # type: ignore[arg-type]
    if kind == "cancel":
        return Fault("cancel", "response", "", CANCEL_REASON, rng.randint(1, responses))
    if kind == "rate_limit":
        return Fault("rate_limit", "response", "", rng.choice(RATE_LIMITS), rng.randint(1, responses))
    if kind == "transcription":
        return Fault("transcription", "transcription", "", TRANSCRIPTION_CODE, rng.randint(1, surface.transcriptions))
    if kind in ("barge_in", "pace", "burst"):
        values = {"barge_in": BARGE_INS, "pace": PACES, "burst": BURSTS}[kind]
        return Fault(kind, "response", "", rng.choice(values), rng.randint(1, responses))  # type: ignore[arg-type]
    if kind == "drop":
        spec, count = rng.choice(client)
        return Fault("drop", "event", spec, DROP, rng.randint(1, count))
    if kind == "close":
        code = rng.choice(CLOSE_CODES)
        if rng.random() < 0.25:
            return Fault("close", "response", "", code, rng.randint(1, responses))
        if rng.random() < 0.5:
            spec, count = rng.choice(client)
            return Fault("close", "event", spec, code, rng.randint(1, count))
        spec, count = rng.choice(server)
        return Fault("close", "sent", spec, code, rng.randint(1, count))
    if kind == "error":
        spec, count = rng.choice(client)
        return Fault("error", "event", spec, error_code(spec), rng.randint(1, count))
    if kind == "fail":
        return Fault("fail", "response", "", rng.choice(FAIL_CODES), rng.randint(1, responses))
    if kind == "delay":
        if rng.random() < 0.5:
            spec, count = rng.choice(client)
            return Fault("delay", "event", spec, rng.choice(DELAYS), rng.randint(1, count))
        spec, count = rng.choice(server)
        return Fault("delay", "sent", spec, rng.choice(DELAYS), rng.randint(1, count))
    duration = max(0.2, surface.duration)
    return Fault("expire", "session", "", round(rng.uniform(0.1, duration), 3))


#: How many faults a random schedule combines at most.
MAX_FAULTS = 3


class Generator:
    """The random phase: seeded schedules, fresh or mutated from those that showed something new (`observe`)."""

    def __init__(
        self, surface: Surface, seed: int, max_k: int | None = None, makes: Callable[[Fault], bool] | None = None
    ) -> None:
        self.surface = surface
        #: Only faults this allows are drawn (`--upstream`: what a link can make).
        self.makes = makes
        self.seed = seed
        self.rng = random.Random(seed)
        #: Schedules that showed something new, in the order they did.
        self.corpus: list[Schedule] = []
        self.seen: set[Any] = set()
        self.drawn: set[Schedule] = set()
        #: The largest k a fault at an event may have (None: any the surface reached).
        self.max_k = max_k

    def _fault(self) -> Fault:
        f = random_fault(self.surface, self.rng)
        for _ in range(100):
            if self.makes is None or self.makes(f):
                break
            f = random_fault(self.surface, self.rng)
        else:
            f = Fault("latency", "all", "*", CANONICAL_LATENCY)
        if self.max_k is not None and f.k > self.max_k and f.moment in ("event", "sent"):
            f = dataclasses.replace(f, k=self.max_k)
        return f

    def next(self) -> Schedule:
        """The next schedule (not one drawn before, when the space allows)."""
        for _ in range(50):
            schedule = self._draw()
            if schedule not in self.drawn and not schedule.clean:
                break
        self.drawn.add(schedule)
        return schedule

    def _draw(self) -> Schedule:
        rng = self.rng
        seed = rng.randrange(1, 1 << 31)
        if self.corpus and rng.random() < 0.6:
            base = rng.choice(self.corpus)
            faults = list(base.faults)
            move = rng.random()
            if move < 0.4 and len(faults) < MAX_FAULTS:
                faults.append(self._fault())
            elif move < 0.7 and faults:
                faults[rng.randrange(len(faults))] = self._fault()
            elif len(self.corpus) > 1:
                other = rng.choice(self.corpus)
                faults = (faults + list(other.faults))[:MAX_FAULTS]
            else:
                faults.append(self._fault())
            return Schedule(tuple(faults[:MAX_FAULTS]), seed)
        return Schedule(tuple(self._fault() for _ in range(rng.randint(1, MAX_FAULTS))), seed)

    def observe(self, schedule: Schedule, signals: Iterable[Any]) -> bool:
        """Tell the generator what a run of `schedule` showed (bug keys, rules, reaction sequences: any hashable
        values); a schedule that showed one never seen joins the corpus. Returns whether it did."""
        new = {s for s in signals if s not in self.seen}
        if not new:
            return False
        self.seen |= new
        self.corpus.append(schedule)
        return True


# -- what a finding is about -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, order=True)
class BugKey:
    """What a finding is about (see the module docstring): two findings with one key are one bug."""

    rule: str
    items: tuple[str, ...]
    faults: tuple[str, ...]
    reaction: str
    #: Where on the client's surface the first fault acted (`rtrace.net.bugs.POINTS`; "" when not read).
    point: str = ""

    def text(self) -> str:
        items = ",".join(self.items) or "-"
        where = f" at the {self.point}" if self.point else ""
        return f"{self.rule} on {items} under {' + '.join(self.faults) or 'no fault'}{where}, client {self.reaction}"

    @property
    def finding(self) -> tuple[str, tuple[str, ...]]:
        """What the shrinker keeps: the rule and the items, whatever the faults and the reaction."""
        return (self.rule, self.items)


#: The rule id of the findings "the client did not survive this fault".
SURVIVAL = "client-did-not-survive"


def item_kinds(ids: Mapping[str, Sequence[str]], kinds: dict[str, str]) -> tuple[str, ...]:
    """The kinds (item types, a message's role) of the items a finding names (`Finding.ids`), from `kinds` (item id
    -> kind, as `item_kinds_of` reads them from the trace); a finding naming only calls is about function calls."""
    found = {kinds[i] for i in ids.get("items", ()) if i in kinds}
    if not found and ids.get("call_ids"):
        found.add("function_call")
    return tuple(sorted(found))


def _items_in(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every item with an id a trace's events carry: an event's `item` (creates, adds) and a `response.done`'s
    outputs."""
    for rec in records:
        event = rec.get("event")
        if not isinstance(event, dict):
            continue
        response = event.get("response")
        outputs = response.get("output") if isinstance(response, dict) else None
        for item in [event.get("item"), *(outputs if isinstance(outputs, list) else ())]:
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                yield item


def item_kinds_of(records: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Item id -> kind of every item a trace's events carry (a message's kind is its role)."""
    kinds: dict[str, str] = {}
    for item in _items_in(records):
        kind = item.get("type")
        if kind == "message" and isinstance(item.get("role"), str):
            kind = item["role"]
        if isinstance(kind, str):
            kinds.setdefault(item["id"], kind)
    return kinds


def item_calls_of(records: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Item id -> call id of every function call and function call output a trace's events carry (an output is
    about its call: `linked` counts the two as one thing)."""
    calls: dict[str, str] = {}
    for item in _items_in(records):
        if isinstance(item.get("call_id"), str):
            calls.setdefault(item["id"], item["call_id"])
    return calls


def linked(ids: Sequence[Mapping[str, Sequence[str]]], calls: Mapping[str, str] | None = None) -> list[list[int]]:
    """The findings of one run (their `Finding.ids`, by index) grouped by what they name: two are in one group when
    they name one id of one kind (an item, a call, a client event, a response), an item counting as its call too
    (`calls`, item id -> call id: a deleted output and its unanswered call are about one call); the relation is
    closed transitively. Groups and their members in input order; every index in exactly one group. Findings of
    one group are one defect seen by several rules (a stale delete and the output it deleted)."""
    parent = list(range(len(ids)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple[str, str], int] = {}
    for i, named in enumerate(ids):
        names = {(kind, str(v)) for kind, values in named.items() for v in values}
        names |= {("call_ids", calls[v]) for v in named.get("items", ()) if calls and v in calls}
        for name in sorted(names):
            j = owner.setdefault(name, i)
            a, b = root(i), root(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(len(ids)):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def reaction(
    records: Sequence[dict[str, Any]], limit: int = 6, turns: int | None = None
) -> tuple[str, tuple[str, ...]]:
    """What the client did after the first fault note of a trace: (its class, its first `limit` actions). With
    `turns`, only the notes of the schedule's own turns count (script turns 1 to `turns`, as `acted` reads them:
    the faults of a user's script the schedule runs on are the client's world, not the fault it reacts to).

    Classes: `reconnected` (a new connection after the one the fault closed), `gave up` (the faulted connection
    closed and none after it: by the server - the fault - or by the client with nothing sent after the fault),
    `continued` (no close, or the client went on after a fault that did not close and closed at its own end).
    The actions are the specs of the client events after the fault, a new connection as `connect`."""
    start = next((i for i, r in enumerate(records) if _fault_note(r, turns) is not None), None)
    if start is None:
        return "continued", ()
    faulted = records[start].get("conn")
    closed = False
    gave_up = False
    reconnected = False
    sent = False  # a client event on the faulted connection after the fault, before it closed
    actions: list[str] = []
    for rec in records[start + 1 :]:
        etype = _etype(rec)
        if rec.get("dir") == "meta" and etype == "connection.closed" and rec.get("conn") == faulted and not closed:
            closed = True
            event = rec.get("event")
            gave_up = not sent or (isinstance(event, dict) and event.get("by") != "client")
        elif rec.get("dir") == "meta" and etype == "connection.opened":
            reconnected = reconnected or closed or rec.get("conn") != faulted
            if len(actions) < limit:
                actions.append("connect")
        elif rec.get("dir") == "client":
            sent = sent or (rec.get("conn") == faulted and not closed)
            if len(actions) < limit:
                actions.append(event_spec(rec["event"], "client"))
    kind = "reconnected" if reconnected else ("gave up" if gave_up else "continued")
    return kind, tuple(actions)


def _etype(rec: dict[str, Any]) -> str:
    event = rec.get("event")
    return str(event.get("type")) if isinstance(event, dict) else ""


def _fault_note(rec: dict[str, Any], turns: int | None = None) -> int | None:
    """The turn number of a `fault.injected` note (0: a note of no script turn), None for any other record; with
    `turns`, None also for a note of no script turn from 1 to `turns`."""
    event = rec.get("event")
    if rec.get("dir") != "meta" or not isinstance(event, dict) or event.get("type") != "fault.injected":
        return None
    spec = str(event.get("spec", ""))
    scripted = event.get("fault", "script") == "script" and spec.startswith("turn ") and spec[5:].isdigit()
    n = int(spec[5:]) if scripted else 0
    if turns is not None and not 1 <= n <= turns:
        return None
    return n


def acted(schedule: Schedule, records: Iterable[dict[str, Any]]) -> tuple[str, ...]:
    """The signatures of the faults of `schedule` that acted in its run: latency always (it delays every event it
    names), a turn when its note is in the trace (`fault = "script"`, `spec = "turn N"`, N its place in
    `turn_faults`)."""
    turns = schedule.turn_faults()
    fired = {n - 1 for rec in records if (n := _fault_note(rec, len(turns))) is not None}
    out = {f.signature for f in schedule.faults if f.kind in ("latency", "jitter")}
    out |= {turns[i].signature for i in fired if i < len(turns)}
    return tuple(sorted(out))


def bug_key(
    rule: str, ids: Mapping[str, Sequence[str]], kinds: dict[str, str], faults: tuple[str, ...], reacted: str
) -> BugKey:
    """The key of a finding of `rule` (its `ids`) in a run where `faults` acted and the client `reacted`."""
    return BugKey(rule, item_kinds(ids, kinds), faults, reacted)


# -- shrinking -------------------------------------------------------------------------------------------------


def _smaller_values(f: Fault) -> list[Fault]:
    """The one-step-smaller variants of a fault: a latency or a delay halved (not below `SHRINK_FLOOR`), k one
    less (a close code stays: a normal close and a drop are different faults)."""
    out: list[Fault] = []
    if f.kind in ("latency", "jitter", "delay", "barge_in", "burst") and isinstance(f.value, (int, float)):
        half = round(float(f.value) / 2, 4)
        if half >= SHRINK_FLOOR:
            out.append(dataclasses.replace(f, value=half))
        if f.kind == "barge_in" and f.value > 0:
            out.append(dataclasses.replace(f, value=0.0))  # before any output: the cheapest barge-in
    if f.kind == "pace" and isinstance(f.value, (int, float)):
        half = round(float(f.value) / 2, 4)
        if half >= PACE_FLOOR:
            out.append(dataclasses.replace(f, value=half))
    if f.k > 1:
        out.append(dataclasses.replace(f, k=1))
        if f.k > 2:
            out.append(dataclasses.replace(f, k=f.k - 1))
    return out


def shrink(
    schedule: Schedule, allow_clean: bool = False, exclude: Iterable[Schedule] = ()
) -> GeneratorType[Schedule, bool, Schedule]:
    """Shrink `schedule`: yields candidates, each answered with whether it still reproduces (`send`); returns the
    smallest that did (greedy, restarting after each success: drop a fault, then make one smaller). The result is
    1-minimal: no single step from it reproduces. A clean schedule is a candidate only with `allow_clean` (the
    finding was in the clean run). `exclude`: candidates never yielded (steps that held only by chance before)."""
    current = schedule
    tried: set[Schedule] = {schedule, *exclude}
    while True:
        moved = False
        for candidate in _candidates(current):
            if candidate in tried or (candidate.clean and not allow_clean):
                continue
            tried.add(candidate)
            if (yield candidate):
                current = candidate
                moved = True
                break
        if not moved:
            return current


def _candidates(schedule: Schedule) -> list[Schedule]:
    out = [schedule.without(f) for f in sorted(schedule.faults, key=lambda f: -KIND_COST[f.kind])]
    for f in schedule.faults:
        out += [schedule.replacing(f, g) for g in _smaller_values(f)]
    return out


__all__ = [
    "SURVIVAL",
    "BugKey",
    "Fault",
    "Generator",
    "Schedule",
    "Surface",
    "acted",
    "bug_key",
    "error_code",
    "event_spec",
    "item_calls_of",
    "item_kinds",
    "item_kinds_of",
    "linked",
    "reaction",
    "shrink",
    "single_faults",
    "surface_of",
    "systematic",
]
