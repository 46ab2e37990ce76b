"""Minimal reproducers (`rtrace.transform.minimize`): small, still holding the finding, protocol kept valid, 1-minimal,
and found with few folds."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import orjson
import pytest

from rtrace.core.loader import load
from rtrace.engine.fold import analyze_path
from rtrace.rules import find_rule
from rtrace.transform.minimize import NothingToMinimize, _Search, _Trace, ddmin, minimize, write

from .conftest import REAL, SAMPLES

RACE = REAL / "tool-output-race.livekit-1.8.8.jsonl"
POSITIVES = sorted(SAMPLES.glob("rules/*/positive-*.jsonl"))


def reproduce(path: Path, rule_name: str, tmp_path: Path, **kw: object) -> tuple[list[dict], Path]:
    result = minimize(path, find_rule(rule_name), **kw)  # type: ignore[arg-type]
    out = tmp_path / f"min-{rule_name}.jsonl"
    with out.open("wb") as fp:
        written = write(result, fp)
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert len(lines) == written == len(result.lines) + 1
    return lines, out


def test_the_shared_1_8_8_race_shrinks_to_at_most_12_lines_that_still_give_rt101(tmp_path: Path) -> None:
    lines, out = reproduce(RACE, "deleted-function-call-output", tmp_path)
    assert len(lines) <= 12
    assert "RT101" in {f.rule for f in analyze_path(out).findings}
    # the header says where the lines came from; every record is one of the original's, unchanged
    header = lines[0]
    assert header["rtrace"] == 1
    assert header["minimized"]["from"] == RACE.name and header["minimized"]["rule"] == "RT101"
    original = RACE.read_bytes().splitlines()
    for number, record in zip(header["minimized"]["lines"], lines[1:], strict=True):
        assert orjson.loads(original[number - 1]) == record


def test_without_the_shortcuts_delta_debugging_alone_reaches_the_same_size(tmp_path: Path) -> None:
    with_them = minimize(RACE, find_rule("RT101"))
    alone = minimize(RACE, find_rule("RT101"), shortcuts=False)
    assert len(alone.lines) <= 11 and len(with_them.lines) <= 11
    assert alone.tests > with_them.tests


@pytest.mark.parametrize("path", POSITIVES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_golden_positive_minimizes_to_a_trace_where_its_rule_still_holds(path: Path, tmp_path: Path) -> None:
    slug = path.parent.name
    lines, out = reproduce(path, slug, tmp_path)
    assert slug in {f.slug for f in analyze_path(out).findings}
    records, _ = load(path)
    assert len(lines) - 1 <= len(records)


def units_kept(path: Path, rule_name: str) -> tuple[_Trace, list[int], _Search]:
    from rtrace.core.loader import TraceReader
    from rtrace.rules.base import Config

    result = minimize(path, find_rule(rule_name))
    with TraceReader.open(path) as reader:
        trace = _Trace(reader)
    kept_rows = {trace.index[line] for line in result.lines}
    units = sorted({trace.unit_of[i] for i in kept_rows if i not in itertools.chain(*trace.notes.values())})
    return trace, units, _Search(trace, find_rule(rule_name), Config())


@pytest.mark.parametrize(
    "path, rule_name",
    [(RACE, "RT101"), (RACE, "RT102"), (REAL / "reconnect-during-tool.livekit-1.8.4.jsonl", "RT105")],
)
def test_the_result_is_1_minimal_and_keeps_the_protocol_valid(path: Path, rule_name: str) -> None:
    trace, units, search = units_kept(path, rule_name)
    assert search.holds(units)
    # 1-minimal: without any one of its units (and what needs it) the finding is gone
    for u in units:
        assert not search.holds([v for v in units if v != u]), trace.units[u]
    kept = {i for u in units for i in trace.units[u]}
    rows = trace.rows
    for i in kept:
        _, _, _, direction, conn, event, etype, _ = rows[i]
        # every response event kept has its response.created, and a response.created its response.done
        rid = (event.get("response") or {}).get("id") if isinstance(event.get("response"), dict) else None
        rid = rid or event.get("response_id")
        if direction == "server" and etype.startswith("response.") and isinstance(rid, str):
            ends = {rows[j][6] for j in kept if rows[j][4] == conn and _rid(rows[j][5]) == rid}
            assert "response.created" in ends, (i, etype)
            if etype == "response.created":
                assert "response.done" in ends or not any(
                    rows[j][6] == "response.done" and _rid(rows[j][5]) == rid for j in range(len(rows))
                )
    # a kept connection keeps its notes
    for conn in {rows[i][4] for i in kept}:
        assert all(j in trace.rows_of(units) for j in trace.notes.get(conn, ()))


def _rid(event: dict) -> object:
    response = event.get("response")
    return response.get("id") if isinstance(response, dict) else event.get("response_id")


def test_a_change_and_its_answers_stay_or_go_together() -> None:
    """The create of the tool output (line 42) and its `conversation.item.added` (43) are one unit, the delete (45)
    and its `conversation.item.deleted` (47) another; a `conversation.item.done` (44) is a unit that needs 43's."""
    from rtrace.core.loader import TraceReader

    with TraceReader.open(RACE) as reader:
        trace = _Trace(reader)

    def unit(line: int) -> int:
        return trace.unit_of[trace.index[line]]

    assert unit(42) == unit(43) and unit(45) == unit(47) and unit(42) != unit(45)
    assert unit(44) != unit(43) and unit(43) in trace.needs[unit(44)]
    assert trace.close([unit(44)]) == []


