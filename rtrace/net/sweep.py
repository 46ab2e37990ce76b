"""`rtrace sweep`: run a user's command against a fresh fake endpoint at each latency, record and analyze each run.

Owns the loop (latency x run), the environment handed to the command (`OPENAI_BASE_URL`, `RTRACE_URL`), and the
results a latency x rule table is drawn from. The server is `rtrace.net.server`, the analysis `rtrace.engine.fold`, the
table `rtrace.report.sweep`; this module prints nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
from collections.abc import Callable
from pathlib import Path

from ..engine.fold import analyze_path
from ..rules.base import Finding
from .common import parse_duration
from .server import ServerOptions, run_server


@dataclasses.dataclass
class RunResult:
    """One run of the command at one latency."""

    latency: float
    run: int
    trace: Path
    #: The command's exit status (None: killed after the timeout).
    exit_code: int | None
    findings: list[Finding]
    #: Set when the trace could not be analyzed.
    problem: str | None = None


@dataclasses.dataclass
class SweepResult:
    latencies: list[float]
    runs: int
    results: list[RunResult]

    def rules(self) -> list[tuple[str, str, str]]:
        """(id, slug, severity) of every rule that fired at least once, in id order."""
        seen = {(f.rule, f.slug, f.severity) for r in self.results for f in r.findings}
        return sorted(seen)

    def count(self, latency: float, rule_id: str) -> int:
        return sum(1 for r in self.results if r.latency == latency and any(f.rule == rule_id for f in r.findings))

    def has_errors(self) -> bool:
        return any(f.severity == "error" for r in self.results for f in r.findings)


def label(latency: float) -> str:
    ms = latency * 1000
    return f"{ms:g}ms"


async def _run_once(
    command: list[str], latency: float, run: int, out_dir: Path, template: ServerOptions, timeout: float | None
) -> RunResult:
    trace = out_dir / f"latency-{label(latency)}-run{run}.jsonl"
    options = dataclasses.replace(template, latency=latency, record=trace, port=0, host="127.0.0.1")
    code: int | None = None
    async with run_server(options) as srv:
        env = dict(os.environ)
        env["OPENAI_BASE_URL"] = srv.http_url
        env["RTRACE_URL"] = srv.url
        env["RTRACE_REALTIME_URL"] = srv.realtime_url
        env["RTRACE_LATENCY"] = str(latency)
        proc = await asyncio.create_subprocess_exec(*command, env=env, start_new_session=True)
        try:
            code = await asyncio.wait_for(proc.wait(), timeout)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            code = None
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            raise
    try:
        report = analyze_path(trace)
    except Exception as e:  # an unreadable trace is a result of the run, not a crash of the sweep
        return RunResult(latency, run, trace, code, [], problem=str(e))
    return RunResult(latency, run, trace, code, report.findings)


async def sweep_async(
    command: list[str],
    latencies: list[float],
    runs: int,
    out_dir: Path,
    template: ServerOptions | None = None,
    timeout: float | None = 300.0,
    progress: Callable[[RunResult], None] | None = None,
) -> SweepResult:
    out_dir.mkdir(parents=True, exist_ok=True)
    results: list[RunResult] = []
    for latency in latencies:
        for k in range(1, runs + 1):
            result = await _run_once(command, latency, k, out_dir, template or ServerOptions(), timeout)
            results.append(result)
            if progress is not None:
                progress(result)
    return SweepResult(latencies, runs, results)


def sweep(
    command: list[str],
    latencies: list[float],
    runs: int,
    out_dir: Path,
    template: ServerOptions | None = None,
    timeout: float | None = 300.0,
    progress: Callable[[RunResult], None] | None = None,
) -> SweepResult:
    """Run `command` `runs` times at each latency, each against a fresh recorded server; analyze every trace."""
    return asyncio.run(sweep_async(command, latencies, runs, out_dir, template, timeout, progress))


def parse_latency_list(text: str) -> list[float]:
    """`0,10,50,200ms` -> seconds. A unit on the last value applies to bare numbers before it (`ms` by default)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError("--latency needs at least one value, e.g. 0,10,50,200ms")
    unit = "ms"
    for suffix in ("ms", "us", "s", "m"):
        if parts[-1].lower().endswith(suffix):
            unit = suffix
            break
    out = []
    for part in parts:
        value = part if not part.replace(".", "", 1).isdigit() else part + unit
        out.append(parse_duration(value))
    return out


def sweep_main(
    command: list[str],
    latency: str,
    runs: int,
    out_dir: Path,
    timeout: float | None,
    progress: Callable[[RunResult], None] | None = None,
    template: ServerOptions | None = None,
) -> SweepResult:
    """`rtrace sweep` from command-line values: `latency` as `0,10,50,200ms`. Raises ValueError on bad input; the
    CLI renders the result (`rtrace.report.sweep`) and exits 1 when it has an error-severity finding."""
    if not command:
        raise ValueError("give the command to run after --, e.g. rtrace sweep --latency 0,50ms -- pytest tests/x.py")
    if runs < 1:
        raise ValueError("--runs must be at least 1")
    return sweep(command, parse_latency_list(latency), runs, out_dir, template, timeout, progress)
