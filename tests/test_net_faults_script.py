"""Scenario scripts: the schema checked with `file:line` messages, which turn acts when, and the turns carried out
by an endpoint (answers, calls, failures, closes, delays, errors, transcripts), each fault noted where it acts."""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from rtrace.core.audio import encode, tone
from rtrace.net.fake.endpoint import EndpointConnection, EndpointOptions, SharedCounters
from rtrace.net.faults.flags import Faults
from rtrace.net.faults.script import (
    Call,
    ConnectionScript,
    ResponseContext,
    Schedule,
    ScriptError,
    Turn,
    load_script,
    parse_script,
    render,
)

from .netdriver import Driver, done_of, types, user

LOOKUP = {
    "type": "function",
    "name": "lookup_order",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
}


def ctx(
    user_text: str | None = "hi", response: int = 1, tool_output: str | None = None, conn: int = 1
) -> ResponseContext:
    return ResponseContext(conn, response, user_text, False, tool_output)


def test_a_script_reads_into_turns_by_moment() -> None:
    script = parse_script(
        """
transcripts = ["hello there"]

[[turn]]
when = { user = "Order" }
call = [{ name = "lookup_order", arguments = { order_id = "42" } }, { name = "ping" }]

[[turn]]
when = { tool_output = true, connection = 2 }
text = "got {output}"

[[turn]]
when.response = 3
fail = "rate_limit_exceeded"
close = 1001

[[turn]]
when = { event = "conversation.item.create:function_call_output" }
delay = "1.5s"

[[turn]]
when = { sent = "response.output_item.done:function_call" }
close = 1006
times = 2
""",
        "s.toml",
    )
    assert script.transcripts == ("hello there",)
    order, output, third, slow, drop = script.turns
    assert (order.moment, order.line, order.calls) == (
        "response", 4, (Call("lookup_order", '{"order_id": "42"}'), Call("ping")),
    )  # fmt: skip
    assert order.times is None and order.fault == "script" and order.spec == "turn 1"
    assert (output.tool_output, output.connection, output.text) == (True, 2, "got {output}")
    assert (third.response, third.fail, third.close, third.times) == (3, "rate_limit_exceeded", 1001, 1)
    assert (slow.moment, slow.delay, slow.times) == ("event", 1.5, None)
    assert (drop.moment, drop.close, drop.times) == ("sent", 1006, 2)


