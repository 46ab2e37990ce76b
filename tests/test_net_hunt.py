"""`rtrace hunt`'s runner (rtrace/net/hunt.py) on a small client with a latency bug and no reconnect
(tests/sweep_client.py): the clean run, the search, shrinking, the reproduction rate, minimizing, the survival
findings, a flaky finding kept apart, and `--schedule` re-runs."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

import pytest

from rtrace.engine.fold import analyze_path
from rtrace.net.hunt import CommandTarget, HuntOptions, hunt, hunt_async, load_schedule, records_of
from rtrace.net.schedule import SURVIVAL, Fault, Schedule
from rtrace.net.script import load_script
from rtrace.net.server import ServerOptions
from rtrace.net.sweep import CommandNotFound
from rtrace.rules import RULES

CLIENT = [sys.executable, str(Path(__file__).parent / "sweep_client.py")]


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("hunt")
    seen = []
    result = hunt(CLIENT, HuntOptions(budget=None, runs=8, jobs=2, timeout=30, shrink_runs=2, repro_runs=3,
                                      out_dir=out), seen.append)  # fmt: skip
    return result, seen


def test_the_clean_run_comes_first_and_learns_the_surface(found) -> None:  # type: ignore[no-untyped-def]
    result, _ = found
    assert result.runs[0].phase == "clean run" and result.runs[0].schedule.clean
    assert result.clean.survived and result.baseline == []
    client = dict(result.surface.client)
    assert "conversation.item.create:function_call_output" in client and "response.create" in client
    assert result.stopped == "runs"
    assert sum(1 for r in result.runs if r.phase in ("systematic", "random")) == 8


def test_the_latency_bug_is_found_shrunk_and_reproduced(found) -> None:  # type: ignore[no-untyped-def]
    result, _ = found
    (bug,) = [b for b in result.bugs if b.rule == "RT101"]
    assert bug.slug == "deleted-function-call-output" and bug.key.items == ("function_call", "function_call_output")
    assert [f.kind for f in bug.schedule.faults] == ["latency"]
    assert 0.03 <= bug.schedule.latency()[0] <= 0.05  # the client waits 30 ms for its ack
    assert bug.hits == bug.tries == 3
    # the script runs by hand; its schedule reads back; the minimized trace still shows the finding
    assert bug.script is not None and load_schedule(bug.script) == bug.schedule
    load_script(bug.script)
    assert bug.minimized is not None and "RT101" in {f.rule for f in analyze_path(bug.minimized).findings}
    assert bug.command.startswith("rtrace hunt --schedule ") and bug.command.endswith("sweep_client.py")


def test_one_bug_one_entry(found) -> None:  # type: ignore[no-untyped-def]
    result, _ = found
    keys = [b.key for b in result.bugs]
    assert len(keys) == len(set(keys))
    # the client gives up on a drop, wherever it comes: one survival bug per kind of fault, not per event type
    survival = [b for b in result.bugs if b.rule == SURVIVAL]
    assert survival and len({b.key.faults for b in survival}) == len(survival)
    assert all(b.how == "exit 1" and b.reproduced for b in survival)


def test_each_run_trace_holds_its_seed_and_schedule(found) -> None:  # type: ignore[no-untyped-def]
    result, _ = found
    for run in result.runs[:4]:
        header = json.loads(run.trace.read_text(encoding="utf-8").splitlines()[0])
        assert header["hunt"]["schedule"] == run.schedule.to_json() and header["hunt"]["seed"] == run.schedule.seed


def test_progress_after_each_run(found) -> None:  # type: ignore[no-untyped-def]
    result, seen = found
    assert [p.runs for p in seen] == list(range(1, len(result.runs) + 1))
    assert seen[-1].bugs >= len(result.bugs) - 1


@dataclasses.dataclass
class OnceTarget:
    """The client shows its latency bug in its first run under latency only: later runs get no latency."""

    inner: CommandTarget
    latency_runs: int = 0

    async def run(self, options: ServerOptions, timeout: float) -> tuple[int | None, list[str]]:
        if options.latency:
            self.latency_runs += 1
            if self.latency_runs > 1:
                options = dataclasses.replace(options, latency=0.0)
        return await self.inner.run(options, timeout)

    def reproduce(self, script: Path, schedule: Schedule, runs: int) -> str:
        return self.inner.reproduce(script, schedule, runs)


def test_a_finding_no_re_run_reproduces_is_not_a_bug(tmp_path: Path) -> None:
    options = HuntOptions(budget=None, runs=1, timeout=30, shrink_runs=1, repro_runs=2, out_dir=tmp_path)
    result = asyncio.run(hunt_async(OnceTarget(CommandTarget(CLIENT)), options))
    assert not [b for b in result.bugs if b.rule == "RT101"]
    (unconfirmed,) = [b for b in result.unconfirmed if b.rule == "RT101"]
    assert unconfirmed.hits == 0 and unconfirmed.tries == 2


def test_a_schedule_is_re_run_for_its_rate(tmp_path: Path) -> None:
    schedule = Schedule((Fault("latency", "all", "*", 0.05),), 3)
    script = tmp_path / "bug.toml"
    script.write_text(schedule.script_toml() + f"# rtrace-schedule: {json.dumps(schedule.to_json())}\n")
    result = hunt(CLIENT, HuntOptions(runs=2, timeout=30, out_dir=tmp_path / "out", schedules=[load_schedule(script)]))
    (bug,) = [b for b in result.bugs if b.rule == "RT101"]
    assert (bug.hits, bug.tries) == (2, 2) and bug.schedule == schedule


def test_a_command_that_fails_its_clean_run_is_not_hunted(tmp_path: Path) -> None:
    result = hunt([sys.executable, "-c", "raise SystemExit(3)"], HuntOptions(runs=5, out_dir=tmp_path))
    assert result.clean_failed and result.stopped == "clean run failed" and len(result.runs) == 1


def test_a_command_not_found_is_refused_before_any_run(tmp_path: Path) -> None:
    with pytest.raises(CommandNotFound):
        hunt(["no-such-command-rtrace"], HuntOptions(runs=1, out_dir=tmp_path))
    with pytest.raises(ValueError, match="--budget or --runs"):
        hunt(CLIENT, HuntOptions(budget=None, out_dir=tmp_path))


def test_load_schedule_names_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    path.write_text("[[turn]]\n")
    with pytest.raises(ValueError, match="no `# rtrace-schedule:` line"):
        load_schedule(path)
    path.write_text("# rtrace-schedule: {not json\n")
    with pytest.raises(ValueError, match=r"x.toml:1: the schedule is not readable"):
        load_schedule(path)


def test_load_schedule_reads_its_file_as_every_side_input_is_read(tmp_path: Path) -> None:
    """`hunt --schedule FILE` is a side input: a FIFO is refused by name (never waited on), a file over the script
    cap is refused, and a schedule nested 100,000 deep is a message, not a RecursionError."""
    import os

    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"fifo\.toml: cannot read the schedule"):
        load_schedule(fifo)
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (2 << 20))
    with pytest.raises(ValueError, match=r"over the .*-byte limit"):
        load_schedule(big)
    deep = tmp_path / "deep.toml"
    deep.write_text("# rtrace-schedule: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ValueError, match=r"deep.toml:1: the schedule is not readable: nested deeper than"):
        load_schedule(deep)


def test_records_of_skips_the_header_and_broken_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"rtrace": 1}\n{"t": 0, "dir": "client", "conn": 1, "event": {}}\nnot json\n')
    assert len(records_of(path)) == 1


def test_each_bug_carries_the_finding_of_its_own_rule(found) -> None:  # type: ignore[no-untyped-def]
    result, _ = found
    for bug in result.bugs:
        if bug.rule != SURVIVAL:
            assert any(r.id == bug.rule and r.slug == bug.slug for r in RULES), bug


def test_findings_that_restate_the_injected_fault_are_no_bug() -> None:
    from rtrace.net.hunt import echoes
    from rtrace.rules.base import Finding

    def finding(rule: str, severity: str) -> Finding:
        return Finding(rule, "x", severity, 1, "m", "e", (), {}, "f", 1)  # type: ignore[arg-type]

    assert echoes(finding("RT112", "info"), {"error"}) and not echoes(finding("RT112", "info"), {"drop"})
    assert echoes(finding("RT112", "info"), {"barge_in"}) and echoes(finding("RT112", "info"), {"cancel"})
    assert echoes(finding("RT119", "warning"), {"expire"})
    assert echoes(finding("RT107", "warning"), {"close"})  # the server's close cut the response
    assert not echoes(finding("RT107", "error"), {"close"})  # the client left its own generation open
    assert not echoes(finding("RT101", "error"), {"latency", "close", "error"})


def test_a_warning_on_the_items_of_an_error_of_the_same_run_is_reported_with_it() -> None:
    from rtrace.net.hunt import consequence_of
    from rtrace.rules.base import Finding

    deleted = Finding("RT101", "d", "error", 1, "m", "e", (), {"call_ids": ("c1",)}, "f", 9)
    unanswered = Finding("RT103", "u", "warning", 1, "m", "e", (), {"call_ids": ("c1",)}, "f", 12)
    other = Finding("RT122", "l", "warning", 1, "m", "e", (), {"items": ("u9",)}, "f", 14)
    findings = [deleted, unanswered, other]
    assert consequence_of(unanswered, findings) is deleted
    assert consequence_of(other, findings) is None and consequence_of(deleted, findings) is None
