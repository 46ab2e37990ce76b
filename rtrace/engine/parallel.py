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
import re
import signal
import stat
from collections.abc import Callable, Sequence
from typing import IO, Any, cast

from ..core.loader import MAX_KEPT_PROBLEMS, TraceReader, UnreadableInput, compression_of, is_trace_name
from ..core.secrets import scrub_text
from ..rules.base import Config, Rule
from .fold import Fold, Observer, TraceReport, analyze_path, analyze_reader, digest
from .watch import Gate, Watch

#: Traces smaller than this are read by one process: below it a second process does not pay for itself (the audio
#: call, idle machine, default mode over `-j 1`, median wall: 55 MB 1.00x with 10% more CPU, 110 MB 0.93-0.95x,
#: 220 MB 0.90x).
SPLIT_MIN_BYTES = 64 * 1024 * 1024
#: The share of the file this process reads when it splits one; it also folds the whole trace, so it takes less.
SPLIT_SHARE = 0.45

#: The split read pays only where reading is most of the work: lines this long on average (a call's audio), not
#: a trace of small events, whose fold (serial, in this process) is the cost whatever reads the lines.
SPLIT_MIN_LINE_BYTES = 1024
#: ... and only with a core free for the second process (cores this process may use, less what runs beside it now:
#: `free_cores`): on a busy machine the two processes share one core and lose to one.
SPLIT_FREE_CORES = 1.0
#: How much of the trace `split_pays` looks at for its line length (hundreds of lines; 4 MB took 1.8 ms of CPU, this
#: 0.3 ms, before every default-mode analysis of a large trace, split or not).
_SAMPLE_BYTES = 256 << 10

#: Seconds to wait for the Dask scheduler to answer.
CONNECT_TIMEOUT = 10


class EngineUnavailable(Exception):
    """The Dask engine cannot be used: `dask[distributed]` (the `dask` extra) is missing, or the scheduler
    does not answer."""


def failed(path: str, why: str) -> TraceReport:
    """The report of a trace that could not be analyzed (key-like strings in `why` scrubbed)."""
    return TraceReport(path, 0, 0, 0.0, [], [], 0, unreadable=scrub_text(why))


def analyze_file(
    path: str,
    config: Config,
    rules: Sequence[type[Rule]],
    max_line_bytes: int,
    jobs: int = 1,
    observer: Observer | None = None,
    on_read: Callable[[int], None] | None = None,
) -> TraceReport:
    """One local trace (or `-`, stdin), other tools' captures converted as `rtrace analyze` does; never raises.
    With `jobs` > 1 a large trace is read by two processes (`analyze_split`); with an `observer` (which watches the
    fold, see `fold.Observer`), by this one. `on_read`: how far into the file this process has read
    (`TraceReader`), for a progress bar."""
    from ..core.importers import native_path, reader

    try:
        log = reader(os.fspath(path), max_line_bytes=max_line_bytes, on_read=on_read)
        if log is not None:  # a livekit-agents log: read in place, one process, its own line numbers
            with log:
                return analyze_reader(log, config, rules, observer)
        with native_path(path) as readable:
            report = None
            if jobs_for(jobs) > 1 and observer is None and split_pays(os.fspath(readable)):
                report = analyze_split(os.fspath(readable), config, rules, max_line_bytes, on_read=on_read)
            if report is None:
                report = analyze_path(
                    readable, config, rules, observer, max_line_bytes=max_line_bytes, on_read=on_read
                )
            if readable != path:  # a conversion's lines, not the file's
                report.line_marks = ()
        report.path = path
        return report
    except UnreadableInput as e:
        return failed(path, str(e))
    except Exception as e:  # a bug in one trace's analysis must not end the others
        return failed(path, f"analysis failed: {type(e).__name__}: {e}")


