"""Facts: `FACTS` is exactly the set of classes `step` (and `finish`) report."""

from __future__ import annotations

import dataclasses

from rtrace.core.facts import FACTS, Fact
from rtrace.core.loader import load
from rtrace.core.reducer import finish, step
from rtrace.core.state import TraceState

from .conftest import SAMPLES


def test_step_reports_every_fact_class_of_the_list_on_the_samples() -> None:
    seen: set[type[Fact]] = set()
    for path in sorted(SAMPLES.rglob("*.jsonl")):
        records, _ = load(path)
        state = TraceState()
        for rec in records:
            _, facts = step(state, rec)
            seen.update(type(f) for f in facts)
        seen.update(type(f) for f in finish(state))
    assert seen == set(FACTS)


def test_facts_are_plain_data_that_carry_their_record() -> None:
    for fact_class in FACTS:
        assert issubclass(fact_class, Fact) and dataclasses.is_dataclass(fact_class)
        assert "rec" in {f.name for f in dataclasses.fields(fact_class)}
    assert len(set(FACTS)) == len(FACTS)
