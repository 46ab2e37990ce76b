"""Findings, witnesses, bursts and durations."""

from __future__ import annotations

from rtrace.core.state import Change
from rtrace.rules.base import Bursts, Config, Rule, Witness, as_json, ms


class Dummy(Rule):
    """Doc."""

    id = "RT999"
    slug = "dummy"
    severity = "warning"
    title = "t"
    fix = "f"


def test_finding_witness_sorted_and_unique() -> None:
    w = [
        Witness(5, 0.5, "server", 1, "x", "b"),
        None,
        Witness(2, 0.2, "client", 1, "y", "a"),
        Witness(5, 0.5, "server", 1, "x", "b"),
    ]
    f = Dummy(Config()).finding(1, "m", "e", w, 5, items=["a", None, "a", "b"])
    assert f.lines == (2, 5)
    assert f.ids == {"items": ("a", "b")}
    data = as_json(f)
    assert data["lines"] == [2, 5] and data["rule"] == "RT999" and data["ids"] == {"items": ["a", "b"]}


def test_ms() -> None:
    assert ms(0.0017) == "1.7 ms"
    assert ms(0.0504) == "50 ms"
    assert ms(2.314) == "2.31 s"


def test_bursts_split_on_gaps_and_connections() -> None:
    bursts = Bursts(0.01)

    def change(conn: int, t: float) -> Change:
        return Change(kind="conversation.item.create", conn=conn, seq=int(t * 1000), line=1, t=t)

    a = bursts.add(change(1, 0.0))
    b = bursts.add(change(1, 0.005))
    c = bursts.add(change(2, 0.006))
    d = bursts.add(change(1, 0.02))
    assert a is b and len(a) == 2
    assert c is not a and d is not a
