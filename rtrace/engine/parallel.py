"""Many traces at once, and one large trace read by two processes.

Owns only the fan-out. Each task runs `analysis.analyze_reader` on one trace and returns its `TraceReport`;
reports come back in input order whatever the engine, and a trace that fails (unreadable, a bug, a lost
worker) becomes a report saying so while the others go on. No state is shared between traces.

A single large trace is split instead (`analyze_split`): reading and parsing can be done anywhere in a file,
only the fold must go in order, so a child process reads the second part while this one reads and folds the
first, then folds what the child digested.
"""

from __future__ import annotations

import codecs
import dataclasses
import os
import pickle
import re
import signal
import stat
from collections.abc import Sequence
from typing import Any

from ..core.loader import MAX_KEPT_PROBLEMS, TraceReader, UnreadableInput
from ..rules.base import Config, Rule
from .fold import Fold, Observer, TraceReport, analyze_path, analyze_reader, digest

#: Traces smaller than this are read by one process: below it a second process does not pay for itself.
SPLIT_MIN_BYTES = 32 * 1024 * 1024
#: The share of the file this process reads when it splits one; it also folds the whole trace, so it takes less.
SPLIT_SHARE = 0.45

#: Seconds to wait for the Dask scheduler to answer.
CONNECT_TIMEOUT = 10


class EngineUnavailable(Exception):
    """The Dask engine cannot be used: `dask[distributed]` (the `dask` extra) is missing, or the scheduler
    does not answer."""


def failed(path: str, why: str) -> TraceReport:
    """The report of a trace that could not be analyzed."""
    return TraceReport(path, 0, 0, 0.0, [], [], 0, unreadable=why)


def analyze_file(
    path: str,
    config: Config,
    rules: Sequence[type[Rule]],
    max_line_bytes: int,
    jobs: int = 1,
    observer: Observer | None = None,
) -> TraceReport:
    """One local trace (or `-`, stdin), other tools' captures converted as `rtrace analyze` does; never raises.
    With `jobs` > 1 a large trace is read by two processes (`analyze_split`); with an `observer` (which watches the
    fold, see `fold.Observer`), by this one."""
    from ..core.importers import native_path

    try:
        with native_path(path) as readable:
            report = None
            if jobs_for(jobs) > 1 and observer is None:
                report = analyze_split(os.fspath(readable), config, rules, max_line_bytes)
            if report is None:
                report = analyze_path(readable, config, rules, observer, max_line_bytes=max_line_bytes)
        report.path = path
        return report
    except UnreadableInput as e:
        return failed(path, str(e))
    except Exception as e:  # a bug in one trace's analysis must not end the others
        return failed(path, f"analysis failed: {type(e).__name__}: {e}")


def analyze_split(
    path: str,
    config: Config,
    rules: Sequence[type[Rule]],
    max_line_bytes: int,
    *,
    share: float | None = None,
    min_bytes: int | None = None,
) -> TraceReport | None:
    """Analyze the regular file at `path` with a forked child reading its second part; None when it is not worth
    it or not possible (small, not a regular file, UTF-16, no fork), and the caller reads it alone.

    The file is cut after a newline near `SPLIT_SHARE` of its size. This process reads and folds the first part;
    the child reads the rest with a reader that starts there (`at_start=False`: no BOM, UTF-16 or header is
    looked for, lines count from 1) and writes `analysis.digest` of its rows to an unlinked spool file in
    batches, each announced by a byte on a pipe, then its counts and problems. Once done with its own part, this
    process folds the batches as they come, their seqs and lines shifted by the first part's: neither process
    holds the digest whole, and the child's work overlaps the end of the fold. The report is the one a single
    reading gives; when it could not be (a record of the second part took its `t` or `conn` from the lines
    before, the first part has no record to settle the header, the child failed), the whole trace is read again
    by this process alone. Not for callers with threads of their own (`fork`); the CLI has none.
    """
    if not hasattr(os, "fork") or path == "-":
        return None
    cut = _cut_of(path, SPLIT_SHARE if share is None else share, SPLIT_MIN_BYTES if min_bytes is None else min_bytes)
    channel = _channel() if cut is not None else None
    if cut is None or channel is None:
        return None
    spool_fd, feed, notify_r, notify_w = channel
    try:
        pid = os.fork()
    except OSError:  # no process to spare: read alone
        for fd in (notify_r, notify_w, spool_fd):
            os.close(fd)
        feed.close()
        return None
    if pid == 0:  # the child: digest the second part into the spool, and leave without running any cleanup
        status = 1
        try:
            os.close(notify_r)
            with os.fdopen(spool_fd, "wb") as spool:
                status = _digest_part(path, cut, max_line_bytes, spool, notify_w)
        finally:
            os._exit(status)
    os.close(notify_w)
    os.close(spool_fd)
    try:
        with open(path, "rb") as f, TraceReader(f, path, max_line_bytes=max_line_bytes, limit=cut) as reader:
            fold = Fold(config, rules)
            fold.rows(reader.rows())
        part = _fold_digest(fold, feed, notify_r, reader.count, reader.lines) if reader.count else None
    except BaseException:  # interrupted, or a bug: the child's work is of no use any more
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(notify_r)
        feed.close()
        _, status = os.waitpid(pid, 0)
    if status != 0 or part is None:
        return None
    shifted = [dataclasses.replace(p, line=p.line + reader.lines) for p in part.problems]
    problems = (reader.problems + shifted)[:MAX_KEPT_PROBLEMS]
    count, problem_count = reader.count + part.count, reader.problem_count + part.problem_count
    return fold.report(path, count, problems, problem_count, reader.header)


