"""What the live state costs per conversation item and per pending change (issue 27), measured with tracemalloc.

Folds `pipelined-creates-ids` of the scaling suite (every create sent before the first ack) with every rule, twice:
up to the first ack (every create pending, no item yet) and to the end (every item in the conversation, nothing
pending), and prints the Python memory the fold holds at each point over the count. tracemalloc counts the objects
Python allocates (what `rtrace analyze` keeps, not the allocator's slack): peak RSS is higher by the interpreter, the
imports and fragmentation.

Run: `.venv/bin/python -m bench.bench_memory [--size 4] [--bound 700]` (the trace is generated and cached as
`bench.run_scale` does); exit 1 when a create in flight costs more than the bound (bytes).
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc

from bench.run_scale import prepare
from bench.scale import DATA, DEFAULT_SEED
from rtrace.core.loader import TraceReader
from rtrace.engine.fold import Fold
from rtrace.rules import RULES
from rtrace.rules.base import Config


def held(path: str, until_line: int | None) -> tuple[float, int, int, float]:
    """Bytes the fold holds after `until_line` (None: the whole trace, before it is finished), items, pending, and
    the most it held on the way."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    fold = Fold(Config(), RULES)
    with TraceReader.open(path) as reader:
        fold.rows(reader.rows(), until_line=until_line)
    gc.collect()
    size, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    items = sum(len(c.conv.items) for c in fold.state.conns.values())
    pending = sum(len(c.pending) for c in fold.state.conns.values())
    return size - base, items, pending, peak - base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4, help="multiple of the shape's base size")
    parser.add_argument(
        "--bound", type=float, default=700.0, help="bytes a create in flight may cost (exit 1 past it; issue 41.3)"
    )
    args = parser.parse_args()
    case = prepare("pipelined-creates-ids", args.size, DEFAULT_SEED, DATA)
    path = str(case.path)
    with open(path, "rb") as f:  # the burst of creates ends where the acks begin
        first_ack = next(k for k, line in enumerate(f, 1) if b'"conversation.item.added"' in line)
    size, items, pending, _ = held(path, first_ack - 1)
    per_create = size / max(pending, 1)
    print(f"{pending:,} creates pending, {items:,} items: {size / 1e6:.1f} MB, {per_create:,.0f} B each")
    size, items, pending, peak = held(path, None)
    each = size / max(items, 1)
    print(f"{items:,} items in the conversation, {pending:,} pending: {size / 1e6:.1f} MB, {each:,.0f} B each")
    print(f"the most held on the way: {peak / 1e6:.1f} MB")
    if per_create > args.bound:
        raise SystemExit(f"a create in flight costs {per_create:,.0f} B, over the bound of {args.bound:,.0f} B")


if __name__ == "__main__":
    main()
