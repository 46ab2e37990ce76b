"""The floors of the house and the imports allowed between them (docs/ARCHITECTURE.md).

Read from the source with `ast` (every `import` and `from ... import`, at module level or inside a function), so a
lazy import counts as much as a top-level one. Fails on an import the table does not allow, on a third-party
module a pure floor must not touch, and on an import cycle between modules.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rtrace"

#: floor -> the floors it may import (itself always). `rtrace` is the package root (`__version__`, and `_compiled`,
#: which chooses between the compiled fold and its source before any floor is imported).
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset({"rtrace"}),
    "rules": frozenset({"rtrace", "core"}),
    "engine": frozenset({"rtrace", "core", "rules"}),
    # `report.sweep` and `report.replay` render the results of `net.hunt.sweep` and `net.replay.runner`.
    "report": frozenset({"rtrace", "core", "rules", "engine", "net"}),
    "transform": frozenset({"rtrace", "core", "rules", "engine"}),
    # `net.hunt` minimizes the trace of each bug it found (`hunt.bugscript`: `transform.minimize`).
    "net": frozenset({"rtrace", "core", "rules", "engine", "transform"}),
    "integrations": frozenset({"rtrace", "core", "rules", "engine", "net", "report"}),
    "cli": frozenset({"rtrace", "core", "rules", "engine", "report", "transform", "net", "integrations"}),
    "rtrace": frozenset(),
}

#: Third-party and stdlib modules a floor must never import (the sans-I/O rule: no event loop, no sockets, no
#: terminal in the pure floors).
FORBIDDEN: dict[str, frozenset[str]] = {
    "core": frozenset({"asyncio", "websockets", "rich", "typer", "socket", "time"}),
    "rules": frozenset({"asyncio", "websockets", "rich", "typer", "socket", "time"}),
    "engine": frozenset({"asyncio", "websockets", "rich", "typer"}),
    "net": frozenset({"rich", "typer"}),
    "report": frozenset({"asyncio", "websockets", "typer"}),
    "transform": frozenset({"asyncio", "websockets", "rich", "typer"}),
}


#: net's packages (`rtrace.net.X`) -> the floors and net packages each may import (itself always). The fault language
#: and the fake endpoint are pure; the links move frames and time; nothing in net imports the hunt.
NET_ALLOWED: dict[str, frozenset[str]] = {
    "faults": frozenset({"rtrace", "core"}),
    "fake": frozenset({"rtrace", "core", "faults"}),
    "link": frozenset({"rtrace", "core", "engine", "rules", "faults", "fake"}),
    "replay": frozenset({"rtrace", "core", "engine", "rules", "faults", "fake", "link"}),
    # `hunt.bugscript` minimizes the trace of each bug it found (`transform.minimize`).
    "hunt": frozenset({"rtrace", "core", "engine", "rules", "transform", "faults", "fake", "link", "replay"}),
}

#: What a pure net package must never import: no event loop, no socket, no clock, no process, no terminal.
NET_FORBIDDEN: dict[str, frozenset[str]] = {
    "faults": frozenset({"asyncio", "websockets", "socket", "time", "subprocess", "threading", "rich", "typer"}),
    "fake": frozenset({"asyncio", "websockets", "socket", "time", "subprocess", "threading", "rich", "typer"}),
}

#: No module longer than this (lines).
MAX_LINES = 800

#: No folder under net/ holds more modules than this (`__init__` aside).
MAX_MODULES_PER_FOLDER = 12


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def floor_of(module: str) -> str:
    """`rtrace.core.state` -> `core`; `rtrace.cli` -> `cli`; `rtrace` -> `rtrace`; `rtrace.__main__` -> `cli`."""
    parts = module.split(".")
    if len(parts) == 1 or (len(parts) == 2 and parts[1] == "_compiled"):
        return "rtrace"
    return "cli" if parts[1] in ("cli", "__main__") else parts[1]


def net_package_of(module: str) -> str | None:
    """`rtrace.net.fake.endpoint` -> `fake`; `rtrace.net` -> `""` (the floor's own `__init__`); outside net: None."""
    parts = module.split(".")
    if parts[:2] != ["rtrace", "net"]:
        return None
    return parts[2] if len(parts) > 2 else ""


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module) for every import in the file, relative ones resolved."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target
            if node.module is None or node.level:
                # `from . import x` may import the module `x`
                for alias in node.names:
                    yield node.lineno, f"{target}.{alias.name}"


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def internal_edges() -> dict[str, set[str]]:
    """module -> the rtrace modules it imports (names that are modules, not attributes)."""
    known = modules()
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        out = edges.setdefault(name, set())
        for _, target in imports(path):
            if target in known and target != name:
                out.add(target)
    return edges


def violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for source, targets in sorted(edges.items()):
        src_floor = floor_of(source)
        for target in sorted(targets):
            dst_floor = floor_of(target)
            if dst_floor != src_floor and dst_floor not in ALLOWED[src_floor]:
                bad.append(f"{source} ({src_floor}) imports {target} ({dst_floor})")
    return bad


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_module_sits_on_a_known_floor() -> None:
    for name in modules():
        assert floor_of(name) in ALLOWED, f"{name}: add its floor to ALLOWED (and to docs/ARCHITECTURE.md)"


def test_imports_between_floors_follow_the_table() -> None:
    assert violations(internal_edges()) == []


def forbidden_imports(place: Callable[[str], str | None], here: str, banned: frozenset[str]) -> list[str]:
    """`file:line imports X` for each import of a module in `banned` by a module whose `place` is `here`."""
    bad = []
    for name, path in modules().items():
        if place(name) == here:
            for line, target in imports(path):
                if target.split(".")[0] in banned:
                    bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    return bad


@pytest.mark.parametrize("floor", sorted(FORBIDDEN))
def test_pure_floors_import_no_event_loop_socket_or_terminal(floor: str) -> None:
    assert forbidden_imports(floor_of, floor, FORBIDDEN[floor]) == []


def test_no_import_cycle_between_modules() -> None:
    assert cycles(internal_edges()) == []


def test_the_checks_catch_a_cycle_and_a_floor_violation() -> None:
    """The table is not vacuous: the import cycle the first layout had (server <-> record) and a rule importing
    the network floor are both caught."""
    old = {"rtrace.net.link.server": {"rtrace.net.link.proxy"}, "rtrace.net.link.proxy": {"rtrace.net.link.server"}}
    assert cycles(old) == [["rtrace.net.link.proxy", "rtrace.net.link.server"]]
    assert violations({"rtrace.rules.tools": {"rtrace.net.link.server"}}) == [
        "rtrace.rules.tools (rules) imports rtrace.net.link.server (net)"
    ]
    assert violations({"rtrace.core.loader": {"rtrace.report.terminal"}}) != []


#: Source modules whose tests live under another name (with the reason).
TESTED_ELSEWHERE: dict[str, str] = {
    "rtrace.__main__": "tests/test_cli_root.py",
    "rtrace.cli.__main__": "tests/test_cli_root.py",
    "rtrace._compiled": "tests/test_compiled.py",
}


def test_every_source_module_has_its_test_module() -> None:
    """`rtrace/a/b.py` is tested in `tests/test_a_b.py` (`rtrace/cli/root.py` in `tests/test_cli_root.py`)."""
    tests = PACKAGE.parent / "tests"
    missing = []
    for name, path in modules().items():
        if path.name == "__init__.py" or name in TESTED_ELSEWHERE:
            continue
        expected = tests / ("test_" + "_".join(name.split(".")[1:]) + ".py")
        if not expected.exists():
            missing.append(f"{path.relative_to(PACKAGE.parent)} -> {expected.relative_to(PACKAGE.parent)}")
    assert missing == []


# -- net's packages ------------------------------------------------------------------------------------------------


def net_violations(edges: dict[str, set[str]]) -> list[str]:
    """Imports out of a net package that `NET_ALLOWED` does not allow (to a floor or to another net package)."""
    bad = []
    for source, targets in sorted(edges.items()):
        package = net_package_of(source)
        if not package:
            continue
        for target in sorted(targets):
            other = net_package_of(target)
            where = other if other is not None else floor_of(target)
            if where not in (package, "") and where not in NET_ALLOWED[package]:
                bad.append(f"{source} (net.{package}) imports {target} ({'net.' if other else ''}{where})")
    return bad


def package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """net package -> the net packages its modules import."""
    out: dict[str, set[str]] = {}
    for source, targets in edges.items():
        package = net_package_of(source)
        if package:
            for target in targets:
                other = net_package_of(target)
                if other and other != package:
                    out.setdefault(package, set()).add(other)
    return out


