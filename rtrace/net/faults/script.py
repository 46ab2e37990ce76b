"""Schedules: what the fake endpoint answers and breaks when, as scenario-script turns. One value (`Schedule`) that
`rtrace serve --script`, the fault flags (`rtrace.net.faults.flags`: each compiles to turns), `sweep`, the pytest plugin
and programs (`rtrace hunt`) build, print (`describe`), write (the trace header's `schedule`) and run
(`ConnectionScript`, the one engine: one matcher, one fire counter, one note format). Pure: no I/O but reading a file.

A schedule in code: `Schedule.of(Faults(drop_after=["response.done"]))` (flags), `load_script(path)` or
`parse_script(text)` (TOML), `a + b` (a's turns first: the flags before a script), `schedule.to_toml()` (the
file that runs it again: `parse_script(s.to_toml())` acts as `s`), `Schedule(turns, transcripts)` from `Turn`s.

A script is a TOML file: an optional `transcripts` list (what the user says in each audio turn of a connection,
as `--transcript`), then `[[turn]]` tables, tried in order. A turn has a `when` table (every condition in it
must hold) and actions; the first turn that matches acts, at most `times` times in the server's life (default:
every time, but once for a fault: a turn that closes, fails, errors, expires or does one of the server's own
behaviours below; `times = 0`: every time). A
response no turn answers gets the default script's answer (`rtrace.net.fake.responses.choose_reply`).

`when` picks one of five moments:

- a **response** (a `response.create`, or the automatic one after speech): `user = "TEXT"` (the last user text
  contains it, any case), `user_regex = "REGEX"` (Python syntax, searched;
  checked when the script is read: at most 1,000 characters, 20 nested groups, repetition counts to 1,000; a search
  over 50 ms is abandoned and does not match), `tool_output = true` or
  `= "TOOL"` (the response comes right after a `function_call_output`, of that tool's call; `user` conditions
  do not hold then, nor once a call answers the user's text), `response = N`
  (the connection's Nth response). Its actions: `text = "..."` (the answer; `{user}` is the user's text,
  `{output}` the tool output), `call = { name = "TOOL", arguments = { ... } }` or a list of them (calls after
  the text, if any; `arguments` a table or a JSON string, left out: made from the tool's schema as
  `rtrace.net.fake.tools` says), `fail = true` or `= "CODE"` (the response ends `failed` with that error code, no
  output; `rate_limit_exceeded` as a rate limit's), and `close = CODE` (close the socket right after its
  `response.done`). The server's own behaviours: `cancel = true` or `= "REASON"` (cancelled right after
  `response.created`, `output: []`, reason `turn_detected` - the one the server cancels for on its own - or
  `client_cancelled`), `rate_limit = true` or `= "tokens" | "requests"` (`rate_limits.updated` with none of that
  limit remaining, then `response.done` failed `rate_limit_exceeded`, the error's `type` the limit, worded as the
  API's 429 answers: no recording of the real server holds one); one of `fail`, `cancel`, `rate_limit`, and none
  with `text` or `call`. `barge_in = "200ms"` (the user starts speaking once that much of the response's output
  audio was sent, "0s": right after `response.created`: server VAD's `speech_started`, the response cancelled
  `turn_detected` when the session lets speech interrupt, `speech_stopped` 600 ms later, the turn committed as a
  user item and answered when the session creates responses; only in a session with server VAD: one that
  commits its own turns hears no speech and the turn does not hold), `audio_pace = 2.0` (its output audio at
  that many seconds per second of audio; 1: real time), `audio_burst = "1s"` (its output audio held that long
  before the first delta, then sent at once); these go with `text`, `call` and `close`. Every fault action's
  key, its moments and how its value is read are declared in `rtrace.net.faults.actions` (the docs' generated
  `faults.md` lists them all: `stall_audio = "5s"`, a stream stalled after its first chunk, is one more).
- a **client event** arriving: `event = "TYPE[:ITEM_TYPE]"` (as `--drop-on`). Actions, one of: `delay =
  "2s"` (a duration as the options take it, `rtrace.core.durations`: a bare number is a mistake; the answer to
  it goes out that much later; what follows waits behind it), `close = CODE` (drop the
  connection instead of answering it), `error = "CODE"` (answer it with an error instead).
- a **server event** sent: `sent = "TYPE[:ITEM_TYPE]"` (as `--drop-after`; `response.done:function_call` is
  the `response.done` of a call) and/or `sent_count = N` (once the connection has sent N server events, as
  `--close-after`). Actions, one of: `close = CODE` (close the socket right after it is sent), or
  `delay = "500ms"` (it, and everything after it, go out that much later).
- a connection **opened**: `opened = true`. Action: `expire = "10s"` (`session_expired` and close 1001 that
  long after, as `--expire-after`).
- an input audio **transcription**: `transcription = K` (the server's Kth, counted in its life; only in a session
  that transcribes). Action: `fail = true` or `= "CODE"`
  (`conversation.item.input_audio_transcription.failed` instead of its deltas and `completed`, the real error's
  shape: type `server_error`, the message naming the item; the item keeps no transcript).

`nth = K` with `event` or `sent`: only the K-th event it matches, counted in the server's life, sets the turn off
(`rtrace hunt`'s faults at the k-th event of a type).

`event` and `sent` are checked against the event catalog (a client event for `event`, a server one for `sent`;
what follows the colon an item type or a role), with the closest name on a typo. `connection = N` in any `when`
limits the turn to the server's Nth connection. Close codes are those of `--close-code` (1006: no close frame;
1005: a close frame without a code). A turn that closes, fails, errors, delays, expires, cancels, rate-limits,
barges in or paces audio is a fault (once by default) and writes a `fault.injected` note where it acts (a barge-in's
before its `speech_started`, a failed transcription's before its `.failed`, a pace's or a burst's after
`response.created`): `fault = "script"`, `spec = "turn N"`, its `line` and `action`; a turn with
`fault = "NAME"` (what the flag `--NAME` compiles to, e.g. `fault = "drop-on"`) is noted as that fault, its spec
what the flag was given (the field it fills, `flags.GIVEN`: such a turn must have it). An example is
`rtrace.cli.examples.EXAMPLE_SCRIPT`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable
from typing import Any, Literal

from ...core.inputs import MAX_NESTING, TooDeep, check_nesting, pattern_search, user_pattern, value_nesting_over
from .actions import KEYS
from .emission import Emission
from .flags import FAULT_BY_NAME, GIVEN, Faults, Table, check_spec, closing_words, matches

Moment = Literal["response", "event", "sent", "opened", "transcription"]

_WHEN = {
    "response": {"user", "user_regex", "tool_output", "response"},
    "event": {"event", "nth"},
    "sent": {"sent", "sent_count", "nth"},
    "opened": {"opened"},
    "transcription": {"transcription"},
}
#: The actions of each moment: a response's answer (`text`, `call`), and the fault actions declared for it
#: (`rtrace.net.faults.actions.KEYS`).
_ACTIONS: dict[str, set[str]] = {
    moment: {k for k, key in KEYS.items() if moment in key.moments} | ({"text", "call"} if moment == "response"
                                                                      else set())
    for moment in _WHEN
}
#: Response actions that end the response at once, with no output: none goes with an answer or another of them.
_ENDING = tuple(k for k, key in KEYS.items() if key.ends)
#: Response actions that act on its output audio.
_AUDIO = frozenset(k for k, key in KEYS.items() if key.audio)
#: The `fault` of a turn a script file wrote (the fault flags' turns are named after their flag).
SCRIPT = "script"


#: The key of `ConnectionScript.fired` that counts the server's input audio transcriptions (no turn's counter: those
#: hold a colon).
TRANSCRIPTIONS = "transcriptions"

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
    sent_count: int | None = None
    #: Only the Nth event `event` / `sent` matches (counted in the server's life) sets the turn off.
    nth: int | None = None
    #: The server's Kth input audio transcription (`when.transcription`, counted in the server's life).
    transcription: int | None = None
    text: str | None = None
    calls: tuple[Call, ...] = ()
    #: Its fault actions, (script key, value as read) in the declaration's order (`rtrace.net.faults.actions.KEYS`);
    #: each reads as an attribute of the turn (`turn.close`, None when it has none).
    acts: tuple[tuple[str, Any], ...] = ()
    #: How many times the turn may act in the server's life; None: every time.
    times: int | None = None
    #: What its notes call it: `script` (a turn of a file), or the fault flag it was compiled from (`drop-on`).
    fault: str = SCRIPT

    def __getattr__(self, name: str) -> Any:
        if name in KEYS:
            return dict(self.__dict__.get("acts", ())).get(name)
        raise AttributeError(name)

    @property
    def spec(self) -> str:
        """How notes name the turn: `turn N` (1-based, in order) for a script's, what the flag was given for a
        fault flag's (the field its flag fills, `rtrace.net.faults.flags.GIVEN`: its event spec, count, response
        number or expiry)."""
        if self.fault == SCRIPT:
            return f"turn {self.index}"
        return str(getattr(self, GIVEN[self.fault]))

    @property
    def counter(self) -> str:
        """The key its fires are counted by (shared by a server's connections)."""
        return f"{self.fault}:{self.spec}"

    def note(self, action: str, client: dict[str, Any] | None = None, server: dict[str, Any] | None = None) -> Emission:
        """The `fault.injected` note of this turn acting: on the `client` event that set it off, or after the
        `server` event it followed (named when a flag's spec matched it)."""
        note: dict[str, Any] = {"type": "fault.injected", "fault": self.fault, "spec": self.spec}
        if self.fault == SCRIPT:
            note.update(line=self.line, action=action)
        if client is not None:
            note["client_event_type"] = client.get("type")
            if isinstance(client.get("event_id"), str):
                note["client_event_id"] = client["event_id"]
        if server is not None and self.fault != SCRIPT and self.sent is not None:
            note["server_event_type"] = server.get("type")
        return Emission(meta=note)

    def closing(
        self, client: dict[str, Any] | None, flush: bool, server: dict[str, Any] | None = None
    ) -> list[Emission]:
        """Its note and its close (`flush=False`: at once, what is still queued is lost; `True`: after it)."""
        assert self.close is not None
        reason = f"script: {self.spec}" if self.fault == SCRIPT else f"fault: {self.fault}"
        note = dataclasses.replace(self.note("close", client, server), flush=flush)
        return [note, Emission(close=(self.close, reason), flush=flush)]

    def error_message(self) -> str:
        if self.fault == SCRIPT:
            return f"Injected by the script ({self.spec})."
        return f"Injected fault: error on {self.spec}."


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
    #: Whether the session detects speech (server VAD): a barge-in is heard only then.
    server_vad: bool = True


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Turns in the order they are tried, the transcripts, and the file they came from (see the module docstring)."""

    turns: tuple[Turn, ...] = ()
    transcripts: tuple[str, ...] = ()
    #: The script file, when one was read (`describe` names it).
    path: str | None = None

    @classmethod
    def of(cls, faults: Faults) -> Schedule:
        """The turns the fault flags compile to (`rtrace.net.faults.flags.FAULTS`), read with a script's schema."""
        return _schedule(faults.tables(), [], "<faults>", None)

    def __add__(self, other: Schedule) -> Schedule:
        """`self`'s turns, then `other`'s; transcripts: `self`'s, else `other`'s. Each turn keeps its line; a
        script's turns are numbered by their place among the script turns of the sum (`other`'s after `self`'s:
        notes name them apart and their fires are counted apart, as `to_toml` of the sum numbers them)."""
        offset = sum(1 for t in self.turns if t.fault == SCRIPT)
        moved = tuple(dataclasses.replace(t, index=t.index + offset) if t.fault == SCRIPT and offset else t
                      for t in other.turns)  # fmt: skip
        return Schedule(self.turns + moved, self.transcripts or other.transcripts, self.path or other.path)

    def __bool__(self) -> bool:
        return bool(self.turns or self.transcripts)

    def describe(self) -> list[str]:
        """What the schedule does, in words (`rtrace serve`'s start lines, each latency of `sweep`): the fault
        flags' turns one by one, then the script's turns counted."""
        flagged = [t for t in self.turns if t.fault != SCRIPT]
        words = []
        for turn in flagged:
            how = closing_words(turn.close) if turn.close is not None else ""
            words.append(FAULT_BY_NAME[turn.fault].says(turn.spec, how))
        counts = {t.times for t in flagged}
        if len(counts) == 1:
            lines = [f"faults ({_times(next(iter(counts)))} each): " + "; ".join(words)]
        elif flagged:
            lines = ["faults: " + "; ".join(f"{w} ({_times(t.times)})" for w, t in zip(words, flagged, strict=True))]
        else:
            lines = ["no fault"]
        scripted = sum(1 for t in self.turns if t.fault == SCRIPT)
        if scripted or (self.path is not None and not flagged):  # a script of transcripts only is named too
            lines.append(f"script {self.path or '(built)'} ({scripted} turns)")
        return lines

    def to_toml(self) -> str:
        """The script that runs this schedule again (`parse_script(s.to_toml())` acts as `s`; a script's turns
        are numbered by their place in it)."""
        return render(self)


def _times(times: int | None) -> str:
    return "every time" if times is None else ("once" if times == 1 else f"{times} times")


def _on(turn: Turn, connection: int) -> bool:
    return turn.connection is None or turn.connection == connection


def _holds(turn: Turn, ctx: ResponseContext) -> bool:
    if not _on(turn, ctx.connection):
        return False
    if turn.barge_in is not None and not ctx.server_vad:
        return False  # the client commits its own turns: the server hears no speech
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


def load_script(path: str | os.PathLike[str]) -> Schedule:
    """Read and check a script file. Raises ScriptError (`file:line: ...`)."""
    from ...core.inputs import UnreadableInput, read_side_input

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


def parse_script(text: str, path: str = "<script>") -> Schedule:
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
    return _schedule(raw_turns, transcripts, path, lines)


def turn_of(table: Table, index: int, line: int = 0) -> Turn:
    """The script turn `index` of a table a program built, its values already read (as
    `rtrace.net.faults.actions.Action.table` makes them: the hunt's faults), without the file's checks: its `when`
    conditions, its fault actions, its `times`."""
    when = table["when"]
    moment = next(m for m, keys in _WHEN.items() if (keys - {"nth"}) & set(when))
    conditions = {k: v for k, v in when.items() if k != "opened"}
    acts = tuple((key, table[key]) for key in KEYS if table.get(key) is not None)
    return Turn(index, line, moment, **conditions, acts=acts, times=table.get("times") or None)  # type: ignore[arg-type]


def _schedule(tables: list[Table], transcripts: list[str], path: str, lines: _Lines | None) -> Schedule:
    where = lines or _Lines("")
    turns = tuple(_turn(raw, k + 1, where, path) for k, raw in enumerate(tables))
    return Schedule(turns, tuple(transcripts), path if lines is not None else None)


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
    moments = [m for m, keys in _WHEN.items() if (keys - {"nth"}) & set(when)]  # nth counts an event or a sent
    if len(moments) > 1:
        raise fail("`when` mixes moments: use response conditions, `event`, `sent`, `opened` or `transcription`, "
                   "not several", "when")
    moment: Moment = moments[0] if moments else "response"  # type: ignore[assignment]
    if "nth" in when and moment not in ("event", "sent"):
        raise fail("`nth` counts the events an `event` or `sent` condition matches: give one", "when.nth")
    ordered = [k for k in raw if k not in ("when", "times", "fault")]  # in file order
    actions = set(ordered)
    allowed = _ACTIONS[moment]
    for key in sorted(actions):
        if key not in allowed:
            what = {"response": "a response", "event": "a client event", "sent": "a server event",
                    "opened": "an opened connection", "transcription": "a transcription"}[moment]  # fmt: skip
            raise fail(f"`{key}` is not an action on {what} (there: {', '.join(sorted(allowed))})", key)
    if not actions:
        raise fail(f"does nothing: give one of {', '.join(sorted(allowed))}")
    if moment != "response" and len(actions) > 1:
        raise fail(f"one action on an event, not {', '.join(ordered)}", ordered[1])
    ending = [k for k in ordered if k in _ENDING]
    if moment == "response" and ending and (len(ending) > 1 or actions & {"text", "call"}):
        word = KEYS[ending[0]].ends
        where = ending[1] if len(ending) > 1 else ending[0]
        raise fail(f"{word} response has no text and no call, and one end ({', '.join(ending)})", where)
    if ending and actions & _AUDIO:
        key = next(k for k in ordered if k in _AUDIO)
        raise fail(f"`{key}` acts on a response's output audio: `{ending[0]}` ends it with none", key)

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
    fields["sent_count"] = int_of("sent_count", when, "when.sent_count")
    fields["nth"] = int_of("nth", when, "when.nth")
    fields["transcription"] = int_of("transcription", when, "when.transcription")
    if "opened" in when and when["opened"] is not True:
        raise fail("`opened` must be true", "when.opened")
    fault = raw.get("fault", SCRIPT)
    if fault != SCRIPT and fault not in FAULT_BY_NAME:
        raise fail(f"`fault` must name a fault flag ({', '.join(FAULT_BY_NAME)}) or be {SCRIPT!r}", "fault")
    fields["fault"] = fault
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
    acts = []
    for key, declared in KEYS.items():  # each fault action read as it is declared (`rtrace.net.faults.actions`)
        if raw.get(key) is not None:
            try:
                acts.append((key, declared.reader.read(key, raw[key])))
            except ValueError as e:
                raise fail(str(e), key) from None
    fields["acts"] = tuple(acts)
    times = raw.get("times")
    if times is not None and (not isinstance(times, int) or isinstance(times, bool) or times < 0):
        raise fail("`times` must be a whole number (0: every time)", "times")
    turn = Turn(index, lines.turn(index), moment, **fields)
    if fault != SCRIPT and getattr(turn, GIVEN[fault]) is None:  # what its notes name it by, as the flag's turns
        field = GIVEN[fault]
        where = field if field in KEYS else f"when.{field}"
        raise fail(f"a `fault = {fault!r}` turn names what `--{fault}` is given: `{where}`", "fault")
    if times is None:
        times = default_times(turn.acts)
    return dataclasses.replace(turn, times=times or None)


def default_times(acts: tuple[tuple[str, Any], ...]) -> int:
    """How many times a turn with these actions fires when its `times` is not given: a fault once, an answer
    (or a delay) every time (0)."""
    return 1 if any(KEYS[key].once for key, _ in acts) else 0


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


# -- writing --------------------------------------------------------------------------------------------------


def render(schedule: Schedule) -> str:
    """`schedule` as a script's TOML text (see `Schedule.to_toml`)."""
    out: list[str] = []
    if schedule.transcripts:
        out.append(f"transcripts = [{', '.join(_value(t) for t in schedule.transcripts)}]")
    for turn in schedule.turns:
        if out:
            out.append("")
        out.append("[[turn]]")
        if turn.fault != SCRIPT:
            out.append(f"fault = {_value(turn.fault)}")
        when: dict[str, Any] = {
            "user": turn.user,
            "user_regex": turn.user_regex.pattern if turn.user_regex is not None else None,
            "tool_output": turn.tool_output,
            "response": turn.response,
            "event": turn.event,
            "sent": turn.sent,
            "sent_count": turn.sent_count,
            "nth": turn.nth,
            "opened": True if turn.moment == "opened" else None,
            "transcription": turn.transcription,
            "connection": turn.connection,
        }
        out.append("when = { " + ", ".join(f"{k} = {_value(v)}" for k, v in when.items() if v is not None) + " }")
        if turn.text is not None:
            out.append(f"text = {_value(turn.text)}")
        if turn.calls:
            calls = []
            for call in turn.calls:
                arguments = f", arguments = {_value(call.arguments)}" if call.arguments is not None else ""
                calls.append(f"{{ name = {_value(call.name)}{arguments} }}")
            out.append(f"call = [{', '.join(calls)}]")
        out.extend(f"{key} = {_value(KEYS[key].reader.write(value))}" for key, value in turn.acts)
        if (turn.times or 0) != default_times(turn.acts):
            out.append(f"times = {turn.times or 0}")
    return "\n".join(out) + "\n"


def _value(value: Any) -> str:
    """A TOML value: a string (basic, control characters escaped), a boolean, a whole number, a float (read back
    exactly)."""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    escaped = []
    for ch in str(value):
        if ch in ('"', "\\"):
            escaped.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            escaped.append(f"\\u{ord(ch):04x}")
        else:
            escaped.append(ch)
    return '"' + "".join(escaped) + '"'


# -- running ----------------------------------------------------------------------------------------------------


class ConnectionScript:
    """The schedule's turns on one connection: which acts when, and what it leaves (its note, its close). A turn
    acts when its `when` holds and it still fires: `fired` counts each turn's acts (by `Turn.counter`) and is
    shared by the server's connections, so a turn acts at most `times` times in the server's life. In each moment
    the first turn that holds and fires acts, in the schedule's order."""

    def __init__(self, schedule: Schedule | None, connection: int, fired: dict[str, int]) -> None:
        self.schedule = schedule or Schedule()
        self.connection = connection
        self.fired = fired
        mine = [t for t in self.schedule.turns if _on(t, connection)]
        self._by_moment: dict[str, list[Turn]] = {m: [t for t in mine if t.moment == m] for m in _WHEN}
        #: Server events sent on this connection so far (what `sent_count` counts).
        self.events_sent = 0
        #: The expiry an `opened` turn armed this connection with (seconds after it opened), and that turn.
        self.expiry: Turn | None = None
        #: Response turns that close the socket once their response is done, by response id.
        self.after_response: dict[str, Turn] = {}

    @property
    def transcripts(self) -> tuple[str, ...]:
        return self.schedule.transcripts

    def fires(self, turn: Turn) -> bool:
        """Whether a turn whose `when` holds acts now (its `times`); counts it when it does."""
        fired = self.fired.get(turn.counter, 0)
        if turn.times is not None and fired >= turn.times:
            return False
        self.fired[turn.counter] = fired + 1
        return True

    def opened(self) -> None:
        """On open: the first `opened` turn that fires arms the connection's expiry."""
        self.expiry = next((t for t in self._by_moment["opened"] if self.fires(t)), None)

    def on_event(self, event: dict[str, Any]) -> Turn | None:
        """The turn a client event sets off (before it is answered), if one does."""
        turns = self._by_moment["event"]
        return next((t for t in turns if t.event and matches(t.event, event) and self._nth(t) and self.fires(t)), None)

    def _nth(self, turn: Turn) -> bool:
        """For a turn with `nth`: counts the match, and holds on the Nth (in the server's life)."""
        if turn.nth is None:
            return True
        key = f"seen:{turn.counter}"
        self.fired[key] = seen = self.fired.get(key, 0) + 1
        return seen == turn.nth

    def on_transcription(self) -> Turn | None:
        """The turn the server's next input audio transcription sets off (`when.transcription`: counted in the
        server's life), if one does."""
        turns = self._by_moment["transcription"]
        if not turns:
            return None
        self.fired[TRANSCRIPTIONS] = n = self.fired.get(TRANSCRIPTIONS, 0) + 1
        return next((t for t in turns if t.transcription == n and self.fires(t)), None)

    def on_response(self, context: Callable[[], ResponseContext]) -> Turn | None:
        """The turn that answers a response (`context` is asked only when a response turn may hold)."""
        turns = self._by_moment["response"]
        if not turns:
            return None
        ctx = context()
        return next((t for t in turns if _holds(t, ctx) and self.fires(t)), None)

    def sent(self, out: list[Emission]) -> tuple[list[Emission], bool]:
        """The `sent` turns on emissions about to go out: (what goes out, whether the connection closes). A
        close comes right after the event it followed (what came after is not sent); a delay holds the event,
        and so everything after it."""
        turns = self._by_moment["sent"]
        if not turns:
            self.events_sent += sum(1 for em in out if em.event is not None)
            return out, False
        kept: list[Emission] = []
        for em in out:
            if em.event is None:
                kept.append(em)
                continue
            self.events_sent += 1
            turn = next((t for t in turns if self._follows(t, em.event) and self.fires(t)), None)
            if turn is not None and turn.delay is not None:
                kept.append(dataclasses.replace(turn.note("delay", None, em.event), hold=turn.delay))
                em = dataclasses.replace(em, hold=turn.delay)
            kept.append(em)
            if turn is not None and turn.close is not None:
                return [*kept, *turn.closing(None, True, em.event)], True
        return kept, False

    def _follows(self, turn: Turn, event: dict[str, Any]) -> bool:
        if turn.sent is not None and not matches(turn.sent, event):
            return False
        return (turn.sent_count is None or self.events_sent >= turn.sent_count) and self._nth(turn)
