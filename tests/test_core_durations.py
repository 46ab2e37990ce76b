"""The one duration grammar: units, the bare-number refusal that names the fix, lists with a trailing unit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtrace.core.durations import (
    DurationError,
    format_duration,
    parse_duration,
    parse_duration_list,
    parse_latencies,
    unit_of,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("50ms", 0.05),
        ("1.5s", 1.5),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("250us", 0.00025),
        ("250µs", 0.00025),
        ("0", 0.0),
        ("0.0", 0.0),
        ("0ms", 0.0),
        (".5s", 0.5),
        ("5 s", 5.0),
        (" 50MS ", 0.05),
    ],
)
def test_a_duration_is_a_number_and_a_unit(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bare", ["50", "1.5", "5.", "0.001"])
def test_a_bare_number_is_refused_with_both_readings(bare: str) -> None:
    with pytest.raises(DurationError) as err:
        parse_duration(bare, "--latency")
    number = bare.rstrip(".")
    assert str(err.value) == f"--latency {bare}: a duration needs a unit: {number}ms or {number}s"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "not a duration"),
        ("fast", "not a duration"),
        ("-1s", "no sign"),
        ("1e3ms", "not a duration"),
        ("inf", "not a duration"),
        ("nan", "not a duration"),
        ("1m30s", "not a duration"),
        ("5xs", "unknown unit 'xs'"),
        ("5d", "unknown unit 'd'"),
    ],
)
def test_what_is_not_a_duration_says_why(text: str, why: str) -> None:
    with pytest.raises(DurationError, match=why) as err:
        parse_duration(text, "--jitter")
    assert str(err.value).startswith("--jitter ")
    assert isinstance(err.value, ValueError)


def test_a_list_takes_the_unit_of_its_last_item_for_its_bare_numbers() -> None:
    assert parse_duration_list("0,10,50,200ms") == pytest.approx([0.0, 0.01, 0.05, 0.2])
    assert parse_duration_list("5,1s,200ms") == pytest.approx([0.005, 1.0, 0.2])
    assert parse_duration_list("0.1,0.2s") == pytest.approx([0.1, 0.2])
    assert parse_duration_list("10ms,0") == pytest.approx([0.01, 0.0])  # a 0 last: every other item has its unit
    assert parse_duration_list("0") == [0.0]
    for bad, why in (("0,10,50", "needs a unit, on its last item at least: 0,10,50ms"), ("50", "50ms or 50s"),
                     ("", "at least one"), ("5ms,,6ms", "an empty item"), ("10,0", "needs a unit")):  # fmt: skip
        with pytest.raises(DurationError, match=why):
            parse_duration_list(bad, "--latency")


def test_latencies_per_event_type_name_the_item_in_their_message() -> None:
    assert parse_latencies(["50ms", "conversation.item.added=120ms"]) == (
        pytest.approx(0.05),
        {"conversation.item.added": pytest.approx(0.12)},
    )
    assert parse_latencies(["50ms,response.done=0"]) == (pytest.approx(0.05), {"response.done": 0.0})
    with pytest.raises(DurationError) as err:
        parse_latencies(["response.done=120"])
    assert str(err.value) == "--latency response.done=120: a duration needs a unit: 120ms or 120s"


def test_unit_of() -> None:
    assert [unit_of(t) for t in ("50ms", "2M", "5", "x")] == ["ms", "m", None, None]


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_format_duration_reads_back_in_the_grammar(seconds: float) -> None:
    text = format_duration(seconds)
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-3, abs=1e-9)
