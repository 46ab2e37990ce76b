"""`net.link.lateness`: serve counts how late each event left, warns past the bound (rate-limited), sums it up."""

from __future__ import annotations

from rtrace.net.link.lateness import LATE_BOUND, WARN_EVERY, Lateness


def test_late_events_are_counted_warned_of_at_most_once_per_interval_and_summed_up() -> None:
    now = [0.0]
    warnings: list[str] = []
    lateness = Lateness(lambda: now[0], warnings.append)
    for k in range(1000):
        now[0] = k * 0.01  # 10 s of events, one every 10 ms
        lateness.sent(-0.002 if k % 10 else 0.050)  # on time (early counts as 0), or 50 ms late
    assert lateness.count == 1000 and lateness.late == 100 and lateness.worst == 0.050
    assert len(warnings) == lateness.warnings == 1  # 10 s: one warning in WARN_EVERY
    assert "50 ms after it was due" in warnings[0] and "1 of 1 events" in warnings[0]
    now[0] += WARN_EVERY
    lateness.sent(0.2)
    assert len(warnings) == 2 and "101 of 1,001" in warnings[1]
    summary = lateness.summary()
    assert summary.startswith("rtrace serve: lateness: 101 of 1,001 events sent over 10 ms")
    assert "median <= 1 ms" in summary and "p99 <= 50 ms" in summary and "worst 200 ms" in summary


def test_on_time_events_are_never_warned_of() -> None:
    warnings: list[str] = []
    lateness = Lateness(lambda: 0.0, warnings.append)
    for _ in range(100):
        lateness.sent(LATE_BOUND)  # at the bound is on time
    assert lateness.late == 0 and warnings == [] and lateness.quantile(0.99) == LATE_BOUND
    assert Lateness(lambda: 0.0, None).summary() == "rtrace serve: lateness: no event sent"
