"""`rtrace sweep` against a small client whose bug shows only when acks are slow (tests/sweep_client.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rtrace.cli import main
from rtrace.net.hunt.sweep import NO_CONNECTION, parse_latency_list, sweep

CLIENT = [sys.executable, str(Path(__file__).resolve().parent / "sweep_client.py")]


def test_parse_latency_list() -> None:
    assert parse_latency_list("0,10,50,200ms") == pytest.approx([0.0, 0.01, 0.05, 0.2])
    assert parse_latency_list("0.1,0.2s") == pytest.approx([0.1, 0.2])
    assert parse_latency_list("0") == [0.0]
    for bare in ("5", "0,10,50"):  # no unit anywhere: refused, never guessed
        with pytest.raises(ValueError, match="unit"):
            parse_latency_list(bare)
    with pytest.raises(ValueError):
        parse_latency_list("")
    with pytest.raises(ValueError):
        parse_latency_list("fast")


def test_the_table_shows_the_threshold(tmp_path: Path) -> None:
    result = sweep(CLIENT, [0.0, 0.1], 2, tmp_path, timeout=30)
    assert [r.exit_code for r in result.results] == [0, 0, 0, 0]
    assert result.count(0.0, "RT101") == 0
    assert result.count(0.1, "RT101") == 2
    assert result.has_errors()
    for r in result.results:
        assert r.trace.exists() and r.trace.parent == tmp_path
    assert [r.trace.name for r in result.results if r.latency == 0.1] == [
        "latency-100ms-run1.jsonl",
        "latency-100ms-run2.jsonl",
    ]


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "o")
    assert main(["sweep", "--latency", "0", "--runs", "1", "--out", out, "--", *CLIENT]) == 0
    assert "no finding at any latency" in capsys.readouterr().out
    assert main(["sweep", "--latency", "150ms", "--runs", "1", "--out", out, "--", *CLIENT]) == 1
    assert "RT101" in capsys.readouterr().out
    assert main(["sweep", "--latency", "nope", "--runs", "1", "--", *CLIENT]) == 2


def test_a_failing_or_hanging_command_is_reported(tmp_path: Path) -> None:
    result = sweep([sys.executable, "-c", "import sys; sys.exit(3)"], [0.0], 1, tmp_path, timeout=10)
    assert result.results[0].exit_code == 3 and not result.has_errors()
    result = sweep([sys.executable, "-c", "import time; time.sleep(30)"], [0.0], 1, tmp_path, timeout=0.5)
    assert result.results[0].exit_code is None


def test_a_command_that_fails_in_every_run_is_exit_4_with_how_it_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sweep -- false` once said "no finding at any latency" and exited 0: a CI passed while its test failed."""
    out = str(tmp_path / "o")
    failing = [sys.executable, "-c", "import sys; print('boom: the agent crashed', file=sys.stderr); sys.exit(3)"]
    assert main(["sweep", "--latency", "0,5ms", "--runs", "2", "--out", out, "--", *failing]) == 4
    captured = capsys.readouterr()
    assert "the command failed in every run (4 of 4: exit 3)" in captured.err
    assert "last lines of its stderr (5ms run 2):" in captured.err and "  boom: the agent crashed" in captured.err
    assert main(["sweep", "--latency", "0", "--runs", "1", "--out", out, "--", "false"]) == 4
    assert "(1 of 1: exit 1)" in capsys.readouterr().err
    killed = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    assert main(["sweep", "--latency", "0", "--runs", "1", "--out", out, "--", *killed]) == 4
    assert "killed by SIGKILL" in capsys.readouterr().err


def test_a_command_that_fails_in_some_runs_only_is_not_a_sweep_failure(tmp_path: Path) -> None:
    flag = tmp_path / "ran-once"
    flaky = [sys.executable, "-c", f"import os, sys; p = {str(flag)!r}; ok = os.path.exists(p); open(p, 'w'); "
             "sys.exit(0 if ok else 1)"]  # fmt: skip
    result = sweep(flaky, [0.0], 2, tmp_path, timeout=30)
    assert [r.exit_code for r in result.results] == [1, 0] and not result.failed_every_run()
    assert main(["sweep", "--latency", "0", "--runs", "1", "--out", str(tmp_path / "o"), "--", "true"]) == 0