def free_cores(sample: Callable[[], int | None] | None = None, load: Callable[[], float | None] | None = None) -> float:
    """Cores this process may run on (its affinity) less what else runs on them now, measured at the call: the
    kernel's run queue (`sample`, by default `procs_running` of /proc/stat, this process counted), or the 1-minute
    load average (`load`, by default `os.getloadavg`) where there is no /proc/stat (`free_of`). 0 or less on a busy
    machine. One sample: a second one after a sleep cost a wait for a core on a busy machine (8 ms with two busy
    processes beside it) and could only find a core free that the first did not (a task that passed by); a split
    started on a sample that was wrong is undone within `watch.WATCH_AFTER_S` (see `analyze_split`)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    found = (sample or procs_running)()
    running = [found] if found is not None else []
    return free_of(cores, running, None if running else (load or _load_average)())


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average
        return None


def procs_running() -> int | None:
    """The tasks running or ready to run on the whole machine now, this one included (/proc/stat), or None."""
    try:
        with open("/proc/stat", "rb") as f:
            stat_text = f.read()
    except OSError:
        return None
    at = stat_text.find(b"\nprocs_running ")
    if at < 0:
        return None
    value = stat_text[at + 15 : stat_text.find(b"\n", at + 1)].strip()
    return int(value) if value.isdigit() else None


def free_of(cores: int, running: Sequence[int], load: float | None) -> float:
    """The cores free for a second process: `cores` less the tasks that ran beside this one in every sample of the
    run queue (`running`, this process included in each: a busy neighbour is runnable in all of them, a task that
    only passed by is not); without samples, less the load average `load` (which lags a minute behind: a machine
    that just got busy reads idle); without either, none (read alone)."""
    if running:
        return cores - max(0, min(running) - 1)
    if load is not None:
        return cores - load
    return 0.0


def split_pays(path: str) -> bool:
    """Whether a second process can shorten reading the trace at `path` (see `analyze_split`): its lines are long
    (`SPLIT_MIN_LINE_BYTES`, measured on the trace's start) and a core is free for it now (`SPLIT_FREE_CORES`,
    `free_cores`: on a loaded machine one process is never slower than two). False for anything not a regular
    file of at least `SPLIT_MIN_BYTES`."""
    try:
        if path == "-" or not os.path.isfile(path) or os.path.getsize(path) < SPLIT_MIN_BYTES:
            return False
        with open(path, "rb") as f:
            sample = f.read(_SAMPLE_BYTES)
    except OSError:
        return False
    lines = sample.count(b"\n")
    if lines and len(sample) / lines < SPLIT_MIN_LINE_BYTES:
        return False
    return free_cores() >= SPLIT_FREE_CORES


def analyze_split(
    path: str,
    config: Config,
    rules: Sequence[type[Rule]],
    max_line_bytes: int,
    *,
    share: float | None = None,
    min_bytes: int | None = None,
    on_read: Callable[[int], None] | None = None,
    watch: Callable[[int], Watch] | None = None,
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

    `split_pays` decided on one look at the run queue; `watch` (by default `watch.Watch`, made with the child's pid)
    looks again `watch.WATCH_AFTER_S` into the read: when the two processes did not each get a core, the child is
    killed and this process reads on past the cut to the end (`watch.Gate`), losing only that time's share of a
    core, and the report is the one `fold.analyze_path` gives.
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
    looks = (watch or Watch)(pid)

    def ask() -> bool | None:
        verdict = looks.alone()
        if verdict:  # the two share cores with others: the child's part is read here instead
            os.kill(pid, signal.SIGKILL)
        return verdict

    try:
        with open(path, "rb") as f:
            gate = Gate(f, cut, ask)  # the part up to the cut, or the whole file once the watch says so
            with TraceReader(cast(IO[bytes], gate), path, max_line_bytes=max_line_bytes, on_read=on_read) as reader:
                fold = Fold(config, rules)
                fold.rows(reader.rows())
        if gate.alone:  # read whole by this process: the report `fold.analyze_path` gives
            report = fold.report(path, reader.count, reader.problems, reader.problem_count, reader.header)
            report.line_marks = reader.marks or ()
            if reader.unusable is not None:
                report.unreadable = f"{reader.path}: {reader.unusable}"
            return report
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
    small, not a regular file, UTF-16, compressed (it cannot be entered in the middle: one process reads it), or
    has no line after that point."""
    try:
        st = os.stat(path)  # before opening: a named pipe would block, and it cannot be read twice anyway
        size = st.st_size
        if size < max(min_bytes, 1) or not stat.S_ISREG(st.st_mode):
            return None
        with open(path, "rb") as f:
            head = f.read(8)
            if compression_of(head) is not None:
                return None
            head = head[:4]
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
    import pickle  # only a split read needs it: not imported by every command

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
    import pickle

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


#: fsspec storage options (`--storage-options`): credentials, endpoint, region... passed to every `fsspec.open`.
StorageOptions = dict[str, Any]


def analyze_url(
    url: str,
    config: Config,
    rules: Sequence[type[Rule]],
    max_line_bytes: int,
    storage_options: StorageOptions | None = None,
    jobs: int = 1,
    on_read: Callable[[int], None] | None = None,
) -> TraceReport:
    """One trace at a local path (`analyze_file`) or an fsspec URL (`s3://bucket/a.jsonl`, opened with
    `storage_options`); never raises. Runs in this process, a pool worker or a Dask worker."""
    if "://" not in url:
        return analyze_file(url, config, rules, max_line_bytes, jobs, on_read=on_read)
    try:
        import fsspec

        stream = fsspec.open(url, "rb", **(storage_options or {})).open()
    except Exception as e:  # a missing backend, no credentials, no endpoint, no such object
        return failed(url, storage_error(url, e))
    try:
        with stream, TraceReader(stream, url, max_line_bytes=max_line_bytes) as reader:
            return analyze_reader(reader, config, rules)
    except OSError as e:
        return failed(url, f"{url}: read error: {e.strerror or e}")
    except Exception as e:
        return failed(url, f"analysis failed: {type(e).__name__}: {e}")


