"""`rtrace hunt` on the real clients with long budgets: per client, the time to the first bug and the distinct bugs
found by each checkpoint of the budget (1m, 3m, 5m...: read off one hunt's timeline - the bugs it confirmed, each
at the end of the first run that showed it - not separate hunts), and each bug's rules, minimal schedule and
reproduction rate. The suite's hunts (tests/test_e2e_hunt.py) are the short, asserted subset.

Each client runs in its own environment (`make e2e-envs`); a client whose environment is missing is skipped.
Run: `.venv/bin/python bench/bench_hunt.py [--budget 5m] [--checkpoints 1m,3m,5m] [-j 1] [--client NAME ...]`;
prints a Markdown table (BENCHMARKS.md's Hunting section) and writes bench/out/hunt.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rtrace.core.durations import format_duration, parse_duration
from rtrace.net.hunt.hunt import Bug, HuntOptions, HuntResult, Run, hunt

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
#: The bug each client is known to have (the seeds' bugs), None where the version fixed it.
KNOWN = {
    "livekit-1.8.8-race": "RT101",
    "livekit-1.8.9-race": None,
    "livekit-1.8.4-reconnect": "RT105",
    "livekit-1.8.5-reconnect": None,
    "agents-js-1.9.0": "RT105",
}


def first_seen(bug: Bug, runs: list[Run]) -> float | None:
    """When the hunt first saw `bug`: the end of the first run of the clean run or the search that showed its
    finding (as a defect's primary or linked to one) under the same kinds of fault - under any, for a bug that
    needs no fault (a race: the hunt merged what each fault showed of it)."""
    faultless = bug.schedule.clean or bug.without_fault is not None
    for run in runs:
        for k in [*run.keys, *run.key_of.values()]:
            if k.finding == bug.key.finding and (faultless or k.faults == bug.key.faults):
                return run.ended
    return None


def searched(result: HuntResult) -> list[Run]:
    """The clean run and the search's runs, in the order they ended (shrinking and re-runs left out)."""
    return sorted((r for r in result.runs if r.phase in ("clean run", "systematic", "random")), key=lambda r: r.ended)


def timeline(result: HuntResult, checkpoints: list[float]) -> dict[str, Any]:
    runs = searched(result)
    seen = sorted(t for b in result.bugs if (t := first_seen(b, runs)) is not None)
    faulted = sorted(t for b in result.bugs if not b.schedule.clean and (t := first_seen(b, runs)) is not None)
    return {
        "time_to_first_bug": round(seen[0], 1) if seen else None,
        "time_to_first_bug_under_a_fault": round(faulted[0], 1) if faulted else None,
        "bugs_by": {format_duration(c): sum(1 for t in seen if t <= c) for c in checkpoints},
        "search_runs_by": {format_duration(c): sum(1 for r in runs if r.phase != "clean run" and r.ended <= c)
                           for c in checkpoints},
    }  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default="5m", help="budget per client (wall time: search, shrinking, re-runs)")
    parser.add_argument("--checkpoints", default="1m,3m,5m", help="budgets to count the bugs found by")
    parser.add_argument("-j", "--jobs", type=int, default=1)
    parser.add_argument("--repro-runs", type=int, default=5)
    parser.add_argument("--max-bugs", type=int, default=6)
    parser.add_argument("--client", action="append", choices=sorted(CLIENTS), help="only these (repeatable)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out"))
    args = parser.parse_args(argv)
    budget = parse_duration(args.budget, "--budget")
    checkpoints = [c for c in (parse_duration(t, "--checkpoints") for t in args.checkpoints.split(",")) if c <= budget]
    checkpoints = checkpoints if budget in checkpoints else [*checkpoints, budget]
    out = Path(args.out)
    results: dict[str, Any] = {}
    rows: list[str] = []
    for name in args.client or list(CLIENTS):
        command, needs = CLIENTS[name]()
        if not needs.exists():
            print(f"{name}: skipped ({needs} not made: make e2e-envs)", flush=True)
            continue
        options = HuntOptions(budget=budget, jobs=args.jobs, timeout=60, repro_runs=args.repro_runs,
                              max_bugs=args.max_bugs, out_dir=out / "hunt" / name)  # fmt: skip
        result = hunt(command, options)
        known = KNOWN[name]
        entry: dict[str, Any] = {
            "budget": budget,
            "elapsed": round(result.elapsed, 1),
            "wall_over_budget": round(result.elapsed / budget, 3),
            "split": {k: round(v, 1) for k, v in result.split.items()},
            "runs": len(result.runs),
            "search_runs": sum(1 for r in result.runs if r.phase in ("systematic", "random")),
            **timeline(result, checkpoints),
            "baseline": [f"{f.rule} {f.slug}" for f in result.baseline],
            "known": known,
            "known_found": known is not None and any(known in {r for r, _ in b.rules} for b in result.bugs),
            "bugs": [{"rule": b.rule, "rules": [r for r, _ in b.rules], "about": b.key.text(),
                      "schedule": b.schedule.describe(), "rate": f"{b.hits}/{b.tries}",
                      "first_seen": first_seen(b, searched(result))} for b in result.bugs],
            "not_reproduced": [f"{b.rule} under {b.found.describe()}" for b in result.unconfirmed],
        }
        results[name] = entry
        by = " / ".join(str(n) for n in entry["bugs_by"].values())
        found = ("yes" if entry["known_found"] else "NO") if known else "-"
        rows.append(f"| {name} | {entry['search_runs']} | {entry['time_to_first_bug']} s | "
                    f"{entry['time_to_first_bug_under_a_fault']} s | {by} | {known or 'none'}: {found} |")  # fmt: skip
        print(f"{name}: {len(result.bugs)} distinct bugs in {entry['search_runs']} search runs "
              f"({entry['elapsed']} s with shrinking), first after {entry['time_to_first_bug']} s", flush=True)
        for bug in entry["bugs"]:
            seen = bug["first_seen"]
            print(f"  {bug['rate']:>6}  {'+'.join(bug['rules'])}  {bug['about']}  [{bug['schedule']}]"
                  f"  seen at {seen if seen is None else round(seen, 1)} s", flush=True)  # fmt: skip
    marks = " / ".join(format_duration(c) for c in checkpoints)
    print(f"\n| client | search runs | first bug | first bug under a fault | distinct bugs by {marks} | known bug |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    out.mkdir(parents=True, exist_ok=True)
    (out / "hunt.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
