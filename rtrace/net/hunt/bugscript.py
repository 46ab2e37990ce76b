"""A bug's script (`bug-N.toml`): its schedule's turns on top of the user's script, the schedule as JSON in its last
comment (`load_schedule` reads it back, every value checked), its number (`schedule_number`), and its minimized trace.
Writes no file but the minimized trace it is asked for.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...core.inputs import MAX_NESTING, UnreadableInput, nesting_over, read_side_input
from ...rules import RULES
from ..faults.schedule import Schedule
from ..faults.script import SCRIPT_BYTES
from ..faults.script import Schedule as ScriptSchedule
from ..faults.values import comment_text

#: The line of a bug's script that holds its schedule as JSON (`load_schedule`).
SCHEDULE_LINE = "# rtrace-schedule: "


def bug_script(schedule: Schedule, base: ScriptSchedule) -> str:
    """The script of a bug's schedule (`bug-N.toml`): its turns, then those of the user's script it ran on
    (`base`), so `rtrace serve --script` runs the whole of it by hand; its schedule as JSON in the last comment
    (`load_schedule`)."""
    text = schedule.script_toml()
    if base:
        head = "\n".join(line for line in text.splitlines() if line.startswith("#"))
        ours = schedule.script() if schedule.turn_faults() else ScriptSchedule()
        where = comment_text(str(base.path or "the script"))
        text = f"{head}\n# then the turns of {where} the hunt ran on\n\n{(ours + base).to_toml()}"
    return text + f"{SCHEDULE_LINE}{json.dumps(schedule.to_json())}\n"


def minimized(trace: Path, rule_id: str, output: Path, keep: list[str] | None = None) -> Path | None:
    """`trace` minimized for `rule_id` keeping the findings of the rules `keep` (an entry's finding set), written
    to `output`; None when it cannot be."""
    from ...core.writer import write_replacing
    from ...transform.minimize import NothingToMinimize, minimize, write

    rule = next((r for r in RULES if r.id == rule_id), None)
    if rule is None:
        return None
    try:
        result = minimize(trace, rule, keep=keep)
    except (NothingToMinimize, OSError, ValueError):
        return None
    import io

    buffer = io.BytesIO()
    write(result, buffer)
    write_replacing(output, buffer.getvalue())
    return output


def schedule_number(path: str | os.PathLike[str]) -> int | None:
    """The number of a bug's script by its name (`bug-4.toml` -> 4; None for another name)."""
    stem = Path(path).name.removesuffix(".toml")
    head, _, n = stem.partition("-")
    return int(n) if head == "bug" and n.isdigit() and len(n) < 9 else None


def load_schedule(path: str | os.PathLike[str]) -> Schedule:
    """The schedule of a bug's script (its `# rtrace-schedule:` line). Raises ValueError."""
    where = os.fspath(path)
    try:  # a side input like any other: special files refused, size capped, nesting bounded before json recurses
        text = read_side_input(where, "the schedule", SCRIPT_BYTES).decode("utf-8")
    except (UnreadableInput, UnicodeDecodeError) as e:
        raise ValueError(f"{where}: cannot read the schedule: {e}") from None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith(SCHEDULE_LINE):
            value = line[len(SCHEDULE_LINE) :]
            column = len(SCHEDULE_LINE) + 1
            try:
                deep = nesting_over(value, "json", MAX_NESTING)
                if deep is not None:
                    column = len(SCHEDULE_LINE) + deep[1]
                    raise ValueError(f"nested deeper than {MAX_NESTING} levels at column {column}")
                return Schedule.from_json(json.loads(value))
            except (ValueError, TypeError, KeyError) as e:
                raise ValueError(f"{os.fspath(path)}:{n}:{column}: the schedule is not readable: {e}") from None
    raise ValueError(f"{os.fspath(path)}: no `{SCHEDULE_LINE.strip()}` line (a bug script rtrace hunt wrote)")

