"""The values a schedule may hold (rtrace/net/faults/values.py): each checked against the command line's ranges, with a
message naming the value; text made fit for one comment line."""

from __future__ import annotations

import types

import pytest

from rtrace.net.faults.values import MAX_SEED, check_fault, check_seed, comment_text

KINDS = {"latency": "seconds", "drop": "code", "error": "word", "pace": "seconds"}
MOMENTS = ("all", "event")


def fault(**given: object) -> types.SimpleNamespace:
    base: dict[str, object] = {"kind": "drop", "moment": "event", "target": "response.create", "value": 1006, "k": 1}
    return types.SimpleNamespace(**{**base, **given})


def test_a_seed_is_a_whole_number_in_63_bits() -> None:
    assert check_seed(0) == 0 and check_seed(MAX_SEED) == MAX_SEED
    for bad in (-1, MAX_SEED + 1, 2**64, 1.0, True, "3", None):
        with pytest.raises(ValueError, match="give a whole number from 0 to"):
            check_seed(bad)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"kind": "sneeze"}, "kind 'sneeze': give one of latency, drop"),
        ({"moment": "whenever"}, "moment 'whenever': give one of all, event"),
        ({"target": "a\n[[turn]]"}, "target 'a\\\\n\\[\\[turn\\]\\]': give an event type"),
        ({"k": 0}, "k 0: give a whole number from 1"),
        ({"k": True}, "k True: give a whole number from 1"),
        ({"value": 999}, "drop value 999: give a close code from 1000 to 4999"),
        ({"kind": "latency", "value": float("nan")}, "latency value nan: give a number of seconds"),
        ({"kind": "latency", "value": -5}, "latency value -5: give a time from 0 to"),
        ({"kind": "pace", "value": 1e308}, "pace value 1e[+]308: give a time from 0 to"),
        ({"kind": "error", "value": "x y"}, "error value 'x y': give a code"),
    ],
)
def test_each_value_out_of_its_range_is_named(given: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_fault(fault(**given), KINDS, MOMENTS)


def test_values_in_range_pass() -> None:
    check_fault(fault(), KINDS, MOMENTS)
    check_fault(fault(kind="latency", moment="all", target="*", value=0.05), KINDS, MOMENTS)
    check_fault(fault(kind="error", target="conversation.item.create:function_call_output", value="x_y"), KINDS,
                MOMENTS)  # fmt: skip


def test_comment_text_keeps_one_line() -> None:
    assert comment_text("a\nb\r\x1b[31m\u2028c") == "a\\nb\\r\\u001b[31m\\u2028c"
    assert comment_text("plain text, é") == "plain text, é"