def storage_error(url: str, e: BaseException) -> str:
    """What went wrong reaching `url`, for people: no backend, no credentials, no endpoint, not found, denied."""
    names = {cls.__name__ for cls in type(e).__mro__}
    scheme = url.split("://", 1)[0]
    if isinstance(e, ImportError):
        hint = " (pip install 'rtrace-cli[s3]')" if scheme in ("s3", "s3a") else ""
        return f"{url}: reading {scheme}:// URLs needs its fsspec backend{hint}: {e}"
    if names & {"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"}:
        return (
            f"{url}: no credentials for this storage: pass them with --storage-option key=... --storage-option "
            f"secret=... (or --storage-options JSON), or set the backend's own environment ({e})"
        )
    if names & {"EndpointConnectionError", "ConnectTimeoutError", "ClientConnectorError", "ConnectionError"}:
        return f"{url}: cannot reach the storage endpoint: {e}"
    if isinstance(e, FileNotFoundError):
        return f"{url}: not found ({e})"
    if isinstance(e, PermissionError):
        return f"{url}: access denied ({e})"
    if isinstance(e, OSError):
        return f"{url}: {e.strerror or e}"
    unknown = re.search(r"unexpected keyword argument '([^']+)'", str(e)) if isinstance(e, TypeError) else None
    if unknown:  # a --storage-option the backend does not take: the user's typo, named as such
        return f"{url}: the {scheme}:// backend has no storage option {unknown.group(1)!r} (see its fsspec docs)"
    return f"{url}: {type(e).__name__}: {e}"


def analyze_batch(
    urls: Sequence[str],
    config: Config,
    rules: Sequence[type[Rule]],
    max_line_bytes: int,
    storage_options: StorageOptions | None = None,
) -> list[TraceReport]:
    """`analyze_url` of each of `urls`, in order: one Dask task (small traces go by the partition)."""
    return [analyze_url(url, config, rules, max_line_bytes, storage_options) for url in urls]


def jobs_for(jobs: int) -> int:
    """`-j 0` means one job per CPU."""
    return jobs if jobs > 0 else (os.cpu_count() or 1)


def analyze_local(
    paths: Sequence[str],
    config: Config,
    rules: Sequence[type[Rule]],
    max_line_bytes: int,
    jobs: int = 1,
    storage_options: StorageOptions | None = None,
    on_read: Callable[[int], None] | None = None,
    on_trace: Callable[[], None] | None = None,
) -> list[TraceReport]:
    """Analyze `paths` (local paths or fsspec URLs) with `jobs` processes (1: in this process; one path: split when
    large). Reports are in the order of `paths`. For a progress bar: `on_read`, how far into its file the one trace
    of `paths` has been read by this process (`TraceReader`); `on_trace`, told as each trace is done."""
    workers = min(jobs_for(jobs), len(paths))
    so = storage_options
    told = on_trace or (lambda: None)
    if workers <= 1:
        done = []
        for p in paths:
            done.append(analyze_url(p, config, rules, max_line_bytes, so, jobs, on_read if len(paths) == 1 else None))
            told()
        return done
    reports: list[TraceReport | None] = [None] * len(paths)
    lost: list[int] = []
    # Largest first, so that a big trace picked last does not leave one worker running alone at the end.
    order = sorted((k for k, p in enumerate(paths) if p != "-"), key=lambda k: -_size(paths[k]))
    import concurrent.futures

    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(analyze_url, paths[k], config, rules, max_line_bytes, so): k for k in order}
        for k, p in enumerate(paths):  # stdin can only be read by this process
            if p == "-":
                reports[k] = analyze_file(p, config, rules, max_line_bytes)
                told()
        for future in concurrent.futures.as_completed(futures):
            k = futures[future]
            try:
                reports[k] = future.result()
            except concurrent.futures.process.BrokenProcessPool:
                lost.append(k)
                continue
            told()
    # A worker that died (killed, out of memory) breaks the whole pool: every trace it took down is retried
    # alone, so only the one that kills its worker is reported as failed.
    for k in lost:
        with concurrent.futures.ProcessPoolExecutor(max_workers=1) as pool:
            try:
                reports[k] = pool.submit(analyze_url, paths[k], config, rules, max_line_bytes, so).result()
            except concurrent.futures.process.BrokenProcessPool as e:
                reports[k] = failed(paths[k], f"analysis failed: the worker process died ({e})")
        told()
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


