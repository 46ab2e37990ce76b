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
    for option, value, least in (("--max-bugs", "-1", 0), ("--jobs", "0", 1), ("--repro-runs", "0", 1)):
        assert main(["hunt", "--runs", "1", option, value, "--out", str(tmp_path / "h"), "--", "true"]) == 2
        assert f"{option} {value}: give {least} or more" in capsys.readouterr().err


SCRIPT = """# the agent's test scripts the model: its tool is called on the user's question
[[turn]]
when = { user = "weather" }
call = { name = "get_forecast", arguments = { city = "Paris" } }
"""


def test_hunt_runs_every_schedule_on_the_users_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--script FILE`: an agent that needs its tool call scripted runs (the clean run too) on the user's script,
    the hunt's faults acting on top of it; each bug's script holds both, and its command names the script."""
    import sys

    from rtrace.net.faults.script import load_script
    from rtrace.net.hunt.hunt import load_schedule

    script = tmp_path / "agent.toml"
    script.write_text(SCRIPT, encoding="utf-8")
    client = ["env", "SWEEP_CLIENT_TOOL=get_forecast", sys.executable, str(Path(__file__).parent / "sweep_client.py")]
    base = ["hunt", "--runs", "1", "--repro-runs", "2", "--shrink-runs", "1", "-f", "json"]
    # without the script the agent cannot run at all: nothing to hunt
    assert main([*base, "--out", str(tmp_path / "bare"), "--", *client]) == 4
    capsys.readouterr()
    assert main([*base, "--script", str(script), "--out", str(tmp_path / "h"), "--", *client]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"]["exit"] == "exit 0"
    (bug,) = [b for b in doc["bugs"] if b["rule"] == "RT101"]
    assert bug["rate"] == 1.0 and [f["kind"] for f in bug["schedule"]["faults"]] == ["latency"]
    command = bug["command"].split()
    assert command[:5] == ["rtrace", "hunt", "--script", str(script), "--schedule"]
    # the bug's script runs by hand with serve --script: the user's turn is in it
    by_hand = load_script(bug["script_path"])
    assert [t.calls[0].name for t in by_hand.turns if t.calls] == ["get_forecast"]
    assert load_schedule(bug["script_path"]).to_json() == bug["schedule"]
    again = ["hunt", "--script", str(script), "--schedule", command[5], "--runs", "1", "-f", "json"]
    assert main([*again, "--out", str(tmp_path / "again"), "--", *client]) == 1
    assert [b["rule"] for b in json.loads(capsys.readouterr().out)["bugs"]] == ["RT101"]


def test_hunt_script_errors_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[turn]]\nwhen = { user = 3 }\n", encoding="utf-8")
    assert main(["hunt", "--runs", "1", "--script", str(bad), "--out", str(tmp_path), "--", "true"]) == 2
    assert "bad.toml:" in capsys.readouterr().err


def _latency_script(path: Path) -> Path:
    from rtrace.net.faults.schedule import Fault, Schedule

    schedule = Schedule((Fault("latency", "all", "*", 0.05),), 3)
    path.write_text(schedule.script_toml() + f"# rtrace-schedule: {json.dumps(schedule.to_json())}\n")
    return path


def test_no_finding_comes_from_another_hunts_trace_and_a_re_run_keeps_its_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    client = [sys.executable, str(Path(__file__).parent / "sweep_client.py")]
    script = _latency_script(tmp_path / "bug-4.toml")
    out = tmp_path / "h"
    base = ["hunt", "--schedule", str(script), "--runs", "1", "--out", str(out), "-f", "json"]
    assert main([*base, "--", *client]) == 1
    first = json.loads(capsys.readouterr().out)
    assert [b["rule"] for b in first["bugs"]] == ["RT101"]
    # the entry keeps the number of the script it re-ran, in a directory of this hunt's own
    assert first["out_dir"] == str(out / "1") and first["bugs"][0]["script_path"] == str(out / "1" / "bug-4.toml")
    # the same --out, a command that never connects: no trace of its own, and no finding of the first's
    assert main([*base, "--", "true"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["bugs"] == [] and second["out_dir"] == str(out / "2")
    assert (out / "1" / "bug-4.toml").exists() and (out / "1" / "runs" / "run0001.jsonl").exists()
    assert not (out / "2" / "runs" / "run0001.jsonl").exists()


@pytest.mark.parametrize(
    ("where", "message"),
    [("file", "a file, not a directory"), ("under-file", "cannot make the directory (a part of it is a file)"),
     ("proc", "cannot make the directory")],
)
def test_an_odd_out_is_refused_before_any_run(
    where: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f").write_text("x")
    out = {"file": tmp_path / "f", "under-file": tmp_path / "f" / "d", "proc": Path("/proc/rtrace-hunt")}[where]
    ran = tmp_path / "ran"
    assert main(["hunt", "--runs", "1", "--out", str(out), "--", "touch", str(ran)]) == 2
    assert f"--out {out}: {message}" in capsys.readouterr().err
    assert not ran.exists()


def test_an_unwritable_output_is_refused_before_any_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ran = tmp_path / "ran"
    for output in (tmp_path / "no" / "such" / "dir.json", tmp_path, Path("/proc/x.json")):
        argv = ["hunt", "--runs", "1", "--out", str(tmp_path / "h"), "-o", str(output), "--", "touch", str(ran)]
        assert main(argv) == 2
        assert f"-o {output}: cannot write there" in capsys.readouterr().err
    assert not ran.exists()


def test_the_budget_is_wall_time_and_a_clean_run_it_cut_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    start = time.monotonic()
    argv = ["hunt", "--budget", "2s", "--out", str(tmp_path), "-o", str(tmp_path / "r.json"), "--", "sleep", "60"]
    assert main(argv) == 4
    assert time.monotonic() - start < 6
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["stopped"] == "budget" and doc["not_done"][0] == "the clean run (cut by the budget)"
    err = capsys.readouterr().err  # the summary reaches the terminal even with -o
    assert "not done: the clean run (cut by the budget)" in err and f"report: {tmp_path / 'r.json'}" in err


@pytest.mark.parametrize(("sig", "code"), [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_signal_stops_the_hunt_within_two_seconds_with_a_partial_report(sig: str, code: int, tmp_path: Path) -> None:
    import signal

    from .test_net_hunt_processes import gone, stopped_by

    status, took, out, err, pid = stopped_by(getattr(signal, sig), ["hunt", "--budget", "5m", "--out", str(tmp_path)],
                                             tmp_path)  # fmt: skip
    assert status == code and took < 2.5, err
    assert f"interrupted ({sig}): a partial report" in out
    assert "not done: the clean run (cut short)" in out
    assert gone(pid)


def test_the_cap_keeps_the_data_loss_and_names_what_it_left_out(tmp_path: Path) -> None:
    """`--max-bugs 1` on the test client that deletes its tool output and gives up on every close: the deleted
    output is the entry, the client that gave up is counted and named as seen and not reported."""
    import sys

    client = [sys.executable, str(Path(__file__).parent / "sweep_client.py")]
    argv = ["hunt", "--runs", "6", "-j", "2", "--repro-runs", "1", "--shrink-runs", "1", "--max-bugs", "1",
            "--out", str(tmp_path / "h"), "-o", str(tmp_path / "hunt.json"), "--", *client]  # fmt: skip
    assert main(argv) == 1
    doc = json.loads((tmp_path / "hunt.json").read_text(encoding="utf-8"))
    assert [b["rule"] for b in doc["bugs"]] == ["RT101"]
    assert doc["left_out"] and any("gave up" in line for line in doc["left_out"])


def test_hunt_tls_serves_wss_and_gives_the_command_the_trust_variables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--tls`: every run's server speaks wss:// with the made certificate, and the command is told the variables
    that trust it (printed first): a client that refuses anything but wss:// (tests/sweep_client.py behind a
    check of its URL, trusting by SSL_CERT_FILE as Python's ssl does) is hunted unchanged and its bug found."""
    import sys

    monkeypatch.setenv("RTRACE_TLS_DIR", str(tmp_path / "tls"))
    client = Path(__file__).parent / "sweep_client.py"
    wss_only = f'case "$RTRACE_URL" in wss://*) exec "{sys.executable}" "{client}";; *) exit 5;; esac'
    base = ["hunt", "--runs", "1", "--repro-runs", "1", "--shrink-runs", "1", "--max-bugs", "1"]
    args = [*base, "--tls", "--out", str(tmp_path / "h"), "-o", str(tmp_path / "hunt.json")]
    assert main([*args, "--", "sh", "-c", wss_only]) == 1
    doc = json.loads((tmp_path / "hunt.json").read_text(encoding="utf-8"))
    assert [b["rule"] for b in doc["bugs"]] == ["RT101"]
    err = capsys.readouterr().err
    ca = tmp_path / "tls" / "ca.pem"
    assert f"SSL_CERT_FILE={ca}" in err and f"NODE_EXTRA_CA_CERTS={ca}" in err and ca.is_file()
    # without --tls the same client refuses the ws:// URL: its clean run fails
    assert main([*base, "--out", str(tmp_path / "plain"), "--", "sh", "-c", wss_only]) == 4


