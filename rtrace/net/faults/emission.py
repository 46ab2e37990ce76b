"""`Emission`: one thing a sans-I/O connection wants done, its time as data (the command type of the fake endpoint,
of the fault language's notes and closes, and of the links that carry them out). A value: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import Any


@dataclasses.dataclass(frozen=True, slots=True)
class Emission:
    """One thing the endpoint wants done, `delay` seconds after the previous emission of the same list.

    One of `event` (send it), `wake` (call `EndpointConnection.wake(token)` now and carry on with its
    emissions), `meta` (write this note to the trace) or `close` (close the websocket with this code and reason;
    1006: end the connection without a close frame, 1005: a close frame without a code) is set. Events, notes
    and closes go out in order, each after everything queued before it (`flush=True`); a note or a close with
    `flush=False` acts at once and drops whatever is still queued (a network drop). `hold` seconds are added to
    the send queue's delay of this emission (its latency, for an event); what is queued after it waits behind it
    (a slow answer, still in order). An `ahead` event (a schema error: the real server answers it on receipt,
    ahead of the answers to earlier events it is still processing) has no latency of its own and goes out before
    the events queued and not yet due, never before the one being waited for.
    """

    event: dict[str, Any] | None = None
    delay: float = 0.0
    hold: float = 0.0
    wake: Hashable | None = None
    meta: dict[str, Any] | None = None
    close: tuple[int, str] | None = None
    flush: bool = True
    ahead: bool = False
