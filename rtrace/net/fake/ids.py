"""Recorded ids mapped to another connection's: learned from a recording's server events and their counterparts
there, then applied to what is sent. One mapper for the replay (`replay_session`), the fidelity check (`fidelity`)
and recorded responses (`playback`); what they differ in is a parameter: which strings are ids (`keys`), and how
counterparts are found (walked side by side, `learn_ids`; the k-th event of a type, `learn_by_type`). Pure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from ...core.trace import Record

#: Keys whose string values are ids a server may assign.
ID_KEYS = frozenset({"id", "item_id", "response_id", "call_id", "previous_item_id"})
#: The paths of the ids an answer gives that later client events name (`learn_by_type`).
ID_PATHS: tuple[tuple[str, ...], ...] = (
    ("item", "id"),
    ("item", "call_id"),
    ("response", "id"),
    ("item_id",),
    ("response_id",),
)


def client_ids(records: Iterable[Record]) -> set[str]:
    """Ids the client chose: those of items it created (a replay keeps them: `learn_ids`'s `keep`)."""
    out: set[str] = set()
    for rec in records:
        if rec.dir != "client":
            continue
        item = rec.event.get("item")
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            out.add(item["id"])
    return out


def learn_ids(recorded: Any, replayed: Any, keep: set[str], ids: dict[str, str], key: str = "") -> None:
    """Walk a recorded server event and its replayed counterpart side by side; each server-assigned id (a non-empty
    string under one of `ID_KEYS`, not in `keep`) that differs is mapped (recorded -> replayed), the first mapping
    of an id holding."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for k, v in recorded.items():
            if k in replayed:
                learn_ids(v, replayed[k], keep, ids, k)
    elif isinstance(recorded, list) and isinstance(replayed, list):
        for a, b in zip(recorded, replayed, strict=False):
            learn_ids(a, b, keep, ids, key)
    elif (
        key in ID_KEYS
        and isinstance(recorded, str)
        and isinstance(replayed, str)
        and recorded
        and recorded != replayed
        and recorded not in keep
    ):
        ids.setdefault(recorded, replayed)


def learn_by_type(
    recorded: Sequence[dict[str, Any]],
    served: Sequence[dict[str, Any]],
    ids: dict[str, str],
    paths: Sequence[tuple[str, ...]] = ID_PATHS,
) -> None:
    """Map each recorded id to the served one: the k-th recorded event of a type against the k-th served one of
    that type, the string at each of `paths` in both, the first mapping of an id holding."""
    seen: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ev in served:
        seen[str(ev.get("type"))].append(ev)
    count: dict[str, int] = defaultdict(int)
    for ev in recorded:
        etype = str(ev.get("type"))
        k = count[etype]
        count[etype] += 1
        if k >= len(seen[etype]):
            continue
        other = seen[etype][k]
        for path in paths:
            a, b = value_at(ev, path), value_at(other, path)
            if isinstance(a, str) and isinstance(b, str):
                ids.setdefault(a, b)


def value_at(obj: Any, path: Sequence[str]) -> Any:
    """The value at `path` (keys of nested objects) in `obj`, None where there is none."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def rewrite_ids(obj: Any, ids: dict[str, str], keys: frozenset[str] | None = ID_KEYS) -> Any:
    """A copy of `obj` with every mapped id replaced: a string under one of `keys` (at any depth; an array's
    strings are under the array's key), or any string when `keys` is None."""
    return _rewrite(obj, ids, keys, "")


def remap(obj: Any, ids: dict[str, str]) -> Any:
    """A copy of `obj` with every string that is a mapped id replaced, whatever its key (a recorded response's
    own ids: they appear under keys of every kind)."""
    return _rewrite(obj, ids, None, "")


def _rewrite(obj: Any, ids: dict[str, str], keys: frozenset[str] | None, key: str) -> Any:
    if isinstance(obj, dict):
        return {k: _rewrite(v, ids, keys, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rewrite(v, ids, keys, key) for v in obj]
    if isinstance(obj, str) and (keys is None or key in keys):
        return ids.get(obj, obj)
    return obj