def test_which_response_turn_answers() -> None:
    script = parse_script(
        """
[[turn]]
when = { user = "order", connection = 1 }
text = "one"
[[turn]]
when = { user_regex = "order \\\\d+" }
text = "two"
[[turn]]
when = { tool_output = "lookup_order" }
text = "three"
[[turn]]
when = { response = 2 }
text = "four"
"""
    )

    def answer(c: ResponseContext, fired: dict[str, int] | None = None, schedule: Schedule = script) -> Turn | None:
        return ConnectionScript(schedule, c.connection, fired or {}).on_response(lambda: c)

    def text(c: ResponseContext) -> str | None:
        turn = answer(c)
        return turn.text if turn is not None else None

    assert text(ctx("my ORDER please")) == "one"
    assert text(ctx("order 7", conn=2)) == "two"
    assert text(ctx("order", conn=2)) is None
    assert text(ctx("order 7", tool_output="lookup_order")) == "three"  # after an output, the tool's turn
    assert text(ctx("order 7", tool_output="other")) is None
    assert text(ctx(None, response=2)) == "four"
    assert answer(ResponseContext(1, 1, "order", True, None)) is None  # a call answered it
    assert text(ctx("order", response=2)) == "one"  # file order
    once = dataclasses.replace(script, turns=(dataclasses.replace(script.turns[0], times=1), *script.turns[1:]))
    spent = answer(ctx("order 7"), {"script:turn 1": 1}, once)  # turn 1 acted its times: the next
    assert spent is not None and spent.text == "two"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("[[turn]]\nwhen = { user = \"x\" \n", 2, "not TOML"),
        ("speed = 3\n", 1, "unknown key 'speed'"),
        ("transcripts = [1]\n", 1, "`transcripts` must be a list of strings"),
        ("\n[[turn]]\ntext = \"x\"\n", 2, "turn 1: needs a `when` table"),
        ("[[turn]]\nwhen = { usr = \"x\" }\ntext = \"a\"\n", 2, "unknown condition `when.usr`"),
        ("[[turn]]\nwhen = { user = \"x\", event = \"response.create\" }\ntext = \"a\"\n", 2, "mixes moments"),
        ("[[turn]]\nwhen = { user = \"x\" }\n\ndelay = \"1s\"\n", 4, "`delay` is not an action on a response"),
        ("[[turn]]\nwhen = { user = \"x\" }\n", 1, "does nothing"),
        ("[[turn]]\nwhen = { event = \"response.create\" }\ndelay = 1\nclose = 1000\n", 4, "one action"),
        ("[[turn]]\nwhen = { user = \"x\" }\ntext = \"a\"\nfail = true\n", 4, "a failed response has no text"),
        ("[[turn]]\nwhen = { user = \"x\" }\ntext = \"\"\n", 3, "`text` must be a non-empty string"),
        ("[[turn]]\nwhen = { response = 0 }\ntext = \"a\"\n", 2, "`response` must be a whole number of at least 1"),
        ("[[turn]]\nwhen = { user_regex = \"(\" }\ntext = \"a\"\n", 2, "not a regular expression"),
        ("[[turn]]\nwhen = { tool_output = 3 }\ntext = \"a\"\n", 2, "`tool_output` must be true or a tool name"),
        ("[[turn]]\nwhen = { event = \"Response Create\" }\nclose = 1000\n", 2, "must be TYPE or TYPE:ITEM_TYPE"),
        ("[[turn]]\nwhen = { user = \"x\" }\ncall = { args = 1 }\n", 3, "unknown key `call.args`"),
        ("[[turn]]\nwhen = { user = \"x\" }\ncall = { arguments = {} }\n", 3, "a call needs a tool `name`"),
        ("[[turn]]\nwhen = { user = \"x\" }\ncall = { name = \"t\", arguments = \"{\" }\n", 3, "is not JSON"),
        ("[[turn]]\nwhen = { user = \"x\" }\ncall = { name = \"t\", arguments = \"[]\" }\n", 3, "must be a table"),
        ("[[turn]]\nwhen = { user = \"x\" }\ncall = []\n", 3, "`call` is an empty list"),
        ("[[turn]]\nwhen = { user = \"x\" }\nfail = 3\n", 3, "`fail` must be true or an error code"),
        ("[[turn]]\nwhen = { user = \"x\" }\nclose = 1015\n", 3, "`close` must be a close code"),
        ("[[turn]]\nwhen = { event = \"response.create\" }\ndelay = \"soon\"\n", 3, "`delay`: not a duration"),
        ("[[turn]]\nwhen = { event = \"response.create\" }\ndelay = -1\n", 3, "`delay`: not a duration (no sign"),
        ("[[turn]]\nwhen = { event = \"response.create\" }\ndelay = 2\n", 3, "needs a unit: 2ms or 2s (in quotes)"),
        ("[[turn]]\nwhen = { event = \"response.create\" }\ndelay = \"2\"\n", 3, "needs a unit: 2ms or 2s"),
        ("[[turn]]\nwhen = { event = \"respons.create\" }\nclose = 1000\n", 2, "did you mean response.create?"),
        ("[[turn]]\nwhen = { sent = \"response.create\" }\nclose = 1000\n", 2, "response.create is a client event"),
        ("[[turn]]\nwhen = { event = \"conversation.item.create:fuction_call\" }\nclose = 1000\n", 2,
         "did you mean function_call?"),
        ("[[turn]]\nwhen = { user = \"x\" }\ntext = \"a\"\ntimes = -1\n", 4, "`times` must be a whole number"),
        ('[[turn]]\nwhen = { user = "a" }\ntext = "a"\n\n[[turn]]\ntext = "b"\n[turn.when]\nuser = 3\n', 8, "turn 2"),
        ("[[turn]]\nwhen = { response = 1 }\ncancel = \"later\"\n", 3, "`cancel` must be true or one of turn_detected"),
        ("[[turn]]\nwhen = { response = 1 }\nrate_limit = 5\n", 3, "`rate_limit` must be true or one of tokens"),
        ("[[turn]]\nwhen = { response = 1 }\nfail = true\n\ncancel = true\n", 5, "a failed response has no text"),
        ("[[turn]]\nwhen = { response = 1 }\ntext = \"a\"\nrate_limit = true\n", 4, "a rate-limited response"),
        ("[[turn]]\nwhen = { response = 1 }\ncancel = true\nbarge_in = \"1s\"\n", 4,
         "`barge_in` acts on a response's output audio: `cancel` ends it"),
        ("[[turn]]\nwhen = { response = 1 }\nbarge_in = 1\n", 3, "`barge_in`: a duration needs a unit"),
        ("[[turn]]\nwhen = { response = 1 }\naudio_burst = \"25h\"\n", 3, "`audio_burst` must be under a day"),
        ("[[turn]]\nwhen = { response = 1 }\naudio_pace = \"2x\"\n", 3, "`audio_pace` must be a number above 0"),
        ("[[turn]]\nwhen = { response = 1 }\naudio_pace = 0\n", 3, "`audio_pace` must be a number above 0"),
        ("[[turn]]\nwhen = { transcription = 0 }\nfail = true\n", 2, "`transcription` must be a whole number"),
        ("[[turn]]\nwhen = { transcription = 1 }\nerror = \"x\"\n", 3, "not an action on a transcription"),
        ("[[turn]]\nwhen = { transcription = 1, response = 2 }\nfail = true\n", 2, "mixes moments"),
    ],
)
def test_every_mistake_names_its_file_line_and_turn(text: str, line: int, message: str) -> None:
    with pytest.raises(ScriptError) as err:
        parse_script(text, "s.toml")
    assert str(err.value).startswith(f"s.toml:{line}:"), str(err.value)
    assert message in str(err.value)


