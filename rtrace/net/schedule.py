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
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Generator as GeneratorType
from typing import Any, Literal

from ..core.durations import format_duration
from .actions import ACTION_BY_KIND, BY_COST, CANONICAL_LATENCY, error_code
from .script import Schedule as ScriptSchedule
from .script import Turn, render, turn_of
from .values import check_fault, check_seed, comment_text

#: A search kind: the `kind` of an action of `rtrace.net.actions.ACTIONS`.
Kind = str
Moment = Literal["all", "event", "sent", "response", "session", "transcription"]
MOMENTS: tuple[str, ...] = ("all", "event", "sent", "response", "session", "transcription")

#: The rank of each kind of fault in the systematic phase (cheapest first: see the module docstring).
KIND_COST: dict[str, int] = {a.kind: a.cost for a in BY_COST}
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
        return ACTION_BY_KIND[self.kind].words(self)

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
        check_fault(fault, {a.kind: a.form for a in BY_COST}, MOMENTS)
        return fault






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
        """The faults that are script turns (all but latency and jitter: those with a script key), in turn order."""
        return [f for f in self.faults if ACTION_BY_KIND[f.kind].key is not None]

    def script(self) -> ScriptSchedule:
        """The endpoint's schedule value of this schedule's turns, built from the faults' actions
        (`rtrace.net.actions.Action.table`), no TOML read: each turn numbered and placed (`line`) as `script_toml`
        writes it, so a note names the line of the bug's script."""
        turns = [turn_of(ACTION_BY_KIND[f.kind].table(f), i + 1) for i, f in enumerate(self.turn_faults())]
        head = len(self._comments()) + 1
        placed = [dataclasses.replace(t, line=head + 1 + sum(_rendered_lines(u) for u in turns[:i]))
                  for i, t in enumerate(turns)]  # fmt: skip
        return ScriptSchedule(tuple(placed), (), "<schedule>")

    def _comments(self) -> list[str]:
        lines = ["# rtrace hunt schedule", f"# seed {self.seed}"]
        for f in self.faults:
            lines.append(f"# {comment_text(f.describe())}")
        flags = " ".join(self.serve_args())
        if flags:
            lines.append(f"# run with: rtrace serve {flags} --script THIS_FILE")
        return lines

    def script_toml(self) -> str:
        """The scenario script of this schedule (`rtrace serve --script`), written by the scripts' one writer
        (`rtrace.net.script.render`) under comments that say it; the latency is a flag (`serve_args`), written in
        its comments. `parse_script(s.script_toml())` reads back `s.script()`."""
        text = "\n".join(self._comments()) + "\n"
        return text + "\n" + render(self.script()) if self.turn_faults() else text

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


def _rendered_lines(turn: Turn) -> int:
    """How many lines the one writer gives a turn, with the blank line after it."""
    return render(ScriptSchedule((turn,))).count("\n") + 1


# -- the systematic phase --------------------------------------------------------------------------------------


def single_faults(surface: Surface) -> list[Fault]:
    """Each point of the surface once, with its canonical fault, cheapest first (see the module docstring): each
    action's points (`rtrace.net.actions.Action.points`), kinds in cost order, points in the order the client met
    them."""
    return [Fault(a.kind, *point) for a in BY_COST for point in a.points(surface)]  # type: ignore[arg-type]


def systematic(surface: Surface, seed: int = 0) -> list[Schedule]:
    """The systematic phase's schedules: one per fault of `single_faults`."""
    return [Schedule((f,), seed) for f in single_faults(surface)]


# -- the random phase ------------------------------------------------------------------------------------------


def random_fault(surface: Surface, rng: random.Random) -> Fault:
    """One fault drawn from the whole fault space of the surface (any point, any value, any k it reached): a kind
    by its lots among those the surface meets, then its point (`rtrace.net.actions.Action.draw`)."""
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
    """The one-step-smaller variants of a fault: its value one step smaller as its action says
    (`rtrace.net.actions.Action.smaller`: a latency or a delay halved, not below a floor; a close code stays: a
    normal close and a drop are different faults), k one less."""
    out = [dataclasses.replace(f, value=v) for v in ACTION_BY_KIND[f.kind].smaller(f.value)]
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
