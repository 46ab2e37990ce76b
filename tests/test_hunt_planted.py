"""`rtrace hunt` on small clients with one planted bug each (tests/planted_client.py): each planted bug is an entry
of its own, named after what the client did wrong; the correct variants have none; an injected answer alone is
never an entry. Short hunts (a few systematic runs, `-j 2`): bench/hunt_planted.py measures the 3-minute ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rtrace.cli import main

HERE = Path(__file__).parent
CLIENT = [sys.executable, str(HERE / "planted_client.py")]
PARALLEL = HERE / "planted_parallel.toml"


def hunt(tmp_path: Path, mode: str, runs: int, *extra: str, correct: bool = False) -> list[dict[str, Any]]:
    out = tmp_path / f"{mode}{'-correct' if correct else ''}"
    script = ["--script", str(PARALLEL)] if mode == "parallel" else []
    argv = ["hunt", *script, "--runs", str(runs), "-j", "2", "--repro-runs", "1", "--shrink-runs", "1",
            "--timeout", "20s", "--out", str(out), "-o", str(out / "hunt.json"), *extra, "--",
            *CLIENT, mode, *(["--correct"] if correct else [])]  # fmt: skip
    code = main(argv)
    bugs: list[dict[str, Any]] = json.loads((out / "hunt.json").read_text(encoding="utf-8"))["bugs"]
    assert code == (1 if any(b["severity"] == "error" for b in bugs) else 0)
    return bugs


@pytest.fixture(autouse=True)
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANTED_WAIT", "1")  # the clients' own test deadline for an answer


@pytest.fixture(scope="module")
def gave_up(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """One hunt of the client that gives up, read by the test of its entry and by the test of its regression test."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLANTED_WAIT", "1")
        return hunt(tmp_path_factory.mktemp("planted"), "give-up", 8)


def families(bugs: list[dict[str, Any]]) -> list[str]:
    return [b["cause"]["family"] for b in bugs]


def test_a_client_that_gives_up_on_a_close_is_one_entry_listing_the_faults(gave_up: list[dict[str, Any]]) -> None:
    bugs = gave_up
    assert families(bugs) == ["gave up"]
    (bug,) = bugs
    assert bug["rule"] == "RT127" and len(bug["seen_under"]) >= 3  # two drops and closes: one entry
    assert bug["sentence"].startswith("The client gave up") and "surface the close" in bug["fix"]


def test_a_client_that_loses_an_output_on_reconnect(tmp_path: Path) -> None:
    bugs = hunt(tmp_path, "lose-output", 7)
    assert families(bugs) and set(families(bugs)) == {"items lost on reconnect"}
    assert any("function_call_output" in b["about"]["items"] for b in bugs)
    assert all(b["cause"]["reaction"] == "reconnected and lost data" for b in bugs)


def test_a_client_that_hangs_after_a_reconnect(tmp_path: Path) -> None:
    bugs = hunt(tmp_path, "hang", 6)
    assert families(bugs) == ["turn lost on reconnect"]  # the reply it asked for, never asked again
    assert bugs[0]["rule"] in ("RT124", "RT126")
    assert "client-did-not-survive" in {r["rule"] for r in bugs[0]["rules"]}  # how its test ended: with it


def test_a_hang_entry_never_claims_less_quiet_than_the_clients_own_deadline(tmp_path: Path) -> None:
    """The hang client waits 1 s (its test's deadline) for the reply it never asks again for, then fails. With
    --hung-after 0.4s the search ends its runs early (candidates); the re-runs that confirm wait 4 x 0.4 s, see
    the client's own deadline pass, and the entry is the client's failure at it, never "ended early: quiet 0.4s"
    (a client only waiting is not hung)."""
    bugs = hunt(tmp_path, "hang", 6, "--hung-after", "0.4s")
    assert families(bugs) == ["turn lost on reconnect"]
    assert [b["ended_early"] for b in bugs] == [None]


def test_a_client_that_answers_parallel_calls_early(tmp_path: Path) -> None:
    bugs = hunt(tmp_path, "parallel", 1)
    assert [(b["rule"], b["schedule"]["faults"]) for b in bugs] == [("RT103", [])]  # no fault needed