def test_load_script_reports_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="cannot read the script"):
        load_script(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(ScriptError, match=r"bad.toml:1: the script is not UTF-8"):
        load_script(bad)
    good = tmp_path / "good.toml"
    good.write_text('[[turn]]\nwhen = { user = "x" }\ntext = "y"\n')
    assert load_script(good).turns[0].text == "y"


def test_load_script_refuses_a_fifo_or_a_device_without_blocking(tmp_path: Path) -> None:
    """As every input of rtrace (`core.loader.open_input`): `serve --script` never waits on a FIFO nor reads
    /dev/zero forever."""
    fifo = tmp_path / "s.toml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(ScriptError, match="not a regular file"):
            load_script(path)


# -- carried out by an endpoint ---------------------------------------------------------------------------


def scripted(text: str, conn: int = 1, shared: SharedCounters | None = None, **kw: Any) -> Driver:
    d = Driver(EndpointConnection(conn, EndpointOptions(**kw), parse_script(text), shared=shared))
    d.open()
    session = {"type": "realtime", "output_modalities": ["text"], "tools": [LOOKUP]}
    d.send({"type": "session.update", "session": session})
    return d


ORDER = """
[[turn]]
when = { user = "order" }
text = "Looking it up."
call = { name = "lookup_order" }

[[turn]]
when = { tool_output = "lookup_order" }
text = "Order for {user}: {output}"
"""


def test_a_turn_answers_with_text_then_a_call_and_the_output_with_its_text() -> None:
    d = scripted(ORDER)
    d.send(user("where is order 42?", "U"))
    done = done_of(d.send({"type": "response.create"}))["response"]
    message, call = done["output"]
    assert message["content"][0]["text"] == "Looking it up."
    assert (call["name"], call["arguments"]) == ("lookup_order", '{"order_id": "42"}')  # made from the schema
    fco = {"type": "function_call_output", "call_id": call["call_id"], "output": "shipped"}
    d.send({"type": "conversation.item.create", "item": fco})
    answer = done_of(d.send({"type": "response.create"}))["response"]["output"][0]
    assert answer["content"][0]["text"] == "Order for where is order 42?: shipped"
    d.send(user("hello", "V"))
    done = done_of(d.send({"type": "response.create"}))
    assert done["response"]["output"][0]["content"][0]["text"] == "You said: hello"


def test_fail_and_close_after_the_response_once_per_server() -> None:
    shared = SharedCounters()
    text = '[[turn]]\nwhen = { response = 1 }\nfail = "rate_limit_exceeded"\nclose = 1013\n'
    d = scripted(text, shared=shared)
    out = d.send({"type": "response.create", "event_id": "rc"})
    assert types(out) == ["response.created", "response.done"]
    details = done_of(out)["response"]["status_details"]
    assert done_of(out)["response"]["status"] == "failed" and details["error"]["code"] == "rate_limit_exceeded"
    assert d.meta == [
        {"type": "fault.injected", "fault": "script", "spec": "turn 1", "line": 1, "action": "fail",
         "client_event_type": "response.create", "client_event_id": "rc"},
        {"type": "fault.injected", "fault": "script", "spec": "turn 1", "line": 1, "action": "close"},
    ]  # fmt: skip
    assert d.closes == [(1013, "script: turn 1", True)] and d.conn.closed
    again = scripted(text, conn=2, shared=shared)
    assert done_of(again.send({"type": "response.create"}))["response"]["status"] == "completed"


def test_event_turns_delay_in_order_drop_or_answer_with_an_error() -> None:
    d = scripted('[[turn]]\nwhen = { event = "conversation.item.create:user" }\ndelay = "250ms"\n')
    ems = d.conn.receive(user("hi", "A"))
    assert ems[0].meta is not None and ems[0].meta["action"] == "delay" and ems[0].hold == 0.25
    assert [em.event["type"] for em in ems[1:] if em.event] == ["conversation.item.added", "conversation.item.done"]
    assert {em.hold for em in ems} == {0.25}
    d = scripted('[[turn]]\nwhen = { event = "response.create" }\nerror = "server_busy"\n')
    [err] = d.send({"type": "response.create", "event_id": "r1"})
    assert err["error"]["code"] == "server_busy" and err["error"]["event_id"] == "r1"
    assert d.send({"type": "response.create"})[0]["type"] == "response.created"  # an error turn fires once
    d = scripted('[[turn]]\nwhen = { event = "input_audio_buffer.commit" }\nclose = 1006\n')
    assert d.send({"type": "input_audio_buffer.commit"}) == []
    assert d.closes == [(1006, "script: turn 1", False)] and d.meta[-1]["action"] == "close"


def test_sent_turns_close_right_after_or_hold_a_server_event() -> None:
    d = scripted('[[turn]]\nwhen = { sent = "response.output_item.done:function_call" }\nclose = 1011\n')
    d.send(user("order 9?", "U"))
    out = d.send({"type": "response.create"})
    assert types(out)[-1] == "response.output_item.done"  # nothing after it: the socket closes
    assert d.closes == [(1011, "script: turn 1", True)]
    d = scripted('[[turn]]\nwhen = { sent = "response.created" }\ndelay = "500ms"\n')
    ems = d.conn.receive({"type": "response.create"})
    assert ems[0].hold == 0.5 and ems[0].meta is not None and ems[1].event is not None
    assert ems[1].event["type"] == "response.created" and ems[1].hold == 0.5 and ems[2].hold == 0


def test_script_transcripts_feed_the_server_vad() -> None:
    d = Driver(EndpointConnection(1, schedule=parse_script('transcripts = ["order 5 please"]\n')))
    d.open()
    loud = base64.b64encode(encode(tone(7200, 24000, 440), "pcm16")).decode()
    quiet = base64.b64encode(bytes(19200)).decode()  # 400 ms: the silence and the VAD's release
    d.send({"type": "input_audio_buffer.append", "audio": loud})
    out = d.send({"type": "input_audio_buffer.append", "audio": quiet})
    answer = done_of(out)["response"]["output"][0]
    assert answer["content"][0]["transcript"] == "You said: order 5 please"
    json.dumps(out)


# -- the schedule as one value: flags and a script, written out and read back ---------------------------------------

MIXED = """
transcripts = ["hi \\"there\\"\\u0007"]

[[turn]]
when = { user_regex = "order \\\\d+", connection = 2 }
text = "one {user}"
call = [{ name = "lookup_order", arguments = { order_id = "42" } }, { name = "ping" }]

[[turn]]
when = { tool_output = "lookup_order" }
fail = "rate_limit_exceeded"
close = 1005

[[turn]]
when = { sent = "response.done:function_call", sent_count = 3 }
delay = "0.25s"

[[turn]]
when = { opened = true, connection = 3 }
expire = "1.5m"
"""


def _shape(schedule: Schedule) -> list[dict[str, Any]]:
    """What a turn does, not where it was written."""
    out = []
    for turn in schedule.turns:
        fields = dataclasses.asdict(turn)
        fields.pop("index"), fields.pop("line")
        fields["user_regex"] = turn.user_regex.pattern if turn.user_regex is not None else None
        out.append(fields)
    return out


def test_every_fault_flag_and_a_script_write_out_as_a_script_that_reads_back_the_same() -> None:
    from rtrace.net.faults.flags import FAULTS, Faults

    given = {"client": ["conversation.item.create:function_call_output", "response.cancel"],
             "server": ["response.done"], "count": 7, "numbers": {3, 1}, "duration": 1e-05}  # fmt: skip
    flags = Faults(**{f.field: given[f.side or f.kind] for f in FAULTS}, close_code=4000, times=2)
    schedule = Schedule.of(flags) + parse_script(MIXED, "mixed.toml")
    assert {t.fault for t in schedule.turns} == {f.name for f in FAULTS} | {"script"}  # every flag compiled
    assert [t.spec for t in schedule.turns if t.fault == "fail-response"] == ["1", "3"]
    assert [t.spec for t in schedule.turns if t.fault == "expire-after"] == ["1e-05"]
    assert schedule.path == "mixed.toml" and schedule.transcripts == ('hi "there"\x07',)
    text = schedule.to_toml()
    again = parse_script(text, "again.toml")
    assert _shape(again) == _shape(schedule) and again.transcripts == schedule.transcripts
    assert again.to_toml() == text
    every = Schedule.of(Faults(drop_on=["response.create"], times=None))
    assert parse_script(every.to_toml()).turns[0].times is None


def test_flags_and_a_script_mix_in_one_schedule_flags_first(tmp_path: Path) -> None:
    from rtrace.net.link.server import describe, options_from_cli

    path = tmp_path / "s.toml"
    path.write_text('[[turn]]\nwhen = { event = "conversation.item.create" }\nerror = "nope"\ntimes = 0\n')
    options = options_from_cli(drop_on=["conversation.item.create:function_call_output"], script=str(path))
    assert [t.fault for t in options.schedule.turns] == ["drop-on", "script"]
    assert describe(options)[1:] == [
        "faults (once each): drop the socket (no close frame, 1006) when the client sends "
        "conversation.item.create:function_call_output",
        f"script {path} (1 turns)",
    ]
    d = Driver(EndpointConnection(1, schedule=options.schedule))
    d.open()
    [err] = d.send(user("x", "A"))  # the script's turn
    assert err["error"]["code"] == "nope" and d.meta[-1]["spec"] == "turn 1"
    out = d.send({"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "c",
                                                                 "output": "x"}})  # fmt: skip
    assert out == [] and d.meta[-1]["fault"] == "drop-on" and d.closes == [(1006, "fault: drop-on", False)]


