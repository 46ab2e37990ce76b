"""A hunt's runs (rtrace/net/hunt/runs.py), on a fake clock and a fake client: the budget is wall time (a run is
given what is left of it, one the budget cut is not judged), shrinking ends at its share, a progress line comes as
a run starts and every `heartbeat` seconds while it goes on, and a stop ends the run in flight."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from rtrace.net.faults.schedule import Schedule
from rtrace.net.hunt.processes import Ended, Stopped
from rtrace.net.hunt.runs import SEARCH_SHARE, SHRINK_SHARE, HuntOptions, Progress, Run, Runner, Spent
from rtrace.net.link.server import ServerOptions


@dataclasses.dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclasses.dataclass
class SlowTarget:
    """Each run takes `seconds` of the fake clock, or is cut at the timeout it is given (as a command killed)."""

    clock: Clock
    seconds: float
    timeouts: list[float] = dataclasses.field(default_factory=list)

    async def run(self, options: ServerOptions, timeout: float, quiet: float | None = None) -> Ended:
        self.timeouts.append(timeout)
        await asyncio.sleep(0)
        if self.seconds > timeout:
            self.clock.now += timeout
            return Ended(None, cut="timeout")
        self.clock.now += self.seconds
        return Ended(0)

    def reproduce(self, script: Path, schedule: Schedule, runs: int) -> str:
        return ""


@dataclasses.dataclass
class Sleeping:
    """Each run takes `seconds` of real time, then exits 0."""

    seconds: float

    async def run(self, options: ServerOptions, timeout: float, quiet: float | None = None) -> Ended:
        await asyncio.sleep(self.seconds)
        return Ended(0)

    def reproduce(self, script: Path, schedule: Schedule, runs: int) -> str:
        return ""


class Judged(Runner):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.judged: list[int] = []

    def judge(self, run: Run) -> None:
        self.judged.append(run.index)


def test_each_run_gets_what_is_left_of_the_budget_and_one_it_cut_is_not_judged(tmp_path: Path) -> None:
    clock = Clock()
    target = SlowTarget(clock, 40.0)
    runner = Judged(target, HuntOptions(budget=100.0, timeout=300.0, out_dir=tmp_path), None, clock)

    async def go() -> None:
        first = await runner.run(Schedule(), "clean run")
        assert first.exit_code == 0 and target.timeouts == [100.0]
        assert runner.spent(1) is None  # 40s of 100: the search may go on until SEARCH_SHARE
        await runner.run(Schedule(), "systematic")
        assert runner.spent(2) == "budget" and clock.now >= 100.0 * SEARCH_SHARE
        with pytest.raises(Spent):  # 20s left, the run needs 40: cut at the budget's end, not judged
            await runner.run(Schedule(), "reproducing")
        assert target.timeouts[-1] == 20.0 and runner.runs[-1].cut == "budget"
        assert runner.runs[-1].how() == "cut by the budget (not judged)"
        with pytest.raises(Spent):  # nothing starts after the budget's end
            await runner.run(Schedule(), "reproducing")

    asyncio.run(go())
    assert runner.judged == [1, 2] and len(runner.runs) == 3


def test_shrinking_ends_at_its_share_of_the_budget(tmp_path: Path) -> None:
    clock = Clock()
    runner = Judged(SlowTarget(clock, 1.0), HuntOptions(budget=100.0, out_dir=tmp_path), None, clock)
    clock.now = 100.0 * SHRINK_SHARE
    run = asyncio.run(runner.run(Schedule(), "shrinking"))
    assert run.cut == "budget" and run.keys == [] and runner.shrink_cut and runner.runs == []
    # the rate of each bug is still measured, in what is left
    assert asyncio.run(runner.run(Schedule(), "reproducing")).exit_code == 0


def test_progress_as_a_run_starts_and_while_it_goes_on(tmp_path: Path) -> None:
    seen: list[Progress] = []

    runner = Judged(Sleeping(0.35), HuntOptions(budget=None, runs=1, out_dir=tmp_path), seen.append)
    runner.heartbeat = 0.1
    asyncio.run(runner.run(Schedule(), "clean run"))
    assert seen[0].running == 0.0 and seen[0].runs == 0
    assert len([p for p in seen if p.running]) >= 2 and seen[-1].running is None and seen[-1].runs == 1


def test_a_stop_ends_the_run_in_flight_unjudged(tmp_path: Path) -> None:
    runner = Judged(Sleeping(60), HuntOptions(budget=None, runs=1, out_dir=tmp_path))

    async def go() -> None:
        runner.stopper.attach(asyncio.get_running_loop(), signals=False)
        asyncio.get_running_loop().call_later(0.2, runner.stopper.stop, "SIGTERM")
        with pytest.raises(Stopped, match="SIGTERM"):
            await runner.run(Schedule(), "systematic")

    asyncio.run(asyncio.wait_for(go(), 5))
    assert runner.judged == [] and runner.runs == []


def test_a_failure_of_rtrace_during_a_run_discards_it_with_its_traceback(tmp_path: Path) -> None:
    @dataclasses.dataclass
    class Broken:
        async def run(self, options: ServerOptions, timeout: float, quiet: float | None = None) -> Ended:
            raise OverflowError("int too big to convert")  # as a trace header did with a 2**64 seed

        def reproduce(self, script: Path, schedule: Schedule, runs: int) -> str:
            return ""

    runner = Judged(Broken(), HuntOptions(budget=None, runs=1, out_dir=tmp_path))
    run = asyncio.run(runner.run(Schedule(), "systematic"))
    assert run.cut == "internal error" and run.keys == [] and runner.judged == []
    assert run.internal == tmp_path / "internal-error-run0001.txt"
    assert "OverflowError: int too big to convert" in run.internal.read_text()
    assert run.how() == f"discarded: an internal error of rtrace (traceback in {run.internal})"


def test_the_commands_server_failing_inside_is_rtraces_not_the_clients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from rtrace.net.hunt.runs import CommandTarget
    from rtrace.net.link import server

    async def broken(self: object) -> None:
        raise ZeroDivisionError("inside serve")

    monkeypatch.setattr(server._Session, "serve", broken)
    client = ("import asyncio, os\nfrom websockets.asyncio.client import connect\n"
              "async def main():\n    async with connect(os.environ['RTRACE_URL'] + '/realtime') as ws:\n"
              "        await ws.recv()\nasyncio.run(main())\n")  # fmt: skip
    options = ServerOptions(record=tmp_path / "t.jsonl", port=0)
    ended = asyncio.run(CommandTarget([sys.executable, "-c", client]).run(options, 20))
    assert ended.internal is not None and "ZeroDivisionError: inside serve" in ended.internal


def test_a_run_whose_trace_could_not_be_written_is_discarded_and_the_hunt_stops(tmp_path: Path) -> None:
    @dataclasses.dataclass
    class FullDisk:
        async def run(self, options: ServerOptions, timeout: float, quiet: float | None = None) -> Ended:
            return Ended(0, unwritten="No space left on device")

        def reproduce(self, script: Path, schedule: Schedule, runs: int) -> str:
            return ""

    runner = Judged(FullDisk(), HuntOptions(budget=None, runs=5, out_dir=tmp_path))
    run = asyncio.run(runner.run(Schedule(), "systematic"))
    assert run.cut == "trace not written" and runner.judged == []
    assert run.how() == "discarded: its trace could not be written (No space left on device)"
    assert runner.spent(1) == "trace not written"
    with pytest.raises(Spent):
        asyncio.run(runner.run(Schedule(), "systematic"))


def test_the_runs_that_confirm_a_bug_wait_longer_before_they_end_a_quiet_run(tmp_path: Path) -> None:
    """A search run ends early after `quiet` (a candidate); the re-runs that confirm a bug (its rate, `--schedule`)
    only after `CONFIRM_QUIET` times it, past real clients' own deadlines on a silent server; the run says which."""
    from rtrace.net.hunt.runs import CONFIRM_QUIET

    @dataclasses.dataclass
    class Quiet:
        given: list[float | None] = dataclasses.field(default_factory=list)

        async def run(self, options: ServerOptions, timeout: float, quiet: float | None = None) -> Ended:
            self.given.append(quiet)
            return Ended(None, cut="quiet")

        def reproduce(self, script: Path, schedule: Schedule, runs: int) -> str:
            return ""

    target = Quiet()
    runner = Judged(target, HuntOptions(budget=None, runs=5, out_dir=tmp_path, quiet=3.0))
    ended = [asyncio.run(runner.run(Schedule(), phase)).ended_early for phase in ("systematic", "shrinking",
                                                                                  "reproducing", "re-run")]
    assert CONFIRM_QUIET * 3.0 > 10.0  # livekit-agents and agents-js wait 10 s for response.created
    assert target.given == ended == [3.0, 3.0, CONFIRM_QUIET * 3.0, CONFIRM_QUIET * 3.0]
    runner = Judged(target, HuntOptions(budget=None, runs=5, out_dir=tmp_path, quiet=None))
    assert asyncio.run(runner.run(Schedule(), "reproducing")).ended_early is None and target.given[-1] is None


def test_a_run_through_a_link_ends_early_when_quiet_after_the_links_fault(tmp_path: Path) -> None:
    """`hunt --upstream`: the client hangs once the link answers its response.create with an error; the run ends
    quiet after that fault (as against the fake endpoint), not at its --timeout."""
    import sys

    from rtrace.net.hunt.hunt import hunt

    from .test_net_hunt_hunt import REFUSED, asking
    from .test_net_link_upstream import Upstream

    client = asking("        while True:\n            await ws.recv()\n")
    with Upstream() as url:
        options = HuntOptions(runs=1, timeout=15, quiet=0.25, out_dir=tmp_path, schedules=[REFUSED], upstream=url)
        result = hunt([sys.executable, "-c", client], options)
    (run,) = result.runs
    assert run.ended_early == 1.0 and run.seconds < 6, run.how()  # a re-run: 4 x 0.25 s
    assert "fault.injected" in run.trace.read_text(encoding="utf-8")
