"""`rtrace replay` over real sockets: the shared real traces replayed against `rtrace serve` give their findings
again at every pace; server ids are mapped; a divergence is exit 1 and an unreachable endpoint exit 4. Pacing, ids
and divergences themselves are tested without sockets in `tests/test_net_replay_session.py`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rtrace.cli import ExitCode, main
from rtrace.core.loader import TraceReader
from rtrace.engine.fold import analyze_path
from rtrace.net.faults.flags import Faults
from rtrace.net.faults.script import Schedule
from rtrace.net.link.server import ServerOptions, run_server
from rtrace.net.replay.runner import ReplayOptions, replay

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "sample_traces" / "real"
TRACES = sorted(p.name for p in REAL.glob("*.jsonl"))


def rules(report: object) -> Counter[str]:
    return Counter(f.rule for f in getattr(report, "findings", []))


@pytest.mark.parametrize("name", TRACES)
def test_replaying_a_real_trace_reproduces_its_findings(name: str, tmp_path: Path) -> None:
    out = tmp_path / "replayed.jsonl"
    result = replay(str(REAL / name), ReplayOptions(output=out, timeout=3, latency=0.05))
    assert result.conns and all(c.timeouts == 0 for c in result.conns)
    assert result.divergences == []
    assert rules(result.replay_report) == rules(result.original_report)
    expected = json.loads((REAL / name.replace(".jsonl", ".expected.json")).read_text())
    assert rules(result.replay_report) == Counter(f["rule"] for f in expected["findings"])
    with TraceReader.open(out) as reader:
        records = list(reader)
        assert reader.header is not None and reader.header.fields["recorder"] == "rtrace replay"
    original = [r for r in TraceReader.open(REAL / name) if r.dir == "client"]
    assert [r.type for r in records if r.dir == "client"] == [r.type for r in original]


def renamed(src: Path, dst: Path) -> None:
    """The trace as if another server had assigned other ids to its responses, generated items and calls."""
    text = src.read_text()
    for old, new in (("call_s1_", "call_ORIGINAL_"), ("item_s1_", "item_ORIGINAL_"), ("resp_fake", "resp_ORIGINAL")):
        text = text.replace(old, new)
    dst.write_text(text)


def test_server_assigned_ids_are_mapped_to_the_replay(tmp_path: Path) -> None:
    trace = tmp_path / "renamed.jsonl"
    renamed(REAL / "tool-output-race.livekit-1.8.8.jsonl", trace)
    out = tmp_path / "replayed.jsonl"
    result = replay(str(trace), ReplayOptions(output=out, timeout=3, recorded_responses=False))
    assert "RT101" in rules(result.replay_report)
    assert "RT104" not in rules(result.replay_report)  # no output for an unknown call: call ids were rewritten
    sent = [r.event for r in TraceReader.open(out) if r.dir == "client"]
    text = json.dumps(sent)
    assert "ORIGINAL" not in text
    outputs = [e["item"] for e in sent if e.get("item", {}).get("type") == "function_call_output"]
    assert outputs and outputs[0]["call_id"].startswith("call_s1_")


@contextlib.contextmanager
def server_thread(**kw: object) -> Iterator[str]:
    """An `rtrace serve` in its own thread and loop (replay() runs its own loop)."""
    ready: list[str] = []
    stop = threading.Event()

    async def serve() -> None:
        async with run_server(ServerOptions(**kw)) as srv:  # type: ignore[arg-type]
            ready.append(srv.url)
            while not stop.is_set():
                await asyncio.sleep(0.02)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not ready:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.01)
    try:
        yield ready[0]
    finally:
        stop.set()
        thread.join(10)


def test_unreachable_endpoint_exits_4(capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(REAL / "tool-output-race.livekit-1.8.9.jsonl")
    assert main(["replay", trace, "--target", "ws://127.0.0.1:1/v1", "--timeout", "2s"]) == ExitCode.REPLAY_FAILED
    assert "cannot connect" in capsys.readouterr().err


def test_real_endpoint_needs_a_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    trace = str(REAL / "tool-output-race.livekit-1.8.9.jsonl")
    assert main(["replay", trace, "--target", "wss://api.example.invalid/v1/realtime"]) == ExitCode.REPLAY_FAILED


def test_cli_replay_prints_findings_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "replayed.jsonl"
    code = main(["replay", str(REAL / "tool-output-race.livekit-1.8.8.jsonl"), "--latency", "50ms", "-o", str(out)])
    assert code == ExitCode.FINDINGS
    text = capsys.readouterr().out
    assert "RT101 deleted-function-call-output" in text and "original | replay" in text
    assert out.exists()
    assert main(["replay", str(out), "--pace", "sideways"]) == ExitCode.USAGE


def test_compare_fake_with_another_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtrace.cli", "serve", "--error-on", "conversation.item.delete"],
        stdout=subprocess.PIPE, text=True, cwd=str(ROOT),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = ""
        for line in proc.stdout:
            if "RTRACE_URL=" in line:
                url = line.split("=", 1)[1].strip()
                break
        code = main(["replay", str(REAL / "tool-output-race.livekit-1.8.8.jsonl"), "--compare", url, "--timeout", "1s"])
        assert code in (ExitCode.OK, ExitCode.FINDINGS)
        text = capsys.readouterr().out
        assert "where the fake answered differently" in text
        assert "-error" in text  # the other endpoint answered the delete with an error, the fake did not
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("argv", [["--pace", "recorded", "--speed", "2"], ["--pace", "asap"]])
@pytest.mark.parametrize("name", TRACES)
def test_readme_paces_replay_every_real_trace_without_divergence(
    name: str, argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """README's `--pace recorded --speed 2` and `--pace asap` failed with exit 4 on the 1.8.8 trace: both sent
    client events before the server events they followed (asap at once; recorded on the halved clock of a fake
    that ran at full time), so a response.create met an active response and a create an item not made yet."""
    out = tmp_path / "replayed.jsonl"
    code = main(["replay", str(REAL / name), *argv, "-o", str(out)])
    captured = capsys.readouterr()
    assert "divergence" not in captured.out and "diverged" not in captured.err, captured.out
    original, replayed = analyze_path(REAL / name), analyze_path(out)
    assert rules(replayed) == rules(original)
    has_error = any(f.severity == "error" for f in replayed.findings)
    assert code == (ExitCode.FINDINGS if has_error else ExitCode.OK), captured.out


def test_speed_scales_the_fake_too() -> None:
    trace = str(REAL / "tool-output-race.livekit-1.8.8.jsonl")
    started = time.monotonic()
    replay(trace, ReplayOptions(pace="recorded", speed=1.0, timeout=3))
    full = time.monotonic() - started
    started = time.monotonic()
    result = replay(trace, ReplayOptions(pace="recorded", speed=4.0, timeout=3))
    quick = time.monotonic() - started
    assert result.divergences == []
    assert quick < full  # the story's 60 ms chunks and the 50 ms latency ran four times as fast


def test_a_diverged_replay_is_exit_1_and_an_unreachable_one_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 4 meant both "cannot be reached" and "answered differently"; a divergence is now a finding (1)."""
    trace = str(REAL / "tool-output-race.livekit-1.8.9.jsonl")
    with server_thread(latency=0.0, schedule=Schedule.of(Faults(error_on=["conversation.item.create"]))) as url:
        code = main(["replay", trace, "--target", url, "--timeout", "300ms"])
    captured = capsys.readouterr()
    assert code == ExitCode.FINDINGS
    assert "rtrace: the replay diverged: " in captured.err and "an error the recording does not have" in captured.out
    assert main(["replay", trace, "--target", "ws://127.0.0.1:1/v1", "--timeout", "1s"]) == ExitCode.REPLAY_FAILED
    assert "rtrace: replay failed: " in capsys.readouterr().err