def test_a_fault_turn_written_by_hand_is_checked() -> None:
    for text, message in (
        ('[[turn]]\nfault = "bogus"\nwhen = { event = "response.create" }\nclose = 1000\n', "`fault` must name"),
        ('[[turn]]\nfault = "drop-on"\nwhen = { user = "x" }\ntext = "a"\n', "names what `--drop-on` is given"),
        ('[[turn]]\nwhen = { opened = 1 }\nexpire = "1s"\n', "`opened` must be true"),
        ('[[turn]]\nwhen = { opened = true }\nclose = 1000\n', "not an action on an opened connection"),
        ('[[turn]]\nwhen = { sent_count = 0 }\nclose = 1000\n', "`sent_count` must be a whole number of at least 1"),
    ):
        with pytest.raises(ScriptError, match=message):
            parse_script(text, "s.toml")


def test_nth_sets_a_turn_off_on_the_kth_matching_event_only() -> None:
    from rtrace.net.faults.script import ConnectionScript

    schedule = parse_script('[[turn]]\nwhen = { event = "response.create", nth = 2 }\nclose = 1006\n'
                            '[[turn]]\nwhen = { sent = "response.done", nth = 3 }\nclose = 1011\n')  # fmt: skip
    assert parse_script(schedule.to_toml()).turns[0].nth == 2
    fired: dict[str, int] = {}
    first, second = ConnectionScript(schedule, 1, fired), ConnectionScript(schedule, 2, fired)
    create = {"type": "response.create"}
    assert first.on_event(create) is None
    assert second.on_event(create) is not None  # the 2nd in the server's life, on another connection
    assert second.on_event(create) is None
    from rtrace.net.fake.wire import Emission

    done = Emission(event={"type": "response.done", "response": {"output": []}})
    closes = [first.sent([done])[1] for _ in range(4)]
    assert closes == [False, False, True, False]


