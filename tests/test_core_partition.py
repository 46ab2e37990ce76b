"""rtrace.core.partition: indices joined into groups, each in the order given, in the order of their first member."""

from __future__ import annotations

import random

from rtrace.core.partition import Partition


def test_joined_indices_are_one_group_transitively_and_the_rest_stand_alone() -> None:
    p = Partition(6)
    p.join(4, 1)
    p.join(1, 3)
    p.join(5, 5)
    assert p.groups() == [[0], [1, 3, 4], [2], [5]]
    assert p.find(4) == p.find(3) == 1 and p.find(2) == 2
    assert p.groups([5, 4, 0, 3]) == [[5], [4, 3], [0]]  # only the members given, in their order


def test_groups_are_the_connected_components_of_the_links() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 12)
        links = [(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, n))]
        p = Partition(n)
        for a, b in links:
            p.join(a, b)
        reach = {i: {i} for i in range(n)}  # the closure, by brute force
        changed = True
        while changed:
            changed = False
            for a, b in links:
                merged = reach[a] | reach[b]
                for i in merged:
                    if reach[i] != merged:
                        reach[i], changed = merged, True
        expected = sorted({tuple(sorted(c)) for c in reach.values()})
        assert [tuple(g) for g in p.groups()] == expected
