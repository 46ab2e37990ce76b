"""`rtrace hunt` (rtrace/cli/hunt.py) on the small test client with a latency bug (tests/sweep_client.py): the
report, the one command that reproduces a bug, the exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtrace.cli import main


def test_hunt_reports_each_bug_and_exits_as_fail_on_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    client = [sys.executable, str(Path(__file__).parent / "sweep_client.py")]
    base = ["hunt", "--runs", "2", "--repro-runs", "2", "--shrink-runs", "1", "--out", str(tmp_path / "h")]
    assert main([*base, "-o", str(tmp_path / "hunt.json"), "--", *client]) == 1
    doc = json.loads((tmp_path / "hunt.json").read_text(encoding="utf-8"))
    rt101 = [b for b in doc["bugs"] if b["rule"] == "RT101"]
    assert rt101 and rt101[0]["slug"] == "deleted-function-call-output" and rt101[0]["rate"] == 1.0
    err = capsys.readouterr().err
    assert "hunt: 1 run, 0 distinct bugs" in err and "[clean run] no fault: exit 0, nothing" in err
    # the bug's one command reproduces it (a schedule re-run); --fail-on never never fails
    command = rt101[0]["command"].split()
    assert command[:3] == ["rtrace", "hunt", "--schedule"]
    again = ["hunt", "--schedule", command[3], "--runs", "1", "--out", str(tmp_path / "again"), "-f", "json"]
    assert main([*again, "--", *client]) == 1
    assert [b["rule"] for b in json.loads(capsys.readouterr().out)["bugs"]] == ["RT101"]
    assert main([*again, "--fail-on", "never", "--", *client]) == 0


def test_hunt_of_a_command_that_fails_clean_is_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hunt", "--runs", "3", "--out", str(tmp_path), "--", "false"]) == 4
    assert "the command failed its clean run" in capsys.readouterr().out


def test_hunt_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hunt", "--runs", "1", "--", "no-such-command-rtrace"]) == 2
    assert "command not found" in capsys.readouterr().err
    assert main(["hunt", "--budget", "0", "--", "true"]) == 2
    assert "give --budget or --runs" in capsys.readouterr().err
    assert main(["hunt", "--runs", "1", "--schedule", str(tmp_path / "none.toml"), "--", "true"]) == 2
    assert "cannot read the schedule" in capsys.readouterr().err