def expand_urls(urls: Sequence[str], storage_options: StorageOptions | None = None) -> list[tuple[str, int]]:
    """Each fsspec URL, glob or directory (every `*.jsonl` under it) as the traces it names, with their sizes in
    bytes; local paths pass through (size from the file system). Raises `UnreadableInput` with a message for people
    when the storage cannot be listed (no backend, no credentials, no endpoint) or a URL names no trace."""
    out: list[tuple[str, int]] = []
    for url in urls:
        if "://" not in url:
            out.append((url, _size(url)))
            continue
        try:
            import fsspec.core

            fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
            protocol = fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol
            if fsspec.core.has_magic(path):  # a glob: what it matches, from one listing
                listed = fs.glob(path, detail=True)
            else:
                info = fs.info(path)
                listed = {path: info}
                if info.get("type") == "directory":
                    found = fs.find(path, detail=True)
                    listed = {name: i for name, i in found.items() if is_trace_name(name)}
        except Exception as e:  # no backend, no credentials, no endpoint, denied, not found
            raise UnreadableInput(storage_error(url, e)) from None
        traces = sorted((name, int(i.get("size") or 0)) for name, i in listed.items() if i.get("type") != "directory")
        if not traces:
            raise UnreadableInput(f"{url}: no trace there (a directory is searched for *.jsonl)")
        out.extend((p if "://" in p else f"{protocol}://{p}", size) for p, size in traces)
    return out


#: A Dask task reads about this many bytes of traces (small traces are batched up to it), and there are at least
#: `TASKS_PER_THREAD` tasks per worker thread when the traces allow, so that the cluster stays busy to the end.
BATCH_BYTES = 64 * 1024 * 1024
TASKS_PER_THREAD = 4


def batches(sizes: Sequence[int], threads: int) -> list[range]:
    """Cut traces of these sizes, in input order, into runs of about equal bytes: as many as the bytes need
    (`BATCH_BYTES` each) and at least `TASKS_PER_THREAD` per thread (fewer when there are fewer traces). A trace
    larger than a run's share is a run of its own."""
    count = len(sizes)
    if not count:
        return []
    total = sum(max(s, 1) for s in sizes)
    wanted = min(count, max(threads * TASKS_PER_THREAD, -(-total // BATCH_BYTES)))
    share = total / wanted
    out: list[range] = []
    start, acc = 0, 0
    for k, size in enumerate(sizes):
        size = max(size, 1)
        if acc and acc + size > share:
            out.append(range(start, k))
            start, acc = k, 0
        acc += size
    out.append(range(start, count))
    return out


def analyze_dask(
    urls: Sequence[str],
    config: Config,
    rules: Sequence[type[Rule]],
    max_line_bytes: int,
    scheduler: str,
    storage_options: StorageOptions | None = None,
    sizes: Sequence[int] | None = None,
) -> list[TraceReport]:
    """Analyze `urls` on the Dask cluster at `scheduler`, small traces batched into tasks (`batches`; `sizes` in
    bytes, else all alike), reports gathered in input order. Every worker opens its URLs with `storage_options`. A
    task the cluster lost (its worker died) is retried one trace per task, so only a trace that kills its worker
    is reported as failed."""
    try:
        from distributed import Client
    except ImportError:
        raise EngineUnavailable("--engine dask needs dask[distributed] (pip install 'rtrace-cli[dask]')") from None
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT)
    except (OSError, ValueError) as e:  # refused, timed out, or not an address at all
        raise EngineUnavailable(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
    kw: dict[str, Any] = {
        "config": config,
        "rules": tuple(rules),
        "max_line_bytes": max_line_bytes,
        "storage_options": storage_options,
    }
    try:
        threads = sum(client.nthreads().values()) or 1
        runs = batches(list(sizes) if sizes is not None else [1] * len(urls), threads)
        futures = client.map(analyze_batch, [list(urls[r.start : r.stop]) for r in runs], **kw, pure=False)
        reports: list[TraceReport] = []
        for run, future in zip(runs, futures, strict=True):
            try:
                reports.extend(future.result())
                continue
            except Exception:  # a lost worker, a task the cluster gave up on: each trace on its own
                pass
            singles = client.map(analyze_url, list(urls[run.start : run.stop]), **kw, pure=False)
            for url, single in zip(urls[run.start : run.stop], singles, strict=True):
                try:
                    reports.append(single.result())
                except Exception as e:
                    reports.append(failed(url, f"analysis failed on the cluster: {type(e).__name__}: {e}"))
        return reports
    finally:
        client.close()
