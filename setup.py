"""The optional C extension `rtrace.core._scan` (the reader's fast path); everything else is in pyproject.toml.

`optional=True`: a machine without a C compiler or Python's headers still installs rtrace, which then reads every
line through the pure-Python path (the reference: same reports, slower). `make test` builds it (tests check it is
there when `CI` is set).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("rtrace.core._scan", ["rtrace/core/_scan.c"], optional=True, extra_compile_args=["-O2"])])
