"""`make fidelity`: the fake endpoint against the real server's recordings (`rtrace.net.fake.fidelity`), and the
analyzer on them (no error finding on any).

Reads the recordings in place from a `realapi` folder (`cases/*.jsonl`, as `../shared/realapi/` beside the clone
holds them); says it skipped, exit 0, when there is none. Prints every difference that stays with its reason, then
the unexplained ones and the stale table entries (either is exit 1), then the analyzer's error findings (exit 1).
Run: `.venv/bin/python -m bench.fidelity [REALAPI]` (default: the first of ../shared/realapi, ../../shared/realapi).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rtrace.engine.fold import analyze_path  # noqa: E402
from rtrace.net.fake.fidelity import Record, compare, has_client_events, judge  # noqa: E402

CANDIDATES = (ROOT.parent / "shared" / "realapi", ROOT.parent.parent / "shared" / "realapi")


def find_realapi(given: str | None) -> Path | None:
    if given:
        path = Path(given)
        return path if (path / "cases").is_dir() else None
    return next((p for p in CANDIDATES if (p / "cases").is_dir()), None)


def read_case(path: Path) -> list[Record]:
    records: list[Record] = []
    for line in path.read_bytes().splitlines():
        row = orjson.loads(line)
        if isinstance(row, dict) and "dir" in row and isinstance(row.get("event"), dict):
            records.append((str(row["dir"]), row["event"]))
    return records


def error_findings(path: Path) -> list[str]:
    report = analyze_path(path)
    return [f"{path.name}:{f.at_line}: {f.rule} {f.message}" for f in report.findings if f.severity == "error"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("realapi", nargs="?", help="the folder holding cases/ (default: ../shared/realapi)")
    args = parser.parse_args(argv)
    realapi = find_realapi(args.realapi)
    if realapi is None:
        where = args.realapi or " or ".join(str(p) for p in CANDIDATES)
        print(f"fidelity: skipped, no realapi recordings (no cases/ in {where})")
        return 0
    cases = sorted((realapi / "cases").glob("*.jsonl"))
    results = []
    for path in cases:
        records = read_case(path)
        if has_client_events(records):
            results.append(compare(path.name, records))
    verdict = judge(results)
    print(f"fidelity: {len(results)} sessions with client events of {len(cases)} in {realapi}")
    by_reason: dict[str, list[str]] = {}
    for d, known in verdict.explained:
        by_reason.setdefault(known.reason, []).append(f"  {d.case}: {d.line()}")
    for reason, lines in by_reason.items():
        print(f"kept ({len(lines)}): {reason}")
        for line in sorted(set(lines))[:8]:
            print(line)
        if len(set(lines)) > 8:
            print(f"  ... and {len(set(lines)) - 8} more")
    for d in verdict.unexplained:
        print(f"UNEXPLAINED {d.case}: {d.line()}")
    for k in verdict.stale:
        print(f"STALE table entry (matched nothing): {k.kind} {k.event_type} {k.path} ({k.reason})")
    errors = [line for path in cases for line in error_findings(path)]
    for line in errors:
        print(f"ERROR FINDING {line}")
    print(
        f"fidelity: {len(verdict.explained)} differences kept, {len(verdict.unexplained)} unexplained, "
        f"{len(verdict.stale)} stale, {len(errors)} error findings on {len(cases)} sessions"
    )
    return 0 if verdict.ok and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
