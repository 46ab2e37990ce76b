"""Minimal reproducers (`rtrace minimize`, issue 19): the shared livekit-agents 1.8.8 race trace must shrink to at most
12 lines that still give RT101 in under 5 s, and a one-hour audio call with one race buried halfway (bench.generate's
voice call with the `tool-output-race` fault) to at most 20 lines in under 60 s on this machine.

Each figure is the wall time of `rtrace minimize` in a subprocess (start-up, reading, delta debugging, writing,
the report), and the same search in this process without the two shortcuts (delta debugging alone). Exit 1 when a
target is missed. Run: `.venv/bin/python bench/bench_minimize.py` (the call is generated once into bench/data/).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.generate import DEFAULT_OUT, DEFAULT_SEED, _fingerprint, write_trace  # noqa: E402
from rtrace.rules import find_rule  # noqa: E402
from rtrace.transform.minimize import minimize  # noqa: E402

RACE = ROOT / "sample_traces" / "real" / "tool-output-race.livekit-1.8.8.jsonl"
RTRACE = Path(sys.executable).parent / "rtrace"


def race_call(out: Path, seed: int) -> Path:
    """The hour-long voice call with the race, generated once per generator version."""
    path = out / "audio-call-race.jsonl"
    stamp = out / "audio-call-race.fingerprint"
    fingerprint = _fingerprint({"seed": seed, "workload": "audio-call-race"})
    if not (path.exists() and stamp.exists() and stamp.read_text() == fingerprint):
        started = time.perf_counter()
        lines = write_trace(path, "voice", seed, 3600.0, ("tool-output-race",))
        stamp.write_text(fingerprint)
        print(f"{path}: {lines:,} lines, {path.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - started:.1f} s")
    return path


def run_cli(trace: Path, rule: str, out: Path) -> tuple[float, int]:
    """Wall time of `rtrace minimize` and the lines it wrote."""
    started = time.perf_counter()
    done = subprocess.run(
        [str(RTRACE), "minimize", str(trace), "--rule", rule, "-o", str(out)], capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"rtrace minimize failed ({done.returncode}): {done.stderr}")
    print("   ", done.stderr.strip())
    return seconds, len(out.read_bytes().splitlines())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    call = race_call(args.out, args.seed)
    ok = True
    print(f"rtrace minimize, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}")
    for name, trace, max_lines, max_seconds in (
        ("1.8.8 race", RACE, 12, 5.0),
        ("hour-long audio call", call, 20, 60.0),
    ):
        out = args.out / f"min-{trace.stem}.jsonl"
        seconds, lines = run_cli(trace, "RT101", out)
        header = orjson.loads(out.read_bytes().splitlines()[0])
        started = time.perf_counter()
        alone = minimize(trace, find_rule("RT101"), shortcuts=False)
        alone_s = time.perf_counter() - started
        met = lines <= max_lines and seconds < max_seconds
        ok &= met
        print(
            f"{name}: {alone.records:,} records ({trace.stat().st_size / 1e6:.1f} MB) -> {lines} lines "
            f"({len(header['minimized']['lines'])} records and the header; target <= {max_lines}) "
            f"in {seconds:.2f} s (target < {max_seconds:g} s): "
            f"{'met' if met else 'MISSED'}; delta debugging alone: {len(alone.lines) + 1} lines, "
            f"{alone.tests} folds, {alone_s:.2f} s in process"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
