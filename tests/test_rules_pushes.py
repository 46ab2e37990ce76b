"""Push rules: stale snapshots (with the thresholds as options), ack timeouts, truncates, divergence."""

from __future__ import annotations

from rtrace.engine.fold import analyze_path
from rtrace.rules.base import Config

from .conftest import REAL, SAMPLES

RACE = REAL / "tool-output-race.livekit-1.8.8.jsonl"


def slugs(path: object, config: Config | None = None) -> list[str]:
    return [f.slug for f in analyze_path(path, config).findings]  # type: ignore[arg-type]


def test_stale_snapshot_on_livekit_188_reports_window_and_gap() -> None:
    [finding] = [f for f in analyze_path(RACE).findings if f.slug == "stale-snapshot-delete"]
    assert finding.lines == (42, 43, 45, 46)
    assert "1.7 ms after the server confirmed it at line 43" in finding.explanation
    assert "round-trip (50 ms, line 42 to line 43)" in finding.explanation
    assert "between t=0.719898 s and t=0.770304 s" in finding.explanation


def test_burst_window_is_an_option() -> None:
    # lines 45 and 46 are 42 microseconds apart: a 10 microsecond window splits them, so no burst, no finding
    assert "stale-snapshot-delete" not in slugs(RACE, Config(burst_window=0.00001))
    assert "stale-snapshot-delete" in slugs(RACE, Config(burst_window=0.001))


def test_ack_timeout_is_an_option() -> None:
    assert "ack-timeout" not in slugs(RACE)
    strict = [f for f in analyze_path(RACE, Config(ack_timeout=0.04)).findings if f.slug == "ack-timeout"]
    assert strict and all("answered only after" in f.explanation for f in strict)


def test_ack_never_answered_while_connection_open() -> None:
    path = SAMPLES / "rules/ack-timeout/positive-never-answered.jsonl"
    [finding] = [f for f in analyze_path(path).findings if f.slug == "ack-timeout"]
    assert "never answered" in finding.explanation


def test_truncate_beyond_audio_measures_the_audio() -> None:
    path = SAMPLES / "rules/truncate-beyond-audio/positive-past-the-audio.jsonl"
    [finding] = [f for f in analyze_path(path).findings if f.slug == "truncate-beyond-audio"]
    assert "audio_end_ms 2500 is past the 1000 ms of audio" in finding.explanation


def test_local_divergence_needs_nothing_pending() -> None:
    path = SAMPLES / "rules/local-server-divergence/positive-output-never-on-server.jsonl"
    [finding] = [f for f in analyze_path(path).findings if f.slug == "local-server-divergence"]
    assert "only the client has item_out1" in finding.explanation