def test_nth_needs_an_event_or_sent_condition() -> None:
    with pytest.raises(ScriptError, match="`nth` counts the events"):
        parse_script("[[turn]]\nwhen = { nth = 2 }\nclose = 1006\n")


def test_two_scripts_added_number_their_turns_apart_so_each_fires_and_is_noted_as_itself() -> None:
    """A hunt's fault turns on top of a user's script: the sum numbers the second script's turns after the
    first's (as its TOML does), so a user's turn that answered every response does not use up the fires of the
    hunt's turn 1, and each note names its own turn."""
    from rtrace.net.faults.flags import Faults

    faults = parse_script('[[turn]]\nwhen = { event = "response.create", nth = 2 }\nclose = 1006\n', "<schedule>")
    users = parse_script('[[turn]]\nwhen = { user = "hello" }\ntext = "hi there"\n', "agent.toml")
    schedule = faults + users
    assert [t.index for t in schedule.turns] == [1, 2] and [t.line for t in schedule.turns] == [1, 1]
    assert [t.index for t in parse_script(schedule.to_toml()).turns] == [1, 2]
    assert [t.index for t in (Schedule.of(Faults(drop_on=["response.create"])) + users).turns] == [1, 1]
    d = Driver(EndpointConnection(1, schedule=schedule))
    d.open()
    d.send(user("hello", "A"))
    first = d.send({"type": "response.create"})
    assert "hi there" in json.dumps(done_of(first)) and not d.closes
    d.send({"type": "response.create"})  # the 2nd: the hunt's turn acts, as itself
    assert d.closes and d.closes[0][0] == 1006 and d.meta[-1]["spec"] == "turn 1"


# -- the server's own behaviours: cancels, rate limits, failed transcriptions, barge-ins, slow and bursty audio ------

HEARD = {"transcription": {"model": "whisper-1"}, "turn_detection": {"type": "server_vad"}}
VOICE = {"type": "realtime", "output_modalities": ["audio"], "audio": {"input": HEARD}}


def voiced(text: str, session: dict[str, Any] = VOICE, **kw: Any) -> Driver:
    kw.setdefault("rate_limits_after_done", False)
    d = Driver(EndpointConnection(1, EndpointOptions(**kw), parse_script(text)))
    d.open()
    d.send({"type": "session.update", "session": session})
    return d


