"""`Emission` (rtrace/net/faults/emission.py): every emission the endpoint and the fault language make is one thing
to do (an event, a wake, a note or a close), never none and never two, so the link carrying it out has one reading."""

from __future__ import annotations

from typing import Any

from rtrace.net.faults.emission import Emission
from rtrace.net.faults.flags import Faults
from rtrace.net.faults.script import Schedule

from .netdriver import Driver, make, user, weather_call


class Seen(Driver):
    """A driver that keeps every emission it ran."""

    emitted: list[Emission]

    def run(self, ems: list[Any], follow: bool = True) -> list[dict[str, Any]]:
        self.__dict__.setdefault("emitted", []).extend(ems)
        return super().run(ems, follow)


def one_thing(em: Emission) -> bool:
    return sum(x is not None for x in (em.event, em.wake, em.meta, em.close)) == 1


def test_every_emission_of_a_session_under_faults_is_one_thing_to_do() -> None:
    faults = Faults(error_on=["conversation.item.delete"], fail_response={2}, drop_on=["response.cancel"])
    d = make(schedule=Schedule.of(faults))
    d.__class__ = Seen
    weather_call(d)
    d.send(user("And tomorrow?", "U2"))
    d.send({"type": "response.create", "event_id": "rc2"})
    d.send({"type": "conversation.item.delete", "event_id": "del", "item_id": "U2"})
    d.send({"type": "response.cancel", "event_id": "cancel"})
    emitted = d.emitted
    assert {"event", "meta", "close"} <= {k for em in emitted for k in ("event", "meta", "close") if getattr(em, k)}
    assert [em for em in emitted if not one_thing(em)] == []
    assert not one_thing(Emission()) and not one_thing(Emission(event={}, meta={}))