@pytest.mark.parametrize("mode", ["give-up", "lose-output", "hang", "parallel"])
def test_the_correct_variants_have_no_entry(tmp_path: Path, mode: str) -> None:
    assert hunt(tmp_path, mode, 8, correct=True) == []


def test_an_injected_answer_alone_is_never_an_entry(tmp_path: Path) -> None:
    """The server refuses the careful client's tool output (`invalid_tool_call_id`) and its reply
    (`conversation_already_has_active_response`), as a hunt injects them: the client sends them again, and what
    the refusals restate (RT104, RT111, the call they left unanswered) is the fault speaking."""
    schedule = tmp_path / "refusals.toml"
    faults = [{"kind": "error", "moment": "event", "target": "conversation.item.create:function_call_output",
               "value": "invalid_tool_call_id", "k": 1},
              {"kind": "error", "moment": "event", "target": "response.create",
               "value": "conversation_already_has_active_response", "k": 1}]  # fmt: skip
    schedule.write_text(f"# rtrace-schedule: {json.dumps({'seed': 0, 'faults': faults})}\n", encoding="utf-8")
    bugs = hunt(tmp_path, "lose-output", 1, "--schedule", str(schedule), correct=True)
    assert bugs == []
    trace = (tmp_path / "lose-output-correct" / "1" / "runs" / "run0001.jsonl").read_text(encoding="utf-8")
    assert trace.count('"fault.injected"') == 2 and "conversation_already_has_active_response" in trace
    # what analyze says of that trace: the fault's refusals are no verdict on the client
    report = tmp_path / "analyze.json"
    main(["analyze", str(tmp_path / "lose-output-correct" / "1" / "runs" / "run0001.jsonl"), "-o", str(report)])
    rules = {f["rule"] for t in json.loads(report.read_text(encoding="utf-8"))["traces"] for f in t["findings"]}
    assert not rules & {"RT104", "RT111"}, rules


def test_a_hunt_trace_replayed_against_the_fake_shows_its_finding_again(tmp_path: Path) -> None:
    """`rtrace replay` injects the faults of the trace's header: the turn the close cut is lost again."""
    from rtrace.net.replay.runner import ReplayOptions, replay

    schedule = tmp_path / "cut.toml"
    cut = [{"kind": "close", "moment": "sent", "target": "response.created", "value": 1011, "k": 1}]
    schedule.write_text(f"# rtrace-schedule: {json.dumps({'seed': 0, 'faults': cut})}\n", encoding="utf-8")
    bugs = hunt(tmp_path, "hang", 1, "--schedule", str(schedule))
    assert [b["rule"] for b in bugs] == ["RT126"]
    result = replay(str(tmp_path / "hang" / "1" / "runs" / "run0001.jsonl"), ReplayOptions())
    assert "injected by the fake" in result.faults
    assert result.replay_report is not None and "RT126" in {f.rule for f in result.replay_report.findings}


def test_each_entry_carries_a_regression_test_that_fails_while_the_bug_is_there(
    gave_up: list[dict[str, Any]], tmp_path: Path
) -> None:
    """`bug-N_test.py` (the plugin's fixture, the entry's script): red on the client with the bug, green on the
    fixed one (the same command with `--correct`)."""
    import shutil
    import subprocess

    (bug,) = gave_up
    found = Path(bug["regression_test"])
    assert found.name == "bug-1_test.py" and found.with_name("bug-1.toml").exists()
    test = tmp_path / found.name  # a copy beside its script: the shared hunt's directory stays as it was written
    shutil.copy(found, test)
    shutil.copy(found.with_name("bug-1.toml"), tmp_path)

    def pytest_on(path: Path) -> int:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
                              cwd=path.parent, capture_output=True, text=True, timeout=120)  # fmt: skip
        return done.returncode

    assert pytest_on(test) == 1  # the bug is there
    fixed = test.with_name("bug-1_fixed_test.py")
    fixed.write_text(test.read_text(encoding="utf-8").replace("'give-up']", "'give-up', '--correct']"))
    assert pytest_on(fixed) == 0
