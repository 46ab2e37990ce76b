"""The compiled fold (setup.py, `rtrace._compiled`) against its source, the reference: the same report, byte for byte,
on every sample trace and on traces drawn at random; the switch to the source; a stale build never runs."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from rtrace import _compiled
from rtrace._compiled import COMPILED, PURE_ENV
from rtrace.core.facts import FACTS

from .conftest import ROOT, SAMPLES
from .strategies import envelopes


def _run(args: list[str], pure: bool, cwd: Path) -> tuple[int, bytes, bytes]:
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    if pure:
        env[PURE_ENV] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "rtrace", *args], cwd=cwd, env=env, capture_output=True, timeout=600, check=False
    )
    return proc.returncode, proc.stdout, proc.stderr


def _which(pure: bool) -> str:
    code = "import rtrace._compiled as c; print(c.compiled())"
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    if pure:
        env[PURE_ENV] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


needs_compiled = pytest.mark.skipif(not _compiled.compiled(), reason="the fold is not compiled here (no mypyc build)")


def test_every_compiled_module_is_a_module_of_the_package_with_its_source() -> None:
    for module in COMPILED:
        assert module.startswith("rtrace.")
        assert _compiled.source_of(module).is_file(), module
    assert len(set(COMPILED)) == len(COMPILED)


def test_the_makefile_rebuilds_when_a_compiled_source_changes() -> None:
    out = subprocess.run(
        ["make", "-p", "-n", "-f", "Makefile", ".venv/.runtime"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("COMPILED_SOURCES :="))
    assert line.split(":=", 1)[1].split() == [m.replace(".", "/") + ".py" for m in COMPILED]


def test_the_fold_is_compiled_where_ci_runs() -> None:
    """`make test` in a fresh clone (CI) compiles the fold: CI tests what users run, and the source beside it here."""
    if not os.environ.get("CI"):
        pytest.skip("only CI promises a C compiler")
    assert _compiled.compiled()


@needs_compiled
def test_the_environment_switch_runs_the_source() -> None:
    assert _which(pure=False) == "True"
    assert _which(pure=True) == "False"


@needs_compiled
def test_compiled_and_source_give_the_same_report_on_every_sample(tmp_path: Path) -> None:
    paths = [str(p.relative_to(ROOT)) for p in sorted(SAMPLES.rglob("*.jsonl"))]
    assert len(paths) > 50
    for args in (["analyze", "-f", "json", "-j", "1", *paths], ["analyze", "-j", "1", "--fail-on", "info", *paths]):
        compiled, pure = _run(args, pure=False, cwd=ROOT), _run(args, pure=True, cwd=ROOT)
        assert compiled[0] in (0, 1), compiled[2]
        assert compiled == pure
    pages = {}
    for pure_run in (False, True):  # the HTML report, whose page data is folded by compiled code too
        page = tmp_path / f"{pure_run}.html"
        done = _run(["report", *paths, "-o", str(page)], pure=pure_run, cwd=ROOT)
        assert done[0] == 0, done[2]
        pages[pure_run] = page.read_bytes()
    assert pages[False] == pages[True]


def _drawn(n: int) -> list[list[dict[str, Any]]]:
    """`n` random traces of the reducer's property tests (tests/strategies.py), the same ones each run."""
    out: list[list[dict[str, Any]]] = []

    @settings(
        max_examples=n,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(envelopes(max_size=60))
    def collect(lines: list[dict[str, Any]]) -> None:
        out.append(lines)

    collect()
    return out


@needs_compiled
def test_compiled_and_source_give_the_same_report_on_random_traces(tmp_path: Path) -> None:
    traces = _drawn(300)
    for k, lines in enumerate(traces):
        (tmp_path / f"t{k:03}.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    args = ["analyze", "-f", "json", "-j", "1", "--fail-on", "info", *sorted(p.name for p in tmp_path.iterdir())]
    compiled, pure = _run(args, pure=False, cwd=tmp_path), _run(args, pure=True, cwd=tmp_path)
    assert compiled[0] in (0, 1), compiled[2]
    assert b"analysis failed" not in compiled[1] + compiled[2]
    assert compiled == pure


def test_a_compiled_module_older_than_its_source_is_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rtrace" / "core").mkdir(parents=True)
    source = tmp_path / "rtrace" / "core" / "reducer.py"
    built = source.with_suffix(_compiled.importlib.machinery.EXTENSION_SUFFIXES[0])
    source.write_text("")
    built.write_bytes(b"")
    monkeypatch.setattr(_compiled, "_ROOT", tmp_path / "rtrace")
    os.utime(built, (1_000_000, 1_000_000))
    os.utime(source, (1_000_000 + _compiled.STALE_AFTER_S / 2, 1_000_000 + _compiled.STALE_AFTER_S / 2))
    assert _compiled.stale(["rtrace.core.reducer"]) == []  # written by one install, in either order
    os.utime(source, (1_000_000 + 60, 1_000_000 + 60))
    assert _compiled.stale(["rtrace.core.reducer"]) == ["rtrace.core.reducer"]  # edited since the build
    assert _compiled.stale(["rtrace.core.state"]) == []  # not built: nothing stale
    library = (tmp_path / "rtrace" / "core" / "_fold__mypyc").with_suffix(built.suffix)
    library.write_bytes(b"")
    os.utime(library, (1_000_000 + 120, 1_000_000 + 120))
    assert _compiled.stale(["rtrace.core.reducer"]) == []  # rebuilt in place: the library is new, the stub kept
    os.utime(source, (1_000_000 + 180, 1_000_000 + 180))
    assert _compiled.stale(["rtrace.core.reducer"]) == ["rtrace.core.reducer"]  # edited since that rebuild


@needs_compiled
def test_a_stale_build_runs_from_source_and_says_so(tmp_path: Path) -> None:
    """A checkout where one compiled module is older than its source (simulated by `stale` answering so): every
    module of the fold runs from its source, and stderr says why once."""
    code = (
        "import rtrace._compiled as c\n"
        "c.stale = lambda modules=c.COMPILED: ['rtrace.core.reducer']\n"
        "c.choose()\n"
        "print(c.compiled())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != PURE_ENV}
    # rtrace/__init__ runs `choose` first; this runs it again under the patched `stale` before the fold is imported.
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert out.stderr.count("running from source") == 1
    assert "rtrace.core.reducer is older than its source" in out.stderr


def own_inits() -> list[type]:
    """The dataclasses of the compiled modules that write their own `__init__` (not the one `dataclasses` makes)."""
    found = []
    for module in COMPILED:
        for value in vars(importlib.import_module(module)).values():
            if inspect.isclass(value) and value.__module__ == module and dataclasses.is_dataclass(value):
                code = getattr(value.__dict__.get("__init__"), "__code__", None)
                if code is not None and code.co_filename != "<string>":
                    found.append(value)
    return found


def check_own_inits() -> list[str]:
    """Each of `own_inits` takes its fields as the generated `__init__` would: the init fields in order, the same
    defaults (a `default_factory` field defaults to None and gets a new value of the factory), and every field set.
    Run from source (the check reads signatures and passes placeholder values)."""
    checked = []
    for cls in own_inits():
        fields = dataclasses.fields(cls)
        init = [f for f in fields if f.init]
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        assert [p.name for p in params] == [f.name for f in init], cls
        for p, f in zip(params, init, strict=True):
            if f.default is not dataclasses.MISSING:
                assert type(p.default) is type(f.default) and p.default == f.default, (cls, f.name)
            elif f.default_factory is not dataclasses.MISSING:
                assert p.default is None, (cls, f.name)
            else:
                assert p.default is inspect.Parameter.empty, (cls, f.name)
        required = {f.name: object() for f in init if f.default is f.default_factory is dataclasses.MISSING}
        one, two = cls(**required), cls(**required)
        for f in fields:
            value = getattr(one, f.name)
            if f.name in required:
                assert value is required[f.name], (cls, f.name)
            elif f.default_factory is not dataclasses.MISSING:
                assert value == f.default_factory() and value is not getattr(two, f.name), (cls, f.name)
            else:
                assert type(value) is type(f.default) and value == f.default, (cls, f.name)
        checked.append(cls.__qualname__)
    return checked


def test_a_dataclass_that_writes_its_own_init_takes_its_fields_as_the_generated_one_would() -> None:
    env = {**os.environ, PURE_ENV: "1"}
    code = "from tests.test_compiled import check_own_inits; print(' '.join(check_own_inits()))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    checked = set(out.stdout.split())
    assert {"Item", "Change", "Response"} | {f.__qualname__ for f in FACTS} <= checked
