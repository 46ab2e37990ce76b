"""The fault flags of `rtrace serve` (`FAULTS`), derived from the one declaration of each fault action
(`rtrace.net.faults.actions.ACTIONS`: a flag's name, kind, help, the `when` key its value fills and its words). `Faults`
holds the flags' values by field; its turns (`rtrace.net.faults.script.Schedule.of`) run in the one engine with a
script's own (`rtrace.net.faults.script.ConnectionScript`): one matcher, one fire counter, one note format. Also here:
the `TYPE[:ITEM_TYPE]` spec grammar and close codes.

Adding a fault: an `Action` in `rtrace.net.faults.actions` (a `Flag` in it when `serve` takes it as an option). The
command line, the pytest plugin, `describe` and the docs' option tables read the declaration.

A fault is a protocol answer like any other, decided without I/O; `rtrace.net.link.server` only executes it. Its note is
an emission in line with the events around it, so the trace shows it where it acts: a drop's note at the drop (the
events still queued never leave), a cut's after the last event sent, a failed response's just before its
`response.done`, an injected error's just before the error.

Close codes: a drop (`drop_on`, `drop_after`) ends the TCP connection without a close frame by default
(`ABNORMAL`, 1006: what a client sees when the network fails); `close_after` sends a close frame 1000. `close_code`
overrides both: 1006 (no close frame), 1005 (a close frame without a code), or any code a close frame may
carry (1000-1003, 1007-1014, 3000-4999; 1001 going away, 1011 server error, 1012 restart, 1013 try again later).
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

from ...core.catalog import CLIENT_EVENTS, ITEM_TYPES, ROLES, SERVER_EVENTS, normalize_type, side_of
from ...core.durations import parse_duration
from .actions import ABNORMAL, FLAGS, NO_STATUS, Action, Flag, FlagKind, seconds_text, valid_close_code

Side = Literal["client", "server"]
#: What a fault flag takes (`rtrace.net.faults.actions.FlagKind`).
Kind = FlagKind
#: One scenario-script turn as its TOML table (`rtrace.net.faults.script` reads it with the file's schema).
Table = dict[str, Any]
#: A fault flag (`rtrace.net.faults.actions.Flag`).
Fault = Flag

#: The fault flags, in the order the help and `describe` list them (and, within a moment, they are tried in).
FAULTS: tuple[Flag, ...] = tuple(flag for flag, _ in FLAGS)
FAULT_BY_NAME: dict[str, Flag] = {f.name: f for f in FAULTS}
_ACTION_OF: dict[str, Action] = {flag.name: action for flag, action in FLAGS}
#: The field of a flag's turn that holds what the flag was given (its notes' `spec`, its fires' counter): the `when`
#: key its value fills, or for a duration (`opened` turns) the action's key that holds it.
GIVEN: dict[str, str] = {flag.name: str(action.key) if flag.kind == "duration" else flag.when
                         for flag, action in FLAGS}  # fmt: skip

__all__ = ["ABNORMAL", "FAULTS", "NO_STATUS", "Faults", "seconds_text", "valid_close_code"]


def _not_given(kind: Kind) -> Any:
    return set() if kind == "numbers" else ([] if kind == "specs" else None)


class Faults:
    """The fault flags' values (one per flag of `FAULTS`, by its `field` name: `Faults(drop_on=[...])`), with
    `close_code` (`--close-code`: the close code of every closing fault; None: each flag's own, 1006 for a drop,
    1000 for `close_after`) and `times` (`--fault-times`: how many times each fault, each spec of it, fires in the
    life of a server; None: every time; the default 1 lets a client that reconnects and replays the event a drop
    matched get through the second time; `expire_after` counts when a connection is armed with it).
    `rtrace.net.faults.script.Schedule.of(faults)` compiles them to turns."""

    def __init__(self, close_code: int | None = None, times: int | None = 1, **values: Any) -> None:
        unknown = sorted(set(values) - {f.field for f in FAULTS})
        if unknown:
            raise TypeError(f"Faults has no flag {unknown[0]!r}")
        self.values: dict[str, Any] = {f.field: values.get(f.field, _not_given(f.kind)) for f in FAULTS}
        self.close_code = close_code
        self.times = times

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Faults) and (self.values, self.close_code, self.times) == (
            other.values, other.close_code, other.times)  # fmt: skip

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v!r}" for k, v in self.values.items() if v not in (None, [], set()))
        return f"Faults({given}, close_code={self.close_code!r}, times={self.times!r})"

    @classmethod
    def given(cls, values: dict[str, Any], close_code: int | None = None, times: int | None = 1) -> Faults:
        """The flags' values as the command line gives them (by field name; absent: not given), each read and
        checked as its kind says (`read`). Raises ValueError naming the option."""
        return cls(close_code, times, **{f.field: read(f, values.get(f.field)) for f in FAULTS})

    def tables(self) -> list[Table]:
        """The turns of every fault given, as script tables (`fault` names each; `times` as `--fault-times`)."""
        out: list[Table] = []
        for flag in FAULTS:
            for table in _tables(flag, self.values[flag.field], self.close_code):
                out.append({"fault": flag.name, **table, "times": self.times or 0})
        return out


def _tables(flag: Flag, value: Any, code: int | None) -> list[Table]:
    """The turns a value of `flag` compiles to, given the `--close-code`: one per spec or number, in order."""
    action = _ACTION_OF[flag.name]
    assert action.key is not None and action.reader is not None
    does = action.canonical if flag.value is None else flag.value
    if action.key == "close" and code is not None:
        does = code
    if flag.kind == "duration":
        return [] if value is None else [{"when": {flag.when: True}, action.key: action.reader.write(value)}]
    given = [] if value is None else ([value] if flag.kind == "count" else value)
    if flag.kind == "numbers":
        given = sorted(given)
    return [{"when": {flag.when: v}, action.key: action.reader.write(does)} for v in given]


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