def test_every_net_module_sits_in_a_package_of_the_table() -> None:
    loose = [name for name in modules() if net_package_of(name) not in (None, "", *NET_ALLOWED)]
    assert loose == [], "a module of rtrace/net/ belongs in one of its packages (NET_ALLOWED, docs/ARCHITECTURE.md)"


def test_imports_between_net_packages_follow_the_table() -> None:
    assert net_violations(internal_edges()) == []


@pytest.mark.parametrize("package", sorted(NET_FORBIDDEN))
def test_pure_net_packages_import_no_event_loop_socket_or_clock(package: str) -> None:
    assert forbidden_imports(net_package_of, package, NET_FORBIDDEN[package]) == []


def test_no_import_cycle_between_net_packages() -> None:
    assert cycles(package_edges(internal_edges())) == []


def test_the_net_checks_catch_an_import_up_and_a_cycle_between_packages() -> None:
    """The table is not vacuous: the link importing the hunt's command runner, the fault language importing the
    fake endpoint's frames (both in the first layout of the packages), and a cycle they would make, are caught."""
    up = {
        "rtrace.net.link.upstream": {"rtrace.net.hunt.sweep"},
        "rtrace.net.faults.script": {"rtrace.net.fake.wire"},
        "rtrace.net.fake.endpoint": {"rtrace.net.faults.script", "rtrace.core.audio", "rtrace.net"},
    }
    assert net_violations(up) == [
        "rtrace.net.faults.script (net.faults) imports rtrace.net.fake.wire (net.fake)",
        "rtrace.net.link.upstream (net.link) imports rtrace.net.hunt.sweep (net.hunt)",
    ]
    assert cycles(package_edges(up)) == [["fake", "faults"]]
    assert net_violations({"rtrace.net.fake.ids": {"rtrace.engine.fold"}}) != []


def test_no_module_is_longer_than_the_limit() -> None:
    long = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        name = path.relative_to(PACKAGE.parent).as_posix()
        if lines > MAX_LINES:
            long[name] = lines
    assert long == {}, f"split each (no module over {MAX_LINES} lines)"


def test_no_folder_under_net_holds_more_than_twelve_modules() -> None:
    crowded = {}
    for folder in sorted(p for p in (PACKAGE / "net").rglob("*") if p.is_dir() and p.name != "__pycache__"):
        count = sum(1 for p in folder.glob("*.py") if p.name != "__init__.py")
        if count > MAX_MODULES_PER_FOLDER:
            crowded[folder.relative_to(PACKAGE.parent).as_posix()] = count
    assert crowded == {}


def test_every_path_the_architecture_names_exists() -> None:
    """docs/ARCHITECTURE.md is the map: each `floor/x.py`, `tests/x.py` and `rtrace.a.b` it names (its section of
    old names aside) is in the tree."""
    root = PACKAGE.parent
    text = (root / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8").split("## Old module names")[0]
    floors = "|".join(sorted(ALLOWED))
    missing: list[str] = []
    placeholders = {"rtrace/a/b.py", "tests/test_a_b.py"}  # the naming rule's example
    for m in re.finditer(rf"(?<![\w/.])(?:rtrace/)?((?:{floors})/[\w/]+\.(?:py|c|json))\b", text):
        if m.group(0) not in placeholders and not (PACKAGE / m.group(1)).exists() and not (root / m.group(0)).exists():
            missing.append(m.group(0))
    for m in re.finditer(r"(?<![\w/.])((?:tests|bench|docs)/[\w/]+\.(?:py|md))\b", text):
        if m.group(0) not in placeholders and not (root / m.group(1)).exists():
            missing.append(m.group(0))
    known = modules()
    for m in re.finditer(r"(?<![\w.])rtrace(?:\.\w+)+(?!\.?\w)", text):
        if m.group(0) in ("rtrace.toml", "rtrace.core._fold__mypyc"):  # the settings file; a module built by setup.py
            continue
        parts = m.group(0).split(".")
        n = next((n for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in known), 0)
        if n < len(parts):  # `module.Name...`: Name is defined or imported at the module's top level
            source = known[".".join(parts[:n])].read_text(encoding="utf-8") if n else ""
            name = re.escape(parts[n])
            if not re.search(rf"^(?:(?:async )?def |class )?{name}\b|^(?:from \S+ )?import .*\b{name}\b", source, re.M):
                missing.append(m.group(0))
    assert missing == []
