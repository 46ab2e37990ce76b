"""The values a hunt's schedule (a bug script's `# rtrace-schedule:` line) may hold, checked where they enter with the
command line's ranges: seeds, counts, times, close codes, event types and codes; and text made fit for one comment
line of a script. Knows no schedule: `rtrace.net.faults.schedule` passes its vocabulary in.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

#: The largest seed (a trace header and the fake model's generator take it: 63 bits).
MAX_SEED = 2**63 - 1
#: The largest `k` and the longest time a fault's value may name (seconds: a day).
MAX_K = 1_000_000
MAX_FAULT_SECONDS = 86_400.0
_TARGET = re.compile(r"[A-Za-z0-9_.:*=/-]{0,200}")


def check_seed(seed: Any, where: str = "seed") -> int:
    """`seed` if it is a whole number from 0 to `MAX_SEED` (what `--seed` takes), else ValueError."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"{where} {seed!r}: give a whole number from 0 to {MAX_SEED}")
    return seed


def check_fault(f: Any, kinds: Mapping[str, str], moments: Iterable[str]) -> None:
    """Raise ValueError unless every value of `f` is one the command line would take: a known kind (`kinds`: each
    kind's form, `seconds`, `code` or `word`, as `rtrace.net.faults.actions` declares it) and moment, a target that is
    an event type, `k` a whole number from 1, a time finite and in range, a close code."""
    if f.kind not in kinds:
        raise ValueError(f"kind {f.kind!r}: give one of {', '.join(kinds)}")
    if f.moment not in moments:
        raise ValueError(f"moment {f.moment!r}: give one of {', '.join(moments)}")
    if not isinstance(f.target, str) or not _TARGET.fullmatch(f.target):
        raise ValueError(f"target {f.target!r}: give an event type (letters, digits, `._:*=/-`)")
    if not isinstance(f.k, int) or isinstance(f.k, bool) or not 1 <= f.k <= MAX_K:
        raise ValueError(f"k {f.k!r}: give a whole number from 1 to {MAX_K}")
    v = f.value
    if kinds[f.kind] == "seconds":
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            raise ValueError(f"{f.kind} value {v!r}: give a number of seconds")
        if not 0 <= v <= MAX_FAULT_SECONDS:
            raise ValueError(f"{f.kind} value {v!r}: give a time from 0 to {MAX_FAULT_SECONDS:g} seconds")
    elif kinds[f.kind] == "code":
        if not isinstance(v, int) or isinstance(v, bool) or not 1000 <= v <= 4999:
            raise ValueError(f"{f.kind} value {v!r}: give a close code from 1000 to 4999")
    elif not isinstance(v, str) or not _TARGET.fullmatch(v):
        raise ValueError(f"{f.kind} value {v!r}: give a code (letters, digits, `._:-`)")


def comment_text(text: str) -> str:
    """`text` fit for one comment line of a script: line breaks and other control characters as escapes."""
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in text)