def _cut_of(path: str, share: float, min_bytes: int) -> int | None:
    """Where to cut the file at `path` (the start of the first line after `share` of it), or None when it is too
    small, not a regular file, UTF-16, or has no line after that point."""
    try:
        st = os.stat(path)  # before opening: a named pipe would block, and it cannot be read twice anyway
        size = st.st_size
        if size < max(min_bytes, 1) or not stat.S_ISREG(st.st_mode):
            return None
        with open(path, "rb") as f:
            head = f.read(4)
            if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or (len(head) == 4 and b"\0" in head):
                return None
            cut = _line_start_after(f, int(size * share))
    except OSError:
        return None
    return cut if cut is not None and cut < size else None


def _channel() -> tuple[int, Any, int, int] | None:
    """What the child writes its digest through: an unlinked spool file (its fd for the child, a reader of it for
    this process) and a notification pipe (read end, write end). None when the system has none to give."""
    try:
        import tempfile  # here, and the pool's module below: start-up time is paid by every command

        spool_fd, spool_path = tempfile.mkstemp(prefix="rtrace-split-")
        try:
            feed = open(spool_path, "rb")  # this process's own offset in the spool the child writes
        finally:
            os.unlink(spool_path)
    except OSError:
        return None
    try:
        notify_r, notify_w = os.pipe()
    except OSError:
        feed.close()
        os.close(spool_fd)
        return None
    return spool_fd, feed, notify_r, notify_w


def _line_start_after(f: Any, offset: int) -> int | None:
    """The offset of the first line that starts after `offset`, or None when no newline follows it."""
    f.seek(offset)
    pos = offset
    while True:
        block = f.read(1 << 16)
        if not block:
            return None
        nl = block.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(block)


@dataclasses.dataclass
class _Part:
    """What the child read besides the digest: counts and problems (lines counted from its start)."""

    count: int
    problems: list[Any]
    problem_count: int


#: Entries the child writes at a time: the digest streams through the spool, and neither process holds it whole.
_BATCH = 512
#: The child's exit status when its part cannot be read on its own (a record took `t` or `conn` from before).
_NOT_ALONE = 3


def _digest_part(path: str, start: int, max_line_bytes: int, spool: Any, notify: int) -> int:
    """The child's work: the digest of the part from `start`, in batches (lists), then its `_Part`. Each object is
    pickled into the spool, then announced by a byte on `notify`, so the parent folds batches as they come once
    it is done with its own part. Returns the child's exit status."""

    def send(obj: object) -> None:
        pickle.dump(obj, spool, pickle.HIGHEST_PROTOCOL)
        spool.flush()
        os.write(notify, b".")

    with open(path, "rb") as f:
        f.seek(start)
        with TraceReader(f, path, max_line_bytes=max_line_bytes, at_start=False) as reader:
            batch: list[Any] = []
            for entry in digest(reader.rows()):
                batch.append(entry)
                if len(batch) == _BATCH:
                    if reader.inferred:
                        return _NOT_ALONE
                    send(batch)
                    batch = []
            if reader.inferred:
                return _NOT_ALONE
            if batch:
                send(batch)
            send(_Part(reader.count, reader.problems, reader.problem_count))
    return 0


def _fold_digest(fold: Fold, feed: Any, notify: int, seq0: int, line0: int) -> _Part | None:
    """Fold the batches the child announces on `notify` until its `_Part`; None when it stopped before."""
    while tokens := os.read(notify, 4096):
        for _ in tokens:
            try:
                sent = pickle.load(feed)
            except Exception:  # a spool cut short (a full disk): the caller reads the trace alone
                return None
            if type(sent) is not list:
                return sent if isinstance(sent, _Part) else None
            fold.digested(sent, seq0, line0)
    return None


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
    """Analyze `paths` with `jobs` processes (1: in this process; one path: split when large). Reports are in the
    order of `paths`."""
    workers = min(jobs_for(jobs), len(paths))
    if workers <= 1:
        return [analyze_file(p, config, rules, max_line_bytes, jobs) for p in paths]
    reports: list[TraceReport | None] = [None] * len(paths)
    lost: list[int] = []
    # Largest first, so that a big trace picked last does not leave one worker running alone at the end.
    order = sorted((k for k, p in enumerate(paths) if p != "-"), key=lambda k: -_size(paths[k]))
    import concurrent.futures

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
