"""Scenario scripts for `rtrace serve --script scenario.toml`: the file's one schema, checked when it is read (a
`ScriptError` names `file:line`), and which turn acts when. Pure: `rtrace.net.endpoint` carries the turns out.

A script is a TOML file: an optional `transcripts` list (what the user says in each audio turn of a connection,
as `--transcript`), then `[[turn]]` tables, tried in file order. A turn has a `when` table (every condition in it
must hold) and actions; the first turn that matches acts, at most `times` times in the server's life (default:
every time, but once for a turn that closes, fails or errors: a fault). A response no turn answers gets the
default script's answer (`rtrace.net.responses.choose_reply`).

`when` picks one of three moments:

- a **response** (a `response.create`, or the automatic one after speech): `user = "TEXT"` (the last user text
  contains it, any case), `user_regex = "REGEX"` (Python syntax, searched;
  checked when the script is read: at most 1,000 characters, 20 nested groups, repetition counts to 1,000; a search
  over 50 ms is abandoned and does not match), `tool_output = true` or
  `= "TOOL"` (the response comes right after a `function_call_output`, of that tool's call; `user` conditions
  do not hold then, nor once a call answers the user's text), `response = N`
  (the connection's Nth response). Its actions: `text = "..."` (the answer; `{user}` is the user's text,
  `{output}` the tool output), `call = { name = "TOOL", arguments = { ... } }` or a list of them (calls after
  the text, if any; `arguments` a table or a JSON string, left out: made from the tool's schema as
  `rtrace.net.tools` says), `fail = true` or `= "CODE"` (the response ends `failed` with that error code, no
  output), and `close = CODE` (close the socket right after its `response.done`).
- a **client event** arriving: `event = "TYPE[:ITEM_TYPE]"` (as `--drop-on`). Actions, one of: `delay =
  "2s"` (a duration as the options take it, `rtrace.core.durations`: a bare number is a mistake; the answer to
  it goes out that much later; what follows waits behind it), `close = CODE` (drop the
  connection instead of answering it), `error = "CODE"` (answer it with an error instead).
- a **server event** sent: `sent = "TYPE[:ITEM_TYPE]"` (as `--drop-after`; `response.done:function_call` is
  the `response.done` of a call). Actions, one of: `close = CODE` (close the socket right after it is sent), or
  `delay = "500ms"` (it, and everything after it, go out that much later).

`event` and `sent` are checked against the event catalog (a client event for `event`, a server one for `sent`;
what follows the colon an item type or a role), with the closest name on a typo. `connection = N` in any `when`
limits the turn to the server's Nth connection. Close codes are those of `--close-code` (1006: no close frame;
1005: a close frame without a code). A turn that closes, fails, errors or delays writes a `fault.injected` note
(`fault = "script"`, `spec = "turn N"`) where it acts. An example is `rtrace.net.examples.EXAMPLE_SCRIPT`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable
from typing import Any, Literal

from ..core.durations import parse_duration
from ..core.inputs import MAX_NESTING, TooDeep, check_nesting, pattern_search, user_pattern, value_nesting_over
from .faults import check_spec, matches, valid_close_code

Moment = Literal["response", "event", "sent"]

_WHEN = {
    "response": {"user", "user_regex", "tool_output", "response"},
    "event": {"event"},
    "sent": {"sent"},
}
_ACTIONS: dict[Moment, set[str]] = {
    "response": {"text", "call", "fail", "close"},
    "event": {"delay", "close", "error"},
    "sent": {"delay", "close"},
}


#: The most bytes a script is read to.
SCRIPT_BYTES = 1 << 20


class ScriptError(ValueError):
    """A script that cannot be used: the message starts with `file:line:`."""


@dataclasses.dataclass(frozen=True)
class Call:
    """A call a turn makes: the tool's name and its arguments' JSON text (None: made from the tool's schema)."""

    name: str
    arguments: str | None = None


@dataclasses.dataclass(frozen=True)
class Turn:
    """One `[[turn]]`: where it is, when it acts, and what it does (see the module docstring)."""

    index: int
    line: int
    moment: Moment
    user: str | None = None
    user_regex: Any = None  # a `regex` pattern (`core.inputs.user_pattern`: checked, searched in bounded time)
    tool_output: bool | str | None = None
    response: int | None = None
    connection: int | None = None
    event: str | None = None
    sent: str | None = None
    text: str | None = None
    calls: tuple[Call, ...] = ()
    fail: str | None = None
    close: int | None = None
    delay: float | None = None
    error: str | None = None
    #: How many times the turn may act in the server's life; None: every time.
    times: int | None = None

    @property
    def key(self) -> str:
        """How the turn is counted and named in notes: `turn N` (1-based, file order)."""
        return f"turn {self.index}"

    @property
    def is_fault(self) -> bool:
        return self.fail is not None or self.close is not None or self.error is not None or self.delay is not None

    def note(self, action: str) -> dict[str, Any]:
        """The `fault.injected` note of this turn acting."""
        return {"type": "fault.injected", "fault": "script", "spec": self.key, "line": self.line, "action": action}


@dataclasses.dataclass(frozen=True)
class ResponseContext:
    """What a response turn's `when` looks at."""

    connection: int
    response: int
    user_text: str | None
    #: Whether a `function_call` already answers that user text (then `user` conditions do not hold: a turn
    #: answers a user's words once, as the default script does).
    answered: bool
    #: The tool whose call the output that ends the context answers ("" when its call is not in sight); None:
    #: the context does not end with an output.
    tool_output: str | None


@dataclasses.dataclass(frozen=True)
class Script:
    """A loaded script: its turns by moment, in file order, and its transcripts."""

    path: str
    turns: tuple[Turn, ...]
    transcripts: tuple[str, ...] = ()

    def response_turn(self, ctx: ResponseContext, fires: Callable[[Turn], bool]) -> Turn | None:
        """The first response turn whose `when` holds for `ctx` and that `fires` (counts it, see `times`)."""
        for turn in self.turns:
            if turn.moment == "response" and _holds(turn, ctx) and fires(turn):
                return turn
        return None

    def event_turn(self, connection: int, event: dict[str, Any]) -> Turn | None:
        """The first client-event turn `event` sets off on this connection (not counted yet: see `times`)."""
        for turn in self.turns:
            if turn.moment == "event" and turn.event and _on(turn, connection) and matches(turn.event, event):
                return turn
        return None

    def sent_turns(self, connection: int) -> list[Turn]:
        return [t for t in self.turns if t.moment == "sent" and _on(t, connection)]


def _on(turn: Turn, connection: int) -> bool:
    return turn.connection is None or turn.connection == connection


def _holds(turn: Turn, ctx: ResponseContext) -> bool:
    if not _on(turn, ctx.connection):
        return False
    if turn.response is not None and turn.response != ctx.response:
        return False
    if turn.tool_output is not None:
        if ctx.tool_output is None:
            return False
        if isinstance(turn.tool_output, str) and turn.tool_output != ctx.tool_output:
            return False
    if turn.user is not None or turn.user_regex is not None:
        # a response after a tool output answers the tool, not the user's words again
        if ctx.user_text is None or ctx.answered or (ctx.tool_output is not None and turn.tool_output is None):
            return False
        if turn.user is not None and turn.user.lower() not in ctx.user_text.lower():
            return False
        if turn.user_regex is not None and not pattern_search(turn.user_regex, ctx.user_text):
            return False  # not found, or not within the time bound
    return True


# -- reading ----------------------------------------------------------------------------------------------


def load_script(path: str | os.PathLike[str]) -> Script:
    """Read and check a script file. Raises ScriptError (`file:line: ...`)."""
    from ..core.inputs import UnreadableInput, read_side_input

    shown = os.fspath(path)
    try:  # a FIFO or a device is refused by name, as every input of rtrace; a file over the size limit too
        data = read_side_input(path, "the script", SCRIPT_BYTES)
    except UnreadableInput as e:
        raise ScriptError(f"cannot read the script: {e}") from None
    except OSError as e:
        raise ScriptError(f"{shown}: cannot read the script: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScriptError(f"{shown}:1: the script is not UTF-8 ({e.reason} at byte {e.start})") from None
    return parse_script(text, shown)


def parse_script(text: str, path: str = "<script>") -> Script:
    """A script from its TOML text (see the module docstring). Raises ScriptError (`file:line: ...`)."""
    toml = _toml()
    try:
        check_nesting(text, path, "toml")  # before tomllib, which recurses
        doc = toml.loads(text)
        if value_nesting_over(doc):
            raise TooDeep(f"{path}:1: tables nested deeper than {MAX_NESTING} levels (dotted keys); refused")
    except TooDeep as e:
        raise ScriptError(str(e)) from None
    except toml.TOMLDecodeError as e:
        message = str(e)
        where = re.search(r"\(at line (\d+), column (\d+)\)", message)
        if where:
            message = message[: where.start()].strip()
            raise ScriptError(f"{path}:{where.group(1)}:{where.group(2)}: not TOML: {message}") from None
        raise ScriptError(f"{path}:1: not TOML: {message}") from None
    lines = _Lines(text)
    unknown = set(doc) - {"turn", "transcripts"}
    if unknown:
        key = sorted(unknown)[0]
        raise ScriptError(f"{path}:{lines.top(key)}: unknown key {key!r} (a script has `transcripts` and [[turn]])")
    transcripts = doc.get("transcripts", [])
    if not isinstance(transcripts, list) or not all(isinstance(t, str) for t in transcripts):
        raise ScriptError(f"{path}:{lines.top('transcripts')}: `transcripts` must be a list of strings")
    raw_turns = doc.get("turn", [])
    if not isinstance(raw_turns, list) or not all(isinstance(t, dict) for t in raw_turns):
        raise ScriptError(f"{path}:{lines.top('turn')}: turns are [[turn]] tables")
    turns = tuple(_turn(raw, k + 1, lines, path) for k, raw in enumerate(raw_turns))
    return Script(path, turns, tuple(transcripts))


def _toml() -> Any:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise ScriptError("scripts need Python 3.11 or later (tomllib), or the tomli package") from None
    return tomllib


class _Lines:
    """Where the keys of a TOML text are, to name lines in messages: top-level keys, each `[[turn]]` header, and
    the keys inside each turn (also those of a `[turn.when]` sub-table)."""

    def __init__(self, text: str) -> None:
        self.tops: dict[str, int] = {}
        self.turns: list[int] = []
        self.keys: list[dict[str, int]] = []
        table: str | None = None
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if line.startswith("[[") and line.split("#", 1)[0].strip().rstrip("]").strip("[ ") == "turn":
                self.turns.append(n)
                self.keys.append({})
                table = "turn"
                continue
            if line.startswith("["):
                name = line.split("#", 1)[0].strip().strip("[]").strip()
                table = name
                if name.startswith("turn.") and self.keys:
                    self.keys[-1].setdefault(name[5:], n)
                continue
            key = re.match(r"([A-Za-z0-9_\-\"']+)\s*=", line)
            if key is None:
                continue
            name = key.group(1).strip("\"'")
            if table is None:
                self.tops.setdefault(name, n)
            elif table == "turn" and self.keys:
                self.keys[-1].setdefault(name, n)
            elif table.startswith("turn.") and self.keys:
                self.keys[-1].setdefault(f"{table[5:]}.{name}", n)

    def top(self, key: str) -> int:
        return self.tops.get(key, 1)

    def turn(self, index: int, key: str | None = None) -> int:
        header = self.turns[index - 1] if index - 1 < len(self.turns) else 1
        if key is None or index - 1 >= len(self.keys):
            return header
        keys = self.keys[index - 1]
        return keys.get(key) or keys.get(key.split(".", 1)[0]) or header


def _turn(raw: dict[str, Any], index: int, lines: _Lines, path: str) -> Turn:
    def fail(message: str, key: str | None = None) -> ScriptError:
        return ScriptError(f"{path}:{lines.turn(index, key)}: turn {index}: {message}")

    when = raw.get("when")
    if not isinstance(when, dict) or not when:
        raise fail("needs a `when` table, e.g. when = { user = \"order\" }", "when")
    known_when = set().union(*_WHEN.values()) | {"connection"}
    for key in when:
        if key not in known_when:
            raise fail(f"unknown condition `when.{key}` (known: {', '.join(sorted(known_when))})", f"when.{key}")
    moments = [m for m, keys in _WHEN.items() if keys & set(when)]
    if len(moments) > 1:
        raise fail("`when` mixes moments: use response conditions, `event` or `sent`, not several", "when")
    moment: Moment = moments[0] if moments else "response"  # type: ignore[assignment]
    ordered = [k for k in raw if k not in ("when", "times")]  # in file order
    actions = set(ordered)
    allowed = _ACTIONS[moment]
    for key in sorted(actions):
        if key not in allowed:
            what = {"response": "a response", "event": "a client event", "sent": "a server event"}[moment]
            raise fail(f"`{key}` is not an action on {what} (there: {', '.join(sorted(allowed))})", key)
    if not actions:
        raise fail(f"does nothing: give one of {', '.join(sorted(allowed))}")
    if moment != "response" and len(actions) > 1:
        raise fail(f"one action on an event, not {', '.join(ordered)}", ordered[1])
    if "fail" in actions and actions & {"text", "call"}:
        raise fail("a failed response has no text and no call", "fail")

    fields: dict[str, Any] = {}

    def text_of(key: str, source: dict[str, Any], where: str) -> str | None:
        value = source.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise fail(f"`{key}` must be a non-empty string", where)
        return value

    def int_of(key: str, source: dict[str, Any], where: str, low: int = 1) -> int | None:
        value = source.get(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise fail(f"`{key}` must be a whole number of at least {low}", where)
        return value

    fields["user"] = text_of("user", when, "when.user")
    regex = text_of("user_regex", when, "when.user_regex")
    if regex is not None:
        try:
            fields["user_regex"] = user_pattern(regex)
        except ValueError as e:
            raise fail(f"`user_regex` is not a regular expression: {e}", "when.user_regex") from None
    output = when.get("tool_output")
    if output is not None and not (output is True or (isinstance(output, str) and output)):
        raise fail("`tool_output` must be true or a tool name", "when.tool_output")
    fields["tool_output"] = output
    fields["response"] = int_of("response", when, "when.response")
    fields["connection"] = int_of("connection", when, "when.connection")
    for key in ("event", "sent"):
        spec = text_of(key, when, f"when.{key}")
        if spec is not None and not re.fullmatch(r"[a-z_.]+(:[a-z_]+)?", spec):
            example = "conversation.item.create:function_call_output"
            raise fail(f"`{key}` must be TYPE or TYPE:ITEM_TYPE, e.g. {example}", f"when.{key}")
        if spec is not None:
            try:
                check_spec(spec, "client" if key == "event" else "server", f"`when.{key}` =")
            except ValueError as e:
                raise fail(str(e), f"when.{key}") from None
        fields[key] = spec

    fields["text"] = text_of("text", raw, "text")
    calls = raw.get("call")
    if calls is not None:
        listed = calls if isinstance(calls, list) else [calls]
        fields["calls"] = tuple(_call(c, fail) for c in listed)
        if not fields["calls"]:
            raise fail("`call` is an empty list", "call")
    failure = raw.get("fail")
    if failure is not None:
        if failure is True:
            fields["fail"] = "server_error"
        elif isinstance(failure, str) and failure:
            fields["fail"] = failure
        else:
            raise fail("`fail` must be true or an error code", "fail")
    close = raw.get("close")
    if close is not None:
        if not isinstance(close, int) or isinstance(close, bool) or not valid_close_code(close):
            codes = "1000-1003, 1007-1014, 3000-4999, 1005 (no code) or 1006 (no close frame)"
            raise fail(f"`close` must be a close code: {codes}", "close")
        fields["close"] = close
    delay = raw.get("delay")
    if delay is not None:
        if isinstance(delay, bool) or not isinstance(delay, (str, int, float)):
            raise fail('`delay` must be a duration: "2s", "250ms"', "delay")
        try:  # one grammar with the command line: a number needs a unit (0 excepted)
            seconds = parse_duration(delay if isinstance(delay, str) else repr(delay))
        except ValueError as e:
            raise fail(f"`delay`: {getattr(e, 'why', e)}" + (" (in quotes)" if not isinstance(delay, str) else ""),
                       "delay") from None  # fmt: skip
        if not seconds < 86400:
            raise fail('`delay` must be under a day: "2s", "250ms"', "delay")
        fields["delay"] = seconds
    fields["error"] = text_of("error", raw, "error")
    times = raw.get("times")
    if times is not None and (not isinstance(times, int) or isinstance(times, bool) or times < 0):
        raise fail("`times` must be a whole number (0: every time)", "times")
    turn = Turn(index, lines.turn(index), moment, **fields)
    if times is None:  # a fault fires once by default, an answer every time
        times = 1 if turn.fail is not None or turn.close is not None or turn.error is not None else 0
    return dataclasses.replace(turn, times=times or None)


def _call(raw: Any, fail: Any) -> Call:
    if not isinstance(raw, dict):
        raise fail("`call` must be a table { name = \"TOOL\", arguments = { ... } } or a list of them", "call")
    unknown = set(raw) - {"name", "arguments"}
    if unknown:
        raise fail(f"unknown key `call.{sorted(unknown)[0]}` (a call has `name` and `arguments`)", "call")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise fail("a call needs a tool `name`", "call")
    arguments = raw.get("arguments")
    if arguments is None:
        return Call(name)
    if isinstance(arguments, str):
        try:
            check_nesting(arguments, "`arguments`")
            value = json.loads(arguments)
        except ValueError as e:
            raise fail(f"`arguments` of {name} is not JSON: {e}", "call") from None
    else:
        value = arguments
    if not isinstance(value, dict):
        raise fail(f"`arguments` of {name} must be a table (a JSON object)", "call")
    if value_nesting_over(value):
        raise fail(f"`arguments` of {name} nest deeper than {MAX_NESTING} levels", "call")
    return Call(name, json.dumps(value, ensure_ascii=False, default=str))
