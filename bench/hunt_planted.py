"""`rtrace hunt` on the small clients with one planted bug each (tests/planted_client.py), with a real budget: per
client, the time to its planted bug (the end of the first search run that showed a finding of its cause), the
entries reported (each planted bug its own, the correct variants none), runs per minute of search, and the wall
time of the whole hunt over its budget. tests/test_hunt_planted.py is the short, asserted subset.

Run: `.venv/bin/python -m bench.hunt_planted [--budget 3m] [-j 2] [--mode give-up ...] [--no-correct]`; prints a
Markdown table and writes bench/out/hunt_planted.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from rtrace.core.durations import parse_duration
from rtrace.net.hunt.bugs import cause_of
from rtrace.net.hunt.hunt import HuntOptions, HuntResult, hunt
from rtrace.net.link.server import ServerOptions, options_from_cli

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "tests" / "planted_client.py"
#: The cause (`bugs.Cause.family`) of each planted bug.
PLANTED = {
    "give-up": "gave up",
    "lose-output": "items lost on reconnect",
    "hang": "turn lost on reconnect",
    "parallel": "RT103",
}


def first_seen(result: HuntResult, family: str) -> float | None:
    """Seconds from the hunt's start to the end of the first clean or search run with a key of `family`."""
    runs = sorted((r for r in result.runs if r.phase in ("clean run", "systematic", "random")), key=lambda r: r.ended)
    for run in runs:
        if any(cause_of(k.rule, k.items, k.point, k.reaction, k.faults).family == family for k in run.keys):
            return run.ended
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--budget", default="3m", help="the hunt's budget (a duration)")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--mode", action="append", choices=sorted(PLANTED), help="only these (repeatable)")
    parser.add_argument("--no-correct", action="store_true", help="leave the correct variants out")
    parser.add_argument("--wait", default="3", help="the clients' own deadline for an answer, seconds")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out"))
    args = parser.parse_args(argv)
    budget = parse_duration(args.budget, "--budget")
    os.environ["PLANTED_WAIT"] = args.wait
    out = Path(args.out)
    rows: list[str] = []
    results: dict[str, Any] = {}
    for mode in args.mode or list(PLANTED):
        for correct in (False,) if args.no_correct else (False, True):
            name = f"{mode}{' --correct' if correct else ''}"
            script = ROOT / "tests" / "planted_parallel.toml" if mode == "parallel" else None
            template = options_from_cli(script=script) if script is not None else ServerOptions()
            options = HuntOptions(budget=budget, jobs=args.jobs, timeout=60, repro_runs=3, max_bugs=6,
                                  out_dir=out / "hunt_planted" / name.replace(" --", "-"), template=template,
                                  script=script)  # fmt: skip
            started = time.monotonic()
            result = hunt([sys.executable, str(CLIENT), mode, *(["--correct"] if correct else [])], options)
            wall = time.monotonic() - started
            search = [r for r in result.runs if r.phase in ("systematic", "random")]
            search_time = max((r.ended for r in search), default=0.0) - (result.clean.ended if result.clean else 0.0)
            seen = None if correct else first_seen(result, PLANTED[mode])
            families = [b.cause.family if b.cause is not None else b.rule for b in result.bugs]
            entry = {
                "wall": round(wall, 1),
                "budget": budget,
                "wall_over_budget": round(wall / budget, 2),
                "search_runs": len(search),
                "runs_per_minute": round(len(search) / max(search_time, 1e-9) * 60, 1),
                "time_to_planted_bug": None if seen is None else round(seen, 1),
                "entries": families,
                "planted_found": (not families) if correct else PLANTED[mode] in families,
            }
            results[name] = entry
            to_bug = "-" if correct else f"{entry['time_to_planted_bug']} s"
            rows.append(f"| {name} | {to_bug} | {', '.join(families) or 'none'} | {entry['runs_per_minute']} | "
                        f"{entry['wall']} s | {entry['wall_over_budget']} |")  # fmt: skip
            print(f"{name}: {len(result.bugs)} entries {families}, planted bug at {to_bug}, "
                  f"{entry['search_runs']} search runs, wall {entry['wall']} s", flush=True)
    print(f"\n| client | time to the planted bug | entries | search runs per minute | wall | wall / budget "
          f"({args.budget}) |")
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    out.mkdir(parents=True, exist_ok=True)
    (out / "hunt_planted.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
