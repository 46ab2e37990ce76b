"""The search of `rtrace hunt`: the surface of a client's clean run and the schedules drawn from it. Pure: no I/O,
no clock; what each kind of fault draws is its action's (`rtrace.net.faults.actions`), the values
`rtrace.net.faults.schedule`.

- **The surface** (`Surface`, `surface_of`): what a client did in its clean run, read from the records of its
  trace: the client events it sent and the server events it received (`TYPE` or `TYPE:ITEM_TYPE`, with counts),
  its connections, whether it reconnected, its responses. Schedules are drawn from that surface only: a fault at
  an event the client never sees teaches nothing; the kinds a surface cannot meet (`Action.meets`) are never
  drawn: a failed transcription only when its clean run had transcriptions, audio pacing only when its responses
  had audio, a barge-in only then and with server VAD.
- **The systematic phase** (`single_faults`): each point of the surface once, with one canonical fault, cheapest
  first (`Action.cost`: the condition every network has first - latency - then drops, closes, error answers,
  failed responses, delays, expiry, then jitter and the server's own behaviours: cancels, rate limits, failed
  transcriptions, barge-ins, slow and bursty audio; within a kind, earlier points first).
- **The random phase** (`Generator`): seeded combinations of 1-3 faults, drawn fresh or mutated from the schedules
  that showed something new (a new bug key, a new rule, a new sequence of client reactions after a fault). Two
  generators with one seed, told the same outcomes, draw the same schedules.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable
from typing import Any

from ..faults.actions import BY_COST, CANONICAL_LATENCY
from ..faults.schedule import Fault, Schedule

#: The server events that tell a client's responses had audio, and that its user audio was transcribed.
OUTPUT_AUDIO = "response.output_audio.delta"
TRANSCRIBED = "conversation.item.input_audio_transcription.completed"


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


# -- the systematic phase --------------------------------------------------------------------------------------


def single_faults(surface: Surface) -> list[Fault]:
    """Each point of the surface once, with its canonical fault, cheapest first (see the module docstring): each
    action's points (`rtrace.net.faults.actions.Action.points`), kinds in cost order, points in the order the client met
    them."""
    return [Fault(a.kind, *point) for a in BY_COST for point in a.points(surface)]  # type: ignore[arg-type]


def systematic(surface: Surface, seed: int = 0) -> list[Schedule]:
    """The systematic phase's schedules: one per fault of `single_faults`."""
    return [Schedule((f,), seed) for f in single_faults(surface)]


# -- the random phase ------------------------------------------------------------------------------------------


def random_fault(surface: Surface, rng: random.Random) -> Fault:
    """One fault drawn from the whole fault space of the surface (any point, any value, any k it reached): a kind
    by its lots among those the surface meets, then its point (`rtrace.net.faults.actions.Action.draw`)."""
    kinds = [a for a in BY_COST if a.meets(surface) for _ in range(a.lots)]
    action = rng.choice(kinds)
    return Fault(action.kind, *action.draw(surface, rng))  # type: ignore[arg-type]


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


__all__ = ["Generator", "Surface", "event_spec", "random_fault", "single_faults", "surface_of", "systematic"]
