"""Drives an `EndpointConnection` the way the server does, on a virtual clock, for the tests of the fake endpoint's
modules (test_net_fake_endpoint, test_net_faults_flags, test_net_fake_responses, test_net_fake_playback)."""

from __future__ import annotations

from typing import Any

from rtrace.net.fake.endpoint import EndpointConnection, EndpointOptions


class Driver:
    """Runs emissions like the server would, on a virtual clock: pauses are followed (wakes), nothing sleeps."""

    def __init__(self, conn: EndpointConnection) -> None:
        self.conn = conn
        self.t = 0.0
        self.sent: list[tuple[float, dict[str, Any]]] = []
        self.meta: list[dict[str, Any]] = []
        self.closes: list[tuple[int, str, bool]] = []

    def run(self, ems: list[Any], follow: bool = True) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for em in ems:
            self.t += em.delay
            if em.meta is not None:
                self.meta.append(em.meta)
            if em.event is not None:
                self.sent.append((self.t, em.event))
                out.append(em.event)
            if em.close is not None:
                self.closes.append((*em.close, em.flush))
            if em.wake is not None and follow:
                out.extend(self.run(self.conn.wake(em.wake)))
        return out

    def open(self) -> list[dict[str, Any]]:
        # Not followed: the session limit is a pause of an hour.
        return self.run(self.conn.open(), follow=False)

    def send(self, event: dict[str, Any], follow: bool = True) -> list[dict[str, Any]]:
        return self.run(self.conn.receive(event), follow)


def user(text: str, item_id: str | None = None, prev: Any = "absent") -> dict[str, Any]:
    item: dict[str, Any] = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    if item_id:
        item["id"] = item_id
    ev: dict[str, Any] = {"type": "conversation.item.create", "event_id": f"ev_{item_id}", "item": item}
    if prev != "absent":
        ev["previous_item_id"] = prev
    return ev


def done_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The last `response.done` of `events` (the GA server sends `rate_limits.updated` after it)."""
    return next(e for e in reversed(events) if e.get("type") == "response.done")


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def make(**kw: Any) -> Driver:
    """A text session. Without the `rate_limits.updated` the GA server sends after each `response.done` (tested on
    its own in test_net_fake_endpoint), so that an answer's last event is its `response.done`."""
    schedule = kw.pop("schedule", None)
    kw.setdefault("rate_limits_after_done", False)
    d = Driver(EndpointConnection(1, EndpointOptions(**kw), schedule))
    d.open()
    d.send({"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"]}})
    return d


def weather_call(d: Driver) -> dict[str, Any]:
    d.send(user("What's the weather in Paris?", "U1", "root"))
    out = d.send({"type": "response.create", "event_id": "rc1", "response": {"metadata": {"client_event_id": "rc1"}}})
    return out[-1]
