"""The `.zst` reader against `zstd -dc | wc -l` (issue 28): a trace of realistic compression (pcm16 audio deltas as
speech-like noise, about 1.4x with zstd -3) must be read (decompressed and split into lines, the loader's chunked line
scan) within 1.5x of the shell pipe, and analyzed within 1.5x of the same trace uncompressed.

Each figure is the best of `--repeat` runs: the pipe in a shell, the line scan in this process (`TraceReader._blocks`
as the fold's fast path reads it, every line counted), `rtrace analyze` in a subprocess. Exit 1 when a target is
missed. Run: `.venv/bin/python bench/bench_zstd.py` (the trace is generated once into bench/data/).
"""

from __future__ import annotations

import argparse
import base64
import random
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rtrace.core.loader import TraceReader  # noqa: E402

DATA = ROOT / "bench" / "data"
RTRACE = Path(sys.executable).parent / "rtrace"


def _speech(rng: random.Random, samples: int) -> str:
    """pcm16 as a bounded random walk (how speech-like audio compresses), base64."""
    v, out = 0, bytearray()
    for _ in range(samples):
        v = max(-3000, min(3000, v + rng.randint(-300, 300)))
        out += struct.pack("<h", v)
    return base64.b64encode(bytes(out)).decode()


def make_trace(path: Path, megabytes: int) -> None:
    """A voice call's shape: mostly audio deltas (each chunk unique within zstd's window), text around them."""
    rng = random.Random(28)
    pool = [_speech(rng, 2400) for _ in range(1500)]  # 9.6 MB of distinct chunks: beyond a 2 MiB window
    head = b'{"rtrace":1,"recorder":"bench_zstd"}\n'
    lines = [head, b'{"t":0.0,"dir":"server","conn":1,"event":{"type":"session.created","session":{}}}\n']
    size, t, k = 0, 0.0, 0
    while size < megabytes << 20:
        t += 0.1
        k += 1
        if k % 25 == 0:
            line = b'{"t":%.3f,"dir":"server","conn":1,"event":{"type":"response.output_audio_transcript.delta",' \
                   b'"response_id":"r1","item_id":"i1","delta":"hello "}}\n' % t  # fmt: skip
        else:
            line = (
                b'{"t":%.3f,"dir":"server","conn":1,"event":{"type":"response.output_audio.delta","response_id":"r1",'
                b'"item_id":"i1","output_index":0,"content_index":0,"delta":"%s"}}\n' % (t, pool[k % 1500].encode())
            )
        lines.append(line)
        size += len(line)
    path.write_bytes(b"".join(lines))


def best(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return min(times)


def scan(path: Path) -> int:
    with TraceReader.open(path) as reader:
        n = 0
        for _, lines, _ in reader._blocks(regions=True):
            n += lines[3] if isinstance(lines, tuple) else len(lines)
        return n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--level", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("zstd") is None:
        print("needs the zstd command", file=sys.stderr)
        return 2
    DATA.mkdir(parents=True, exist_ok=True)
    plain = DATA / f"zstd-{args.megabytes}mb.jsonl"
    packed = plain.with_name(plain.name + ".zst")
    if not plain.exists():
        make_trace(plain, args.megabytes)
    if not packed.exists() or packed.stat().st_mtime < plain.stat().st_mtime:
        subprocess.run(["zstd", "-q", "-f", f"-{args.level}", str(plain), "-o", str(packed)], check=True)
    ratio = plain.stat().st_size / packed.stat().st_size
    pipe = best(lambda: subprocess.run(f"zstd -dc {packed} | wc -l", shell=True, check=True, capture_output=True),
                args.repeat)  # fmt: skip
    lines = scan(packed)
    assert lines == scan(plain)
    read_zst = best(lambda: scan(packed), args.repeat)
    read_plain = best(lambda: scan(plain), args.repeat)
    analyze = [str(RTRACE), "analyze", "--isolated", "-j", "1", "--format", "json"]
    an_zst = best(lambda: subprocess.run([*analyze, str(packed)], capture_output=True), args.repeat)
    an_plain = best(lambda: subprocess.run([*analyze, str(plain)], capture_output=True), args.repeat)
    print(f"trace: {plain.stat().st_size / 1e6:.0f} MB, {lines:,} lines, zstd -{args.level} {ratio:.2f}x")
    print(f"zstd -dc | wc -l          {pipe:7.3f} s")
    print(f"line scan, .zst           {read_zst:7.3f} s  {read_zst / pipe:5.2f}x the pipe (target <= 1.5x)")
    print(f"line scan, plain          {read_plain:7.3f} s")
    print(f"analyze -j 1, .zst        {an_zst:7.3f} s  {an_zst / an_plain:5.2f}x the plain file (target <= 1.5x)")
    print(f"analyze -j 1, plain       {an_plain:7.3f} s")
    return 0 if read_zst <= 1.5 * pipe and an_zst <= 1.5 * an_plain else 1


if __name__ == "__main__":
    sys.exit(main())
