"""The rules, listed explicitly (no discovery). Ids and slugs are public interface: never renumber or rename."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .base import Config, Finding, Rule, Witness
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
from .tools import (
    ArgumentsLostInReplay,
    DeletedFunctionCallOutput,
    NoResponseAfterToolOutput,
    OutputForUnknownCall,
    UnansweredFunctionCall,
)

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
)


class UnknownRule(ValueError):
    """A --select/--ignore name that is neither a rule id nor a slug."""


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


__all__ = ["RULES", "Config", "Finding", "Rule", "UnknownRule", "Witness", "find_rule", "select_rules"]
