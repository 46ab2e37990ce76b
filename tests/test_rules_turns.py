"""rtrace.rules.turns: a turn cut in flight and never asked again (RT126), a client that never comes back after an
injected abnormal close (RT127); their goldens are in sample_traces/rules/, these hold what a golden cannot."""

from __future__ import annotations

from pathlib import Path

from rtrace.engine.fold import analyze_path

from .conftest import SAMPLES


def rules_of(path: Path) -> list[str]:
    return [f.rule for f in analyze_path(path).findings]


def test_no_real_trace_has_a_turn_never_completed_or_a_client_that_never_came_back() -> None:
    """Real recordings end when the recording stops: neither rule may read that as the client's hang."""
    real = sorted((SAMPLES / "real").glob("*.jsonl"))
    assert real
    for path in real:
        assert not {"RT126", "RT127"} & set(rules_of(path)), path


def test_a_turn_cut_in_flight_is_judged_only_once_the_client_had_the_time(tmp_path: Path) -> None:
    from .make_samples import cut_in_flight

    for waited, expected in ((2.0, False), (9.9, False), (10.5, True)):
        b = cut_in_flight()
        b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=waited)
        path = tmp_path / f"cut-{waited}.jsonl"
        b.write(path)
        assert ("RT126" in rules_of(path)) is expected, waited


def test_a_server_started_response_on_the_new_connection_completes_the_turn(tmp_path: Path) -> None:
    from .make_samples import cut_in_flight

    b = cut_in_flight()
    b.response_created("resp_vad", None, dt=0.5)  # server VAD: the user spoke again and the server answers
    b.response_done("resp_vad", output=[], dt=0.2)
    b.server({"type": "rate_limits.updated", "rate_limits": []}, dt=12.0)
    path = tmp_path / "vad.jsonl"
    b.write(path)
    assert "RT126" not in rules_of(path)