def test_a_missing_command_is_a_usage_error_before_any_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    assert main(["sweep", "--runs", "1", "--out", str(out), "--", "no-such-cmd-rtrace", "x"]) == 2
    assert "sweep: no-such-cmd-rtrace: command not found (not on PATH)" in capsys.readouterr().err
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    assert main(["sweep", "--runs", "1", "--out", str(out), "--", str(script)]) == 2
    assert "not executable" in capsys.readouterr().err
    assert main(["sweep", "--runs", "1", "--out", str(out), "--", str(tmp_path / "gone")]) == 2
    err = capsys.readouterr().err
    assert "no such file" in err and "internal error" not in err
    assert not out.exists()  # nothing ran


def test_each_latency_is_announced_with_the_faults_in_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sweep", "--latency", "0,20ms", "--runs", "1", "--out", str(tmp_path), "--drop-on",
            "conversation.item.create:function_call_output", "--close-code", "1011", "--", "true"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "at 0ms: no latency, no jitter; faults (once each): drop the socket (close 1011) when the client sends " \
        "conversation.item.create:function_call_output" in out
    assert "at 20ms: latency 20ms on every server event, no jitter; faults" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--latency", "0,10,50"], "--latency 0,10,50: a list of durations needs a unit, on its last item at least"),
        (["--timeout", "30"], "--timeout 30: a duration needs a unit: 30ms or 30s"),
        (["--drop-on", "bogus.type"], "--drop-on bogus.type: 'bogus.type' is not a client event"),
        (["--error-on", "response.creat"], "did you mean response.create?"),
        (["--drop-after", "response.create"], "response.create is a client event"),
        (["--expire-after", "10"], "--expire-after 10: a duration needs a unit: 10ms or 10s"),
    ],
)
def test_bad_sweep_options_are_usage_errors_naming_the_fix(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "--runs", "1", "--out", str(tmp_path / "o"), *argv, "--", "true"]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_command_writing_one_endless_line_to_stderr_is_drained_and_cut(tmp_path: Path) -> None:
    noisy = [sys.executable, "-c", "import sys; sys.stderr.write('x' * 300000); sys.exit(2)"]
    result = sweep(noisy, [0.0], 1, tmp_path, timeout=30)
    (run,) = result.results
    assert run.exit_code == 2 and run.stderr_tail == ["x" * 2000]


def test_no_finding_comes_from_an_earlier_sweeps_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    assert main(["sweep", "--latency", "150ms", "--runs", "1", "--out", str(out), "--", *CLIENT]) == 1
    assert "RT101" in capsys.readouterr().out
    # the same --out, a command that never connects: its runs have no trace, and none of the first sweep's
    assert main(["sweep", "--latency", "150ms", "--runs", "1", "--out", str(out), "--", "true"]) == 0
    assert "RT101" not in capsys.readouterr().out
    assert (out / "1" / "latency-150ms-run1.jsonl").exists() and not (out / "2" / "latency-150ms-run1.jsonl").exists()
    result = sweep(["true"], [0.0], 1, out / "1", timeout=10)  # into the first's own directory: its trace goes
    assert result.results[0].problem == NO_CONNECTION and result.results[0].findings == []


def test_a_directory_as_the_command_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--runs", "1", "--out", str(tmp_path / "o"), "--", str(tmp_path)]) == 2
    assert f"sweep: {tmp_path}: a directory, not a program" in capsys.readouterr().err


def test_a_signal_stops_a_sweep_at_once_with_the_table_of_the_runs_done(tmp_path: Path) -> None:
    import signal

    from .test_net_hunt_processes import gone, stopped_by

    status, took, _, err, pid = stopped_by(signal.SIGTERM, ["sweep", "--runs", "3", "--out", str(tmp_path / "o")],
                                           tmp_path)  # fmt: skip
    assert status == 143 and took < 2.5
    assert "sweep interrupted (SIGTERM): a partial table, of the 0 runs done" in err
    assert gone(pid)
