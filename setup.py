"""The optional compiled parts of rtrace; everything else is in pyproject.toml. Both are optional: a machine without
a C compiler or Python's headers still installs rtrace, which then runs every line as plain Python (the reference:
same reports, slower). `make test` builds both and checks they are there when `CI` is set.

* `rtrace.core._scan` (`_scan.c`): the reader's fast path, which takes the lines a full parse would only count.
* The fold (`COMPILED`): the conversation model, the reducer, the engine's loop and the rules, compiled by mypyc from
  the same typed modules (black and mypy ship this way). The `.py` files stay the one source of truth; a compiled
  module is only what mypyc made of its `.py`. `RTRACE_MYPYC=0` in the environment of the build skips it.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:
    from setuptools.errors import CCompilerError, CompileError, DistutilsError
except ImportError:  # older setuptools
    from distutils.errors import CCompilerError, CompileError, DistutilsError

#: The scanner's extension module.
SCANNER = "rtrace.core._scan"


def _compiled_names() -> dict[str, object]:
    """`rtrace/_compiled.py`'s names, read without importing rtrace (its dependencies may not be there)."""
    namespace: dict[str, object] = {"__file__": "rtrace/_compiled.py", "__name__": "rtrace._compiled"}
    exec(compile(open("rtrace/_compiled.py", encoding="utf-8").read(), "rtrace/_compiled.py", "exec"), namespace)
    return namespace


def compiled_sources() -> list[str]:
    """The files of `rtrace._compiled.COMPILED`."""
    return [m.replace(".", "/") + ".py" for m in _compiled_names()["COMPILED"]]  # type: ignore[attr-defined]


def has_compiler() -> bool:
    """Whether the C compiler the build would call (`CC`, or the one Python was built with) is on this machine."""
    command = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    return bool(command) and shutil.which(command[0]) is not None


def compiled() -> list[Extension]:
    """mypyc's extensions of `COMPILED` (built all or none, `BuildExt`), or none when mypyc is missing, refused
    (`RTRACE_MYPYC=0`), or fails to translate the modules."""
    if os.environ.get("RTRACE_MYPYC", "1") == "0" or sys.implementation.name != "cpython":
        return []
    if not has_compiler():  # mypyc's translation takes a minute: not for C that cannot be compiled
        print("rtrace: no C compiler found; rtrace runs as plain Python", file=sys.stderr)
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        return []
    try:
        extensions = mypycify(compiled_sources(), opt_level="3", group_name=str(_compiled_names()["GROUP"]))
    except (Exception, SystemExit) as e:  # mypy or mypyc refused them: rtrace stays pure
        print(f"rtrace: not compiling the fold ({e!r}); rtrace runs as plain Python", file=sys.stderr)
        return []
    for extension in extensions:  # one that failed to build is not copied into an editable checkout
        extension.optional = True
    return extensions


class BuildExt(build_ext):
    """Builds the scanner if it can, and mypyc's extensions all or none: they are one program (a shared library and
    a module for each of `COMPILED`), and a module compiled without the rest would not import."""

    def run(self) -> None:
        # setuptools builds with `inplace` off and copies the result into the checkout afterwards, so it is only seen
        # here: a compiled module that this build does not make (one that left `COMPILED`, or every one of them when
        # the fold is not compiled) would shadow its `.py` and break the import of the others.
        if self.inplace or getattr(self, "editable_mode", False):
            building = {e.name for e in self.extensions}
            for built in Path("rtrace").rglob("*.so"):
                if ".".join((*built.parent.parts, built.name.split(".")[0])) not in building:
                    built.unlink()
        super().run()

    def build_extensions(self) -> None:
        self.check_extensions_list(self.extensions)
        fold = [e for e in self.extensions if e.name != SCANNER]
        for ext in self.extensions:
            if ext.name == SCANNER:
                try:
                    self.build_extension(ext)
                except (CCompilerError, DistutilsError, CompileError) as e:
                    print(f"rtrace: no C scanner ({e}); the reader runs as plain Python", file=sys.stderr)
        for ext in fold:
            try:
                self.build_extension(ext)
            except (CCompilerError, DistutilsError, CompileError) as e:
                print(f"rtrace: not compiling the fold ({e}); rtrace runs as plain Python", file=sys.stderr)
                for built in fold:
                    Path(self.get_ext_fullpath(built.name)).unlink(missing_ok=True)
                return


setup(
    ext_modules=[Extension(SCANNER, ["rtrace/core/_scan.c"], extra_compile_args=["-O2"], optional=True), *compiled()],
    cmdclass={"build_ext": BuildExt},
)