def test_hunt_upstream_guards_and_says_what_it_leaves_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--upstream`: a real endpoint (not this machine) needs --runs (every run a billed session, said on the first
    line); a fault only the fake model makes is a usage error; what the search leaves out is said."""
    out = ["--out", str(tmp_path)]
    assert main(["hunt", "--upstream", "wss://api.example.test/v1/realtime", *out, "--", "true"]) == 2
    assert "every run is a real, billed session" in capsys.readouterr().err
    script = tmp_path / "s.toml"
    script.write_text('[[turn]]\nwhen = { response = 1 }\nfail = "server_error"\n', encoding="utf-8")
    args = ["hunt", "--upstream", "ws://127.0.0.1:9/v1", "--runs", "1", "--script", str(script), *out, "--", "true"]
    assert main(args) == 2
    assert "only the fake endpoint can make this fault" in capsys.readouterr().err
    assert main(["hunt", "--upstream", "http://127.0.0.1:9/v1", "--runs", "1", *out, "--", "true"]) == 2
    from rtrace.net.faults.schedule import Fault, Schedule
    from rtrace.net.hunt.hunt import SCHEDULE_LINE

    bug = tmp_path / "bug-1.toml"
    failed = Schedule((Fault("fail", "response", "", "server_error", 1),))
    bug.write_text(f"{SCHEDULE_LINE}{json.dumps(failed.to_json())}\n", encoding="utf-8")
    assert main(["hunt", "--upstream", "ws://127.0.0.1:9/v1", "--schedule", str(bug), *out, "--", "true"]) == 2
    assert "its faults need the fake model" in capsys.readouterr().err
    capsys.readouterr()
    # an unreachable upstream: the clean run fails (the proxy answers 502), and the first line said what is left out
    assert main(["hunt", "--upstream", "ws://127.0.0.1:9/v1", "--runs", "1", *out, "--", "false"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("rtrace hunt: through a link to ws://127.0.0.1:9/v1; left out") and "barge_in" in err


def test_a_full_disk_under_out_stops_the_hunt_with_exit_3_never_blaming_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from .test_core_writer import traces_onto_a_full_disk

    traces_onto_a_full_disk(monkeypatch)
    client = [sys.executable, str(Path(__file__).parent / "sweep_client.py")]
    assert main(["hunt", "--runs", "3", "--out", str(tmp_path / "h"), "--", *client]) == 3
    captured = capsys.readouterr()
    assert "the hunt stopped: a run's trace could not be written under" in captured.err
    assert "discarded: its trace could not be written (No space left on device)" in captured.out
    assert "the command failed its clean run" not in captured.out