def test_the_server_cancels_the_nth_response_before_any_output_as_the_real_server_does() -> None:
    d = scripted('[[turn]]\nwhen = { response = 2 }\ncancel = true\n')
    assert done_of(d.send({"type": "response.create"}))["response"]["status"] == "completed"
    out = d.send({"type": "response.create", "event_id": "rc2"})
    assert types(out) == ["response.created", "response.done", "rate_limits.updated"]  # as after every response
    done = done_of(out)["response"]
    # the realapi barge-in recording: cancelled before any output, `output: []`, reason turn_detected
    assert (done["status"], done["status_details"], done["output"]) == (
        "cancelled", {"type": "cancelled", "reason": "turn_detected"}, []
    )  # fmt: skip
    assert done["usage"]["output_tokens"] == 0
    assert d.meta[-1] == {
        "type": "fault.injected", "fault": "script", "spec": "turn 1", "line": 1, "action": "cancel",
        "client_event_type": "response.create", "client_event_id": "rc2",
    }  # fmt: skip
    assert d.send({"type": "response.create"})[0]["type"] == "response.created"  # nothing stays active


def test_a_rate_limited_response_says_no_tokens_remain_then_fails_rate_limit_exceeded() -> None:
    d = scripted('[[turn]]\nwhen = { response = 1 }\nrate_limit = "requests"\n')
    out = d.send({"type": "response.create"})
    assert types(out) == ["response.created", "rate_limits.updated", "response.done"]
    assert out[1]["rate_limits"] == [{"name": "requests", "limit": 20000, "remaining": 0, "reset_seconds": 1.2}]
    done = out[2]["response"]
    error = done["status_details"]["error"]
    assert done["status"] == "failed" and done["output"] == [] and done["status_details"]["type"] == "failed"
    assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
    assert error["message"].startswith("Rate limit reached for gpt-realtime on requests per min (RPM)")
    assert d.meta[-1]["action"] == "rate_limit"
    # `fail = "rate_limit_exceeded"` is the same failure (the tokens limit)
    failed = done_of(scripted('[[turn]]\nwhen = { response = 1 }\nfail = "rate_limit_exceeded"\n').send(
        {"type": "response.create"}))["response"]["status_details"]["error"]  # fmt: skip
    assert (failed["type"], failed["code"]) == ("tokens", "rate_limit_exceeded")


def loud_then_quiet(d: Driver) -> list[dict[str, Any]]:
    """One spoken user turn (server VAD): 300 ms of tone, then 400 ms of silence."""
    loud = base64.b64encode(encode(tone(7200, 24000, 440), "pcm16")).decode()
    d.send({"type": "input_audio_buffer.append", "audio": loud})
    return d.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(bytes(19200)).decode()})


def test_the_kth_transcription_fails_instead_of_completing_with_the_real_error_shape() -> None:
    d = voiced('transcripts = ["one", "two"]\n[[turn]]\nwhen = { transcription = 1 }\nfail = true\n')
    first = loud_then_quiet(d)
    failed = [e for e in first if e["type"].startswith("conversation.item.input_audio_transcription")]
    assert [e["type"] for e in failed] == ["conversation.item.input_audio_transcription.failed"]  # no delta
    item = failed[0]["item_id"]
    assert failed[0]["error"] == {"type": "server_error", "code": "server_error", "param": None,
                                  "message": f"Input transcription failed for item '{item}'."}  # fmt: skip
    assert failed[0]["content_index"] == 0
    note = next(m for m in d.meta if m.get("type") == "fault.injected")
    assert note["action"] == "fail" and note["spec"] == "turn 1"
    noted_at = [t for t, e in d.sent].index(next(t for t, e in d.sent if e is failed[0]))
    assert noted_at > 0
    second = loud_then_quiet(d)  # the 2nd transcription of the server completes
    assert "conversation.item.input_audio_transcription.completed" in types(second)
    assert "conversation.item.input_audio_transcription.failed" not in types(second)


def test_a_barge_in_cancels_the_response_turn_detected_then_commits_a_user_turn_and_answers_it() -> None:
    d = voiced('transcripts = ["stop"]\n[[turn]]\nwhen = { response = 1 }\nbarge_in = "200ms"\n')
    d.send(user("hello there, how are you doing today", "U1"))
    out = d.send({"type": "response.create"})
    kinds = [t for t in types(out) if not t.endswith(".delta")]
    started = kinds.index("input_audio_buffer.speech_started")
    assert kinds[started:started + 7] == [
        "input_audio_buffer.speech_started", "response.output_audio.done", "response.output_audio_transcript.done",
        "response.content_part.done", "conversation.item.done", "response.output_item.done", "response.done",
    ]  # fmt: skip
    audio = [e for e in out[: types(out).index("input_audio_buffer.speech_started")]
             if e["type"] == "response.output_audio.delta"]  # fmt: skip
    assert sum(len(base64.b64decode(e["delta"])) for e in audio) >= 24000 * 2 * 0.2  # 200 ms of audio went first
    cancelled = next(e for e in out if e["type"] == "response.done")["response"]
    assert cancelled["status"] == "cancelled" and cancelled["status_details"]["reason"] == "turn_detected"
    assert cancelled["output"][0]["status"] == "incomplete"
    after = kinds[started + 7:]
    assert after[:4] == ["input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
                         "conversation.item.added", "conversation.item.done"]  # fmt: skip
    assert "response.created" in after  # the user's new turn is answered
    answer = [e for e in out if e["type"] == "response.done"][-1]["response"]
    assert answer["status"] == "completed" and "stop" in answer["output"][0]["content"][0]["transcript"]
    stopped = next(e for e in out if e["type"] == "input_audio_buffer.speech_stopped")
    started_ev = next(e for e in out if e["type"] == "input_audio_buffer.speech_started")
    assert stopped["audio_end_ms"] - started_ev["audio_start_ms"] == 600
    assert [m["action"] for m in d.meta if m.get("type") == "fault.injected"] == ["barge_in"]
    # the client's interruption path runs against it: a truncate of what it played, a late cancel
    assistant = cancelled["output"][0]["id"]
    truncated = d.send({"type": "conversation.item.truncate", "item_id": assistant, "content_index": 0,
                        "audio_end_ms": 100})  # fmt: skip
    assert types(truncated) == ["conversation.item.truncated"]
    assert d.send({"type": "response.cancel"})[0]["error"]["code"] == "response_cancel_not_active"


