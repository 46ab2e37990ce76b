"""The modules mypyc compiles (setup.py), and the switch back to their source.

A compiled module is what mypyc made of its `.py`, which stays the one source of truth. The `.py` is the reference:
`RTRACE_PURE=1` in the environment runs every module from its source (tests/test_compiled.py compares the two on
every sample trace). A compiled module older than its source (an edit since the last build, in a checkout) would run
the old code: then rtrace runs them all from source and says so once, on stderr. A compiled module is used only when
all of them are there and current: they call into each other's compiled code.

A dataclass the fold makes per record (the facts, `Item`, `Change`, `Response`) writes its own `__init__`: the one
`dataclasses` generates is made with `exec` when the class is created, so it runs as interpreted code even where
mypyc compiles the class, and every construction went through the interpreter and generic attribute setting (`Item`'s
alone, with `item_from_event`, was 16% of the samples of a pipelined trace: bench/BENCHMARKS.md, sixth round).
`tests/test_compiled.py` holds each such `__init__` to the fields: their names, order and defaults, as the generated
one would take them.

This module imports nothing of rtrace and nothing outside the standard library: it runs first (`rtrace/__init__`),
before any of them is imported, and setup.py reads `COMPILED` from it without importing rtrace.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

#: What setup.py compiles, as module names.
COMPILED = (
    "rtrace.core.answers",
    "rtrace.core.audio",
    "rtrace.core.catalog",
    "rtrace.core.conversation",
    "rtrace.core.describe",
    "rtrace.core.escape",
    "rtrace.core.facts",
    "rtrace.core.fields",
    "rtrace.core.pending",
    "rtrace.core.reducer",
    "rtrace.core.rowpath",
    "rtrace.core.secrets",
    "rtrace.core.state",
    "rtrace.core.trace",
    "rtrace.engine.fold",
    "rtrace.report.html",
    "rtrace.report.show",
    "rtrace.rules.base",
    "rtrace.rules.calls",
    "rtrace.rules.protocol",
    "rtrace.rules.pushes",
    "rtrace.rules.reconnect",
    "rtrace.rules.responses",
    "rtrace.rules.tools",
    "rtrace.rules.turns",
)
#: The shared library of the compiled code, `GROUP__mypyc` inside the package (setup.py names it so, and an editable
#: install finds it where it finds rtrace). Each module's own compiled file is a stub that imports its part of it.
#: (Not written out as a quoted name: the Makefile reads every quoted word of this file that names a module of rtrace
#: as one of `COMPILED`.)
GROUP = __name__.rpartition(".")[0] + ".core._fold"
#: The environment variable that runs the source of every module, compiled or not.
PURE_ENV = "RTRACE_PURE"
#: How much newer than its compiled module a source may be and still be the code it was made from (an install writes
#: both, in any order).
STALE_AFTER_S = 5.0

_ROOT = Path(__file__).resolve().parent


def source_of(module: str) -> Path:
    return _ROOT.parent.joinpath(*module.split(".")).with_suffix(".py")


def built_of(module: str) -> Path | None:
    """The compiled module next to the source, if there is one."""
    source = source_of(module)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = source.with_suffix(suffix)
        if candidate.exists():
            return candidate
    return None


def stale(modules: Sequence[str] = COMPILED) -> list[str]:
    """The compiled modules whose source changed after they were built. A module was built when its stub or the
    group's library was last written, whichever is newer: a rebuild in place rewrites the library, but leaves a stub
    whose bytes did not change as it was (mypyc's build), so the stub's own time would call a fresh build stale."""
    out = []
    library = built_of(GROUP + "__mypyc")
    library_time = library.stat().st_mtime if library is not None else 0.0
    for module in modules:
        built = built_of(module)
        if built is None:
            continue
        if source_of(module).stat().st_mtime > max(built.stat().st_mtime, library_time) + STALE_AFTER_S:
            out.append(module)
    return out


class _SourceFinder:
    """Finds each of `COMPILED` as its `.py` (a meta path finder ahead of the path finder, which would take the
    compiled one: extension modules come first). Not an `importlib.abc.MetaPathFinder`: importing that module costs
    every command a tenth of its start-up, and `find_spec` is all the import system asks of a finder."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in COMPILED:
            return None
        import importlib.util

        source = str(source_of(fullname))
        loader = importlib.machinery.SourceFileLoader(fullname, source)
        return importlib.util.spec_from_file_location(fullname, source, loader=loader)


def run_from_source() -> None:
    """From now on, each of `COMPILED` imports from its source (call before any of them is imported)."""
    if not any(isinstance(f, _SourceFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFinder())


def choose() -> None:
    """Run the compiled modules, unless the environment asks for the source or one of them is older than its
    source, or some are missing (a partial build): then every one from its source."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        run_from_source()
        return
    built = [built_of(m) is not None for m in COMPILED]
    if not any(built):
        return
    old = stale()
    if old or not all(built):
        run_from_source()
        why = f"{old[0]} is older than its source" if old else "only some of its modules are compiled"
        print(f"rtrace: running from source: {why} (rebuild: pip install -e .)", file=sys.stderr)


def compiled() -> bool:
    """Whether the analysis runs compiled (every module of `COMPILED` imported from its compiled file)."""
    import importlib

    return all(not (importlib.import_module(m).__file__ or "").endswith(".py") for m in COMPILED)
