"""A bug's script (rtrace/net/hunt/bugscript.py): its schedule read back with every value checked where it enters
(`file:line:col` messages, the command line's ranges), its number, and comment lines no text can break out of."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rtrace.net.faults.schedule import Fault, Schedule
from rtrace.net.faults.script import parse_script
from rtrace.net.hunt.bugscript import bug_script, load_schedule, schedule_number


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[]", "a schedule must be a table, not list"),
        ('{"bogus": 1}', "a schedule has no field 'bogus'"),
        ('{"seed": 18446744073709551616}', "seed 18446744073709551616: give a whole number from 0 to"),
        ('{"faults": {}}', "`faults` must be a list"),
        ('{"faults": [{"kind": "drop", "moment": "event", "target": "response.create", "value": 1006, "k": "x"}]}',
         "k 'x': give a whole number from 1"),
        ('{"faults": [{"kind": "drop", "moment": "event", "target": "response.create", "value": 1006, "k": -3}]}',
         "k -3: give a whole number from 1"),
        ('{"faults": [{"kind": "drop", "moment": "whenever", "target": "response.create", "value": 1006}]}',
         "moment 'whenever': give one of all, event"),
        ('{"faults": [{"kind": "sneeze", "moment": "event"}]}', "kind 'sneeze': give one of latency"),
        ('{"faults": [{"kind": "latency", "moment": "all", "target": "*", "value": -5}]}',
         "latency value -5: give a time from 0 to"),
        ('{"faults": [{"kind": "latency", "moment": "all", "target": "*", "value": NaN}]}',
         "latency value nan: give a number of seconds"),
        ('{"faults": [{"kind": "delay", "moment": "event", "target": "x", "value": 1e308}]}',
         "delay value 1e[+]308: give a time from 0 to"),
        ('{"faults": [{"kind": "close", "moment": "event", "target": "x", "value": "soon"}]}',
         "close value 'soon': give a close code"),
        ('{"faults": [{"kind": "error", "moment": "event", "target": "a\\n[[turn]]", "value": "x"}]}',
         "target 'a\\\\n\\[\\[turn\\]\\]': give an event type"),
    ],
)
def test_a_schedules_values_are_checked_where_they_enter(value: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "bug-1.toml"
    path.write_text(f"# rtrace-schedule: {value}\n")
    with pytest.raises(ValueError, match=rf"bug-1\.toml:1:20: the schedule is not readable: {message}"):
        load_schedule(path)


def test_text_in_a_bug_scripts_comments_cannot_add_turns() -> None:
    base = parse_script("[[turn]]\nwhen = { user = \"weather\" }\ncall = { name = \"get_forecast\" }\n", "<base>")
    base = dataclasses.replace(base, path="agent\n[[turn]]\nwhen = { opened = true }\nclose = 1000\n.toml")
    text = bug_script(Schedule((Fault("latency", "all", "*", 0.05),)), base)
    assert len(parse_script(text, "<bug>").turns) == len(base.turns)


def test_a_scripts_number_is_read_off_its_name() -> None:
    assert schedule_number("out/1/bug-4.toml") == 4 and schedule_number(Path("bug-12.toml")) == 12
    assert schedule_number("mine.toml") is None and schedule_number("bug-x.toml") is None
    assert schedule_number("bug-99999999999.toml") is None