def test_ddmin_finds_the_needed_items_in_a_number_of_tests_logarithmic_in_the_trace() -> None:
    """k needed items among 1024 (one, a few scattered, a run of ten) are found, exactly, in at most 4 k log2(n) + 2
    tests: a long trace costs a few more folds, not a fold per record."""
    spread = set(range(3, 1024, 130))
    for needed in ({700}, {3, 500, 1000}, spread, set(range(100, 110))):
        calls = 0

        def holds(units: list[int], needed: set[int] = needed) -> bool:
            nonlocal calls
            calls += 1
            return needed <= set(units)

        found = ddmin([[k] for k in range(1024)], holds)
        assert {u for item in found for u in item} == needed
        assert calls <= 4 * len(needed) * 10 + 2, (len(needed), calls)


def test_a_rule_with_no_finding_is_refused() -> None:
    with pytest.raises(NothingToMinimize, match="RT105 function-call-lost-on-reconnect reports nothing"):
        minimize(RACE, find_rule("RT105"))


def test_a_hostile_trace_minimizes_without_raising(tmp_path: Path) -> None:
    """Bad lines are skipped as `analyze` skips them; the reproducer is made of good records only."""
    bad = tmp_path / "bad.jsonl"
    good = RACE.read_bytes().splitlines()
    bad.write_bytes(b"\n".join([b"not json", *good[:20], b'{"event": 3}', *good[20:]]) + b"\n")
    result = minimize(bad, find_rule("RT101"))
    out = io.BytesIO()
    write(result, out)
    assert all(orjson.loads(line) for line in out.getvalue().splitlines())
    assert len(result.lines) <= 11



def test_a_reproducer_told_to_keep_rules_keeps_its_finding_set_and_gains_none(tmp_path: Path) -> None:
    """A hunt's entry is one defect seen by several rules: its reproducer keeps them all, and reports nothing the
    whole trace did not (the 1.8.8 race minimized for RT101 alone also reports RT117, which the run did not)."""
    whole = {f.rule for f in analyze_path(RACE).findings}
    (tmp_path / "alone").mkdir()
    (tmp_path / "kept").mkdir()
    _, alone = reproduce(RACE, "RT101", tmp_path / "alone")
    assert {f.rule for f in analyze_path(alone).findings} - whole  # what the issue saw: a finding gained
    _, kept = reproduce(RACE, "RT101", tmp_path / "kept", keep=["RT102"])
    assert {f.rule for f in analyze_path(kept).findings} == {"RT101", "RT102"}
