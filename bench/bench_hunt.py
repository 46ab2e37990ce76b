"""`rtrace hunt` on the real clients with long budgets: per client, the time to the first bug, the distinct bugs
found per budget, and each bug's rule, minimal schedule and reproduction rate. The suite's hunts
(tests/test_e2e_hunt.py) are the short, asserted subset.

Each client runs in its own environment (`make e2e-envs`); a client whose environment is missing is skipped.
Run: `.venv/bin/python bench/bench_hunt.py [--budget 5m] [-j 2] [--client livekit-1.8.8 ...]`; writes
bench/out/hunt.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rtrace.core.durations import parse_duration
from rtrace.net.hunt import HuntOptions, Progress, hunt

ROOT = Path(__file__).resolve().parent.parent
E2E = ROOT / "tests" / "e2e"


def livekit(version: str, scenario: str) -> tuple[list[str], Path]:
    python = ROOT / f".venv-e2e-{version}" / "bin" / "python"
    driver = E2E / "livekit_scenario.py"
    return ["sh", "-c", f'exec "{python}" "{driver}" --url "$RTRACE_URL" --scenario {scenario} --timeout 10'], python


def agents_js() -> tuple[list[str], Path]:
    driver = E2E / "node" / "agentsjs_scenario.mjs"
    stamp = E2E / "node" / "node_modules" / ".installed"
    return ["sh", "-c", f'exec node "{driver}" --url "$RTRACE_URL" --tool-name lookup_order --timeout 10'], stamp


CLIENTS = {
    "livekit-1.8.8-race": lambda: livekit("1.8.8", "race"),
    "livekit-1.8.9-race": lambda: livekit("1.8.9", "race"),
    "livekit-1.8.4-reconnect": lambda: livekit("1.8.4", "reconnect"),
    "livekit-1.8.5-reconnect": lambda: livekit("1.8.5", "reconnect"),
    "agents-js-1.9.0": agents_js,
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default="5m", help="search budget per client (a duration)")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--repro-runs", type=int, default=10)
    parser.add_argument("--client", action="append", choices=sorted(CLIENTS), help="only these (repeatable)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out"))
    args = parser.parse_args(argv)
    budget = parse_duration(args.budget, "--budget")
    out = Path(args.out)
    results = {}
    for name in args.client or sorted(CLIENTS):
        command, needs = CLIENTS[name]()
        if not needs.exists():
            print(f"{name}: skipped ({needs} not made: make e2e-envs)")
            continue
        first: list[float] = []
        started = time.monotonic()

        def seen(p: Progress, first: list[float] = first, started: float = started) -> None:
            if p.last is not None and p.last.phase in ("systematic", "random") and p.last.keys and not first:
                first.append(time.monotonic() - started)

        options = HuntOptions(budget=budget, jobs=args.jobs, timeout=60, repro_runs=args.repro_runs,
                              out_dir=out / "hunt" / name)  # fmt: skip
        result = hunt(command, options, seen)
        entry = {
            "budget": budget,
            "elapsed": round(result.elapsed, 1),
            "runs": len(result.runs),
            "search_runs": sum(1 for r in result.runs if r.phase in ("systematic", "random")),
            "time_to_first_bug": round(first[0], 1) if first else None,
            "baseline": [f"{f.rule} {f.slug}" for f in result.baseline],
            "bugs": [{"rule": b.rule, "slug": b.slug, "about": b.key.text(), "schedule": b.schedule.describe(),
                      "rate": f"{b.hits}/{b.tries}"} for b in result.bugs],
            "not_reproduced": [f"{b.rule} under {b.found.describe()}" for b in result.unconfirmed],
        }
        results[name] = entry
        print(f"{name}: {len(result.bugs)} distinct bugs in {entry['search_runs']} search runs "
              f"({entry['elapsed']} s with shrinking), first after {entry['time_to_first_bug']} s")  # fmt: skip
        for bug in entry["bugs"]:
            print(f"  {bug['rate']:>6}  {bug['about']}  [{bug['schedule']}]")
    out.mkdir(parents=True, exist_ok=True)
    (out / "hunt.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
