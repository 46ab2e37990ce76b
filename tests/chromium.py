"""Headless Chromium for the report tests (Debian's `chromium`, installed by `make test`), and npm downloads
of the reference files those tests check against (fetched with `npm pack`, pinned by hash, cached in .cache/)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from .conftest import ROOT

CACHE = ROOT / ".cache"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--virtual-time-budget=10000",
]


def find_chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (the Makefile's test target installs it)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


def run_chromium(chromium: str, workdir: Path, url: str, *extra: str) -> str:
    """Run Chromium headless on `url` with a fresh profile; return its stdout (the DOM with --dump-dom)."""
    profile = workdir / f"profile-{len(list(workdir.iterdir()))}"
    proc = subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={profile}", *extra, url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def npm_file(package: str, member: str, sha256: str, name: str) -> Path:
    """One file out of an npm package tarball, checked against its hash; skips (fails on CI) without npm."""
    target = CACHE / name
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == sha256:
        return target
    npm = shutil.which("npm")
    if npm is None:
        if os.environ.get("CI"):
            pytest.fail(f"npm is needed to fetch {package}")
        pytest.skip(f"npm not installed: cannot fetch {package}")
    work = CACHE / "npm-pack"
    work.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([npm, "pack", package, "--silent"], cwd=work, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    tgz = work / proc.stdout.strip().splitlines()[-1]
    with tarfile.open(tgz) as tar:
        extracted = tar.extractfile(member)
        assert extracted is not None, member
        data = extracted.read()
    tgz.unlink()
    assert hashlib.sha256(data).hexdigest() == sha256, f"{package}:{member} is not the pinned file"
    target.write_bytes(data)
    return target