def test_a_barge_in_at_0_cancels_before_any_output_and_needs_server_vad() -> None:
    d = voiced('[[turn]]\nwhen = { response = 1 }\nbarge_in = "0s"\n')
    out = d.send({"type": "response.create"})
    assert types(out)[:3] == ["response.created", "input_audio_buffer.speech_started", "response.done"]
    assert out[2]["response"]["output"] == []
    manual = {**VOICE, "audio": {"input": {"turn_detection": None}}}
    d = voiced('[[turn]]\nwhen = { response = 1 }\nbarge_in = "0s"\n', manual)
    out = d.send({"type": "response.create"})
    assert "input_audio_buffer.speech_started" not in types(out) and done_of(out)["response"]["status"] == "completed"
    assert d.meta == []  # the client commits its own turns: the server hears no speech
    polite = {**VOICE, "audio": {"input": {"turn_detection": {"type": "server_vad", "interrupt_response": False}}}}
    d = voiced('[[turn]]\nwhen = { response = 1 }\nbarge_in = "0s"\n', polite)
    out = d.send({"type": "response.create"})
    dones = [e["response"]["status"] for e in out if e["type"] == "response.done"]
    assert dones[0] == "completed" and "input_audio_buffer.speech_started" in types(out)


def test_slow_audio_is_paced_and_bursty_audio_held_then_sent_at_once() -> None:
    d = voiced('[[turn]]\nwhen = { response = 1 }\naudio_pace = 2.0\n', audio_delta_ms=100)
    d.send(user("hello there", "U1"))
    start = d.t
    d.send({"type": "response.create"})
    audio = [(t - start, len(base64.b64decode(e["delta"])) / 48) for t, e in d.sent
             if e["type"] == "response.output_audio.delta"]  # fmt: skip
    # each delta but the first waits twice its own length of audio (pcm16 at 24 kHz: 48 bytes a millisecond)
    waits = [round(b[0] - a[0], 4) for a, b in itertools.pairwise(audio)]
    assert waits == [round(2 * ms / 1000, 4) for _, ms in audio[1:]] and max(waits) == 0.2
    assert d.meta[-1]["action"] == "audio_pace"
    d = voiced('[[turn]]\nwhen = { response = 1 }\naudio_burst = "1.5s"\n')
    d.send(user("hello there", "U1"))
    start = d.t
    d.send({"type": "response.create"})
    times = [t - start for t, e in d.sent if e["type"] == "response.output_audio.delta"]
    assert set(times) == {1.5} and len(times) > 1  # none before the hold, all together after it
    created = next(t for t, e in d.sent if e["type"] == "response.created") - start
    assert created == 0 and d.meta[-1]["action"] == "audio_burst"


def test_the_new_actions_write_out_and_read_back_the_same() -> None:
    text = (
        '[[turn]]\nwhen = { response = 1 }\ncancel = "client_cancelled"\n'
        '[[turn]]\nwhen = { response = 2 }\nrate_limit = true\nclose = 1013\n'
        '[[turn]]\nwhen = { response = 3 }\nbarge_in = "250ms"\naudio_pace = 1.5\n'
        '[[turn]]\nwhen = { response = 4 }\naudio_burst = "1s"\ntext = "hi"\n'
        '[[turn]]\nwhen = { transcription = 2, connection = 1 }\nfail = "rate_limit_exceeded"\n'
    )
    schedule = parse_script(text)
    cancel, limit, barge, burst, transcription = schedule.turns
    assert (cancel.cancel, limit.rate_limit, limit.close) == ("client_cancelled", "tokens", 1013)
    assert (barge.barge_in, barge.audio_pace, burst.audio_burst, burst.text) == (0.25, 1.5, 1.0, "hi")
    assert (transcription.moment, transcription.transcription, transcription.fail) == (
        "transcription", 2, "rate_limit_exceeded"
    )  # fmt: skip
    assert {t.times for t in schedule.turns} == {1}  # each a fault: once
    again = parse_script(schedule.to_toml())
    assert _shape(again) == _shape(schedule) and again.to_toml() == schedule.to_toml()


