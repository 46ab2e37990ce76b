"""Many traces at once: the per-trace analysis mapped over a process pool or a Dask cluster.

Owns only the fan-out. Each task runs `analysis.analyze_reader` on one trace and returns its `TraceReport`;
reports come back in input order whatever the engine, and a trace that fails (unreadable, a bug, a lost
worker) becomes a report saying so while the others go on. No state is shared between traces.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
from collections.abc import Sequence

from .analysis import TraceReport, analyze_path, analyze_reader
from .detectors.base import Config, Rule
from .loader import TraceReader, UnreadableInput

#: Seconds to wait for the Dask scheduler to answer.
CONNECT_TIMEOUT = 10


class EngineUnavailable(Exception):
    """The Dask engine cannot be used: `dask[distributed]` (the `dask` extra) is missing, or the scheduler
    does not answer."""


def failed(path: str, why: str) -> TraceReport:
    """The report of a trace that could not be analyzed."""
    return TraceReport(path, 0, 0, 0.0, [], [], 0, unreadable=why)


def analyze_file(path: str, config: Config, rules: Sequence[type[Rule]], max_line_bytes: int) -> TraceReport:
    """One local trace (or `-`, stdin), other tools' captures converted as `rtrace analyze` does; never raises."""
    from .importers import native_path

    try:
        with native_path(path) as readable:
            report = analyze_path(readable, config, rules, max_line_bytes=max_line_bytes)
        report.path = path
        return report
    except UnreadableInput as e:
        return failed(path, str(e))
    except Exception as e:  # a bug in one trace's analysis must not end the others
        return failed(path, f"analysis failed: {type(e).__name__}: {e}")


def analyze_url(url: str, config: Config, rules: Sequence[type[Rule]], max_line_bytes: int) -> TraceReport:
    """One trace at a local path or an fsspec URL (`s3://bucket/a.jsonl`); never raises. Runs on Dask workers."""
    if "://" not in url:
        return analyze_file(url, config, rules, max_line_bytes)
    try:
        import fsspec

        with fsspec.open(url, "rb") as stream, TraceReader(stream, url, max_line_bytes=max_line_bytes) as reader:
            return analyze_reader(reader, config, rules)
    except ImportError:
        return failed(url, "reading URLs needs fsspec (pip install 'rtrace[dask]')")
    except OSError as e:
        return failed(url, f"{url}: {e.strerror or e}")
    except Exception as e:
        return failed(url, f"analysis failed: {type(e).__name__}: {e}")


def jobs_for(jobs: int) -> int:
    """`-j 0` means one job per CPU."""
    return jobs if jobs > 0 else (os.cpu_count() or 1)


def analyze_local(
    paths: Sequence[str], config: Config, rules: Sequence[type[Rule]], max_line_bytes: int, jobs: int = 1
) -> list[TraceReport]:
    """Analyze `paths` with `jobs` processes (1: in this process). Reports are in the order of `paths`."""
    workers = min(jobs_for(jobs), len(paths))
    if workers <= 1:
        return [analyze_file(p, config, rules, max_line_bytes) for p in paths]
    reports: list[TraceReport | None] = [None] * len(paths)
    lost: list[int] = []
    # Largest first, so that a big trace picked last does not leave one worker running alone at the end.
    order = sorted((k for k, p in enumerate(paths) if p != "-"), key=lambda k: -_size(paths[k]))
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(analyze_file, paths[k], config, rules, max_line_bytes): k for k in order}
        for k, p in enumerate(paths):  # stdin can only be read by this process
            if p == "-":
                reports[k] = analyze_file(p, config, rules, max_line_bytes)
        for future, k in futures.items():
            try:
                reports[k] = future.result()
            except concurrent.futures.process.BrokenProcessPool:
                lost.append(k)
    # A worker that died (killed, out of memory) breaks the whole pool: every trace it took down is retried
    # alone, so only the one that kills its worker is reported as failed.
    for k in lost:
        with concurrent.futures.ProcessPoolExecutor(max_workers=1) as pool:
            try:
                reports[k] = pool.submit(analyze_file, paths[k], config, rules, max_line_bytes).result()
            except concurrent.futures.process.BrokenProcessPool as e:
                reports[k] = failed(paths[k], f"analysis failed: the worker process died ({e})")
    return [r for r in reports if r is not None]


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def url_of(path: os.PathLike[str] | str) -> str:
    """The URL a command-line path stood for: `Path("s3://b/k")` reads back as `s3:/b/k`, which is undone here."""
    text = os.fspath(path)
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]+):/(?!/)", text)
    if match is None:
        return text
    scheme, rest = match.group(1), text[match.end() :]
    return f"{scheme}:///{rest}" if scheme == "file" else f"{scheme}://{rest}"


def expand_urls(urls: Sequence[str]) -> list[str]:
    """Local paths and directories as the CLI expands them; fsspec URLs and globs through fsspec."""
    out: list[str] = []
    for url in urls:
        if "://" not in url:
            out.append(url)
            continue
        try:
            import fsspec
        except ImportError:
            raise EngineUnavailable("reading URLs needs fsspec (pip install 'rtrace[dask]')") from None
        fs, _, found = fsspec.get_fs_token_paths(url)
        protocol = fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol
        if len(found) == 1 and fs.isdir(found[0]):
            found = sorted(fs.glob(found[0].rstrip("/") + "/**/*.jsonl"))
        out.extend(p if "://" in p else f"{protocol}://{p}" for p in sorted(found))
    return out


def analyze_dask(
    urls: Sequence[str],
    config: Config,
    rules: Sequence[type[Rule]],
    max_line_bytes: int,
    scheduler: str,
) -> list[TraceReport]:
    """Analyze `urls` on the Dask cluster at `scheduler`: one task per trace, gathered in input order."""
    try:
        from distributed import Client
    except ImportError:
        raise EngineUnavailable("--engine dask needs dask[distributed] (pip install 'rtrace[dask]')") from None
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT)
    except (OSError, ValueError) as e:  # refused, timed out, or not an address at all
        raise EngineUnavailable(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
    try:
        futures = client.map(
            analyze_url, list(urls), config=config, rules=tuple(rules), max_line_bytes=max_line_bytes, pure=False
        )
        reports: list[TraceReport] = []
        for url, future in zip(urls, futures, strict=True):
            try:
                reports.append(future.result())
            except Exception as e:  # a lost worker, a task the cluster gave up on
                reports.append(failed(url, f"analysis failed on the cluster: {type(e).__name__}: {e}"))
        return reports
    finally:
        client.close()
