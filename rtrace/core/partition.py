"""Indices joined into groups (union-find with path halving): the findings of one run that name one defect
(`rtrace.net.hunt.keys.linked`), the rows of a trace that one answer joins (`rtrace.transform.minimize`). Pure."""

from __future__ import annotations

from collections.abc import Iterable


class Partition:
    """`n` indices, each its own group until `join`ed; a group's root is its least index."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        """The root of `i`'s group."""
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(self, a: int, b: int) -> None:
        """`a`'s group and `b`'s are one."""
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self, members: Iterable[int] | None = None) -> list[list[int]]:
        """The groups of `members` (default: every index), each in the order given, in the order of their first
        member."""
        out: dict[int, list[int]] = {}
        for i in range(len(self.parent)) if members is None else members:
            out.setdefault(self.find(i), []).append(i)
        return list(out.values())