def test_a_stalled_response_sends_its_first_chunk_then_nothing_for_the_stall_then_the_rest() -> None:
    """`stall_audio` (`--stall-audio N`): the response's output audio stops after its first chunk for the stall,
    then resumes where it was; noted at `response.created`, once, on a virtual clock (time as data)."""
    d = voiced('[[turn]]\nwhen = { response = 1 }\nstall_audio = "2.5s"\n')
    d.send(user("hello there", "U1"))
    start = d.t
    d.send({"type": "response.create"})
    audio = [(round(t - start, 6), e) for t, e in d.sent if e["type"] == "response.output_audio.delta"]
    assert [t for t, _ in audio[:1]] == [0.0] and {t for t, _ in audio[1:]} == {2.5} and len(audio) > 2
    done = next(t for t, e in d.sent if e["type"] == "response.done") - start
    assert done == 2.5 and d.meta[-1]["action"] == "stall_audio" and d.meta[-1]["spec"] == "turn 1"
    again = d.t
    d.send({"type": "response.create"})  # a fault fires once: the next response streams without a stall
    assert {t - again for t, e in d.sent if e["type"] == "response.output_audio.delta" and t > again} <= {0.0}
    flagged = Driver(EndpointConnection(1, EndpointOptions(rate_limits_after_done=False),
                                        Schedule.of(Faults(stall_audio={1}))))  # fmt: skip
    flagged.open()
    flagged.send({"type": "session.update", "session": VOICE})
    flagged.send(user("hello there", "U1"))
    start = flagged.t
    flagged.send({"type": "response.create"})
    times = [t - start for t, e in flagged.sent if e["type"] == "response.output_audio.delta"]
    assert times[0] == 0.0 and set(times[1:]) == {3.0}
    assert [(m["fault"], m["spec"]) for m in flagged.meta] == [("stall-audio", "1")]
    with pytest.raises(ScriptError, match="`stall_audio` acts on a response's output audio"):
        parse_script('[[turn]]\nwhen = { response = 1 }\nstall_audio = "1s"\ncancel = true\n')


def test_a_turn_says_times_only_where_it_is_not_the_default() -> None:
    """A fault fires once and an answer every time unless `times` says otherwise: the writer leaves the default out,
    and what it writes reads back as the same turns."""
    text = (
        '[[turn]]\nwhen = { response = 2 }\nfail = "server_error"\n\n'
        '[[turn]]\nwhen = { event = "response.create" }\ndelay = "0.5s"\ntimes = 1\n\n'
        '[[turn]]\nwhen = { response = 3 }\ncancel = "turn_detected"\ntimes = 0\n'
    )
    schedule = parse_script(text)
    rendered = render(schedule)
    assert rendered.count("times") == 2, rendered
    assert [t.times for t in parse_script(rendered).turns] == [t.times for t in schedule.turns] == [1, 1, None]


def test_a_flags_turn_is_named_by_what_its_flag_was_given_whatever_the_flag() -> None:
    from rtrace.net.faults.flags import FAULTS, GIVEN, Faults

    given = {"client": ["response.cancel"], "server": ["response.done"], "count": 7, "numbers": {4},
             "duration": 2.5}  # fmt: skip
    for flag in FAULTS:  # each flag's turns, from the declaration: a new flag needs no edit here
        [turn] = Schedule.of(Faults(**{flag.field: given[flag.side or flag.kind]})).turns
        value = given[flag.side or flag.kind]
        assert turn.spec == str(next(iter(value)) if isinstance(value, (list, set)) else value), flag.name
        assert turn.counter == f"{flag.name}:{turn.spec}" and GIVEN[flag.name] in {flag.when, turn.acts[0][0]}
    # written by hand with a second condition of its moment: named by its flag's own (a count: "close after 3 server
    # events", not "close after response.done server events")
    text = '[[turn]]\nfault = "close-after"\nwhen = { sent = "response.done", sent_count = 3 }\nclose = 1000\n'
    [turn] = parse_script(text, "s.toml").turns
    assert turn.spec == "3" and parse_script(text).describe()[0].endswith("close (close 1000) after 3 server events")
    drop = '[[turn]]\nfault = "drop-on"\nwhen = { sent = "response.done" }\nclose = 1006\n'
    with pytest.raises(ScriptError, match=r"s.toml:2: .*`fault = 'drop-on'` turn names what `--drop-on` is given: "
                                          r"`when.event`"):  # fmt: skip
        parse_script(drop, "s.toml")
