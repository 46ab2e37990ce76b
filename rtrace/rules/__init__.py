"""The rules, listed explicitly (no discovery). Ids and slugs are public interface: never renumber or rename."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .base import Config, Finding, Rule, Witness
from .calls import ArgumentsLostInReplay, OutputForUnknownCall
from .protocol import (
    DuplicateItemId,
    DuplicateResponseDone,
    ReconnectLoopOnFatalError,
    ResponseDoneWithoutCreated,
    SessionExpired,
    UnknownPreviousItem,
)
from .pushes import AckTimeout, LocalServerDivergence, StaleSnapshotDelete, TruncateBeyondAudio
from .reconnect import (
    ChangesLostAtFinalClose,
    FunctionCallLostOnReconnect,
    ReconnectRestoresNothing,
    ResponseCreateLostOnReconnect,
    UnconfirmedItemLostOnReconnect,
)
from .responses import (
    ConcurrentResponseCreate,
    FailedResponseNotRetried,
    OrphanedGeneration,
    RetryRacedByNewResponse,
    ServerErrorRule,
)
from .tools import DeletedFunctionCallOutput, NoResponseAfterToolOutput, UnansweredFunctionCall
from .turns import NoReconnectAfterAbnormalClose, TurnNeverCompleted

RULES: tuple[type[Rule], ...] = (
    DeletedFunctionCallOutput,
    StaleSnapshotDelete,
    UnansweredFunctionCall,
    OutputForUnknownCall,
    FunctionCallLostOnReconnect,
    UnconfirmedItemLostOnReconnect,
    OrphanedGeneration,
    FailedResponseNotRetried,
    RetryRacedByNewResponse,
    AckTimeout,
    ConcurrentResponseCreate,
    ServerErrorRule,
    ArgumentsLostInReplay,
    TruncateBeyondAudio,
    LocalServerDivergence,
    ResponseDoneWithoutCreated,
    UnknownPreviousItem,
    DuplicateItemId,
    SessionExpired,
    ReconnectLoopOnFatalError,
    DuplicateResponseDone,
    ChangesLostAtFinalClose,
    ReconnectRestoresNothing,
    ResponseCreateLostOnReconnect,
    NoResponseAfterToolOutput,
    TurnNeverCompleted,
    NoReconnectAfterAbnormalClose,
)


class UnknownRule(ValueError):
    """A --select/--ignore name that is neither a rule id nor a slug; its message names the closest one."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name
        #: The id or slug the name is closest to (a typo, a letter off), if any is close.
        self.suggestion = closest_rule(name)

    def __str__(self) -> str:
        hint = f"did you mean {self.suggestion!r}?" if self.suggestion else "see `rtrace rules`"
        return f"unknown rule {self.name!r} ({hint})"


def closest_rule(name: str) -> str | None:
    """The rule id or slug closest to `name` (fewest letters to change, a digit typed as a letter read as one, the
    start of a slug as one change; ties to the longest common start), or None when none is within a quarter of its
    length (an id: two)."""
    typed = name.strip().lower().replace(" ", "").replace("_", "-")
    best: tuple[int, int, int] | None = None
    found = None
    for k, rule in enumerate(RULES):
        for known, limit in ((rule.id.lower(), 2), (rule.slug, max(2, len(rule.slug) // 4))):
            guess = typed.translate(_AS_DIGITS) if known == rule.id.lower() else typed
            cost = 1 if len(guess) >= 4 and known.startswith(guess) else _distance(guess, known)
            prefix = next((i for i, (x, y) in enumerate(zip(guess, known, strict=False)) if x != y), len(guess))
            if cost <= limit and (best is None or (cost, -prefix, k) < best):
                best, found = (cost, -prefix, k), (rule.id if known == rule.id.lower() else rule.slug)
    return found


#: Letters typed for the digits they look like, in a rule id (`RT1O1`).
_AS_DIGITS = str.maketrans({"o": "0", "i": "1", "l": "1"})


def _distance(a: str, b: str) -> int:
    """Edits (insert, delete, change a letter) that make `a` into `b`."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def find_rule(name: str) -> type[Rule]:
    for rule in RULES:
        if name.upper() == rule.id or name.lower() == rule.slug:
            return rule
    raise UnknownRule(name)


def select_rules(select: Iterable[str] = (), ignore: Iterable[str] = ()) -> Sequence[type[Rule]]:
    """The rules to run: all, or those named by `select`, minus those named by `ignore` (ids or slugs)."""
    chosen = [find_rule(n) for n in select] or list(RULES)
    dropped = {find_rule(n) for n in ignore}
    return tuple(r for r in RULES if r in chosen and r not in dropped)


__all__ = ["RULES", "Config", "Finding", "Rule", "UnknownRule", "Witness", "closest_rule", "find_rule", "select_rules"]