@pytest.mark.parametrize("scheme", ["http", "ws"])
def test_the_printed_openai_base_url_is_a_target(scheme: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`--target http://...` (the OPENAI_BASE_URL serve and record print) was an internal error (exit 70)."""
    trace = str(REAL / "tool-output-race.livekit-1.8.9.jsonl")
    with server_thread(latency=0.0) as url:
        target = url.replace("ws://", f"{scheme}://")
        code = main(["replay", trace, "--target", target, "--timeout", "2s"])
    captured = capsys.readouterr()
    assert code == ExitCode.OK, captured
    assert "internal error" not in captured.err
    assert main(["replay", trace, "--target", "ftp://127.0.0.1/v1"]) == ExitCode.USAGE


def test_the_faults_a_recording_header_holds_are_injected_by_the_fake_or_said_not_to_be() -> None:
    from rtrace.net.replay.runner import ReplayFailed, faults_note, recorded_faults

    header = {"schedule": '[[turn]]\nwhen = { sent = "response.created" }\nclose = 1011\ntimes = 1\n'}
    assert len(recorded_faults("t.jsonl", header).turns) == 1
    assert "injected by the fake" in faults_note(header, "fake")
    assert "not injected" in faults_note(header, "ws://127.0.0.1:9/v1/realtime")
    assert faults_note({}, "fake") == "" and not recorded_faults("t.jsonl", {}).turns
    with pytest.raises(ReplayFailed, match="cannot inject the recording's faults"):
        recorded_faults("t.jsonl", {"schedule": "[[turn]]\nwhen = { nothing = 1 }\n"})
