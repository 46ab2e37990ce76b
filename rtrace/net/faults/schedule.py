"""The values of `rtrace hunt`'s search: a `Fault` acts at one *point* and a `Schedule` is one point of the search
(faults + seed) that compiles to the endpoint's one schedule value, scenario-script turns (`Schedule.script`:
`rtrace.net.faults.script.Turn`s built from the faults' actions, `rtrace.net.faults.actions`), plus the `serve` flags of
its latency and seed, so every schedule a hunt runs can be run again by hand (`script_toml`: `rtrace serve --script`).
Pure: no I/O, no clock; the search is `rtrace.net.hunt.search`, shrinking `rtrace.net.hunt.shrink`, bug keys
`rtrace.net.hunt.keys`.

A fault acts at: ack latency or jitter on every event, or on one server event type; a delay of, an `error` answer
to or a drop/close on the k-th client event of a type (with its item type); a delay before or a close after the
k-th server event of a type; the Nth response failed, cancelled by the server, rate-limited, or closed after its
`response.done`; `session_expired` at a time; the k-th input audio transcription failed; the user speaking during
the Nth response (barge-in); the Nth response's output audio slow or bursty: each kind an action of
`rtrace.net.faults.actions.ACTIONS`, which says it in words (`Fault.describe`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from ...core.durations import format_duration
from .actions import ACTION_BY_KIND, BY_COST
from .script import Schedule as ScriptSchedule
from .script import Turn, render, turn_of
from .values import check_fault, check_seed, comment_text

#: A search kind: the `kind` of an action of `rtrace.net.faults.actions.ACTIONS`.
Kind = str
Moment = Literal["all", "event", "sent", "response", "session", "transcription"]
MOMENTS: tuple[str, ...] = ("all", "event", "sent", "response", "session", "transcription")

#: The rank of each kind of fault in the systematic phase (cheapest first: `rtrace.net.hunt.search`).
KIND_COST: dict[str, int] = {a.kind: a.cost for a in BY_COST}


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
        (`rtrace.net.faults.actions.Action.table`), no TOML read: each turn numbered and placed (`line`) as
        `script_toml` writes it, so a note names the line of the bug's script."""
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
        (`rtrace.net.faults.script.render`) under comments that say it; the latency is a flag (`serve_args`), written in
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


__all__ = ["KIND_COST", "MOMENTS", "Fault", "Kind", "Moment", "Schedule"]
