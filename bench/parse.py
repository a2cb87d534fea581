#!/usr/bin/env python3
"""Item 5 of issue #7: level-2 log parsing throughput and peak memory, on a generated 1 GB log.

The log is real CPU and CUDA captures from tests/logs, repeated as calls of a model (its input block, then
launch blocks with varied kernel/buffer names and values and scalar lines; NaNs in its last calls, so that the
parse, which stops at the first call that shows a bad value, reads all of it), read exactly as the ladder reads
one (Ladder.inspect): level2_file.read_level2(path, bound), which cuts a large log at the starts of calls into
ranges that two worker processes parse (one CPU: in-process). Throughput = bytes / parse time (warm page cache) in a fresh
subprocess; peak RSS = the peak, sampled every 10 ms, of the summed RSS of that subprocess and its workers,
shown beside the same interpreter's RSS after its imports alone. The log lives in a temporary folder that
is deleted afterwards. Figures: see bench/_common.py.

Usage: python bench/parse.py [--repeats 3] [--log-mb 1024]
"""
from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from _common import LOGS, main, read, spread, table


_BLOCK_START = re.compile(r"^\[  (?:before_launch|after_launch|aoti_model_inputs) - ", re.M)
_NAME = re.compile(r"\b(cpp_fused_\w+?|triton_\w+?|aoti_torch_\w+?)_(\d+)\b")
_STAT = re.compile(r"^(Mean|Min|Max) value: .*$", re.M)


def _template_blocks() -> tuple[str, list[str]]:
    """A model-input block and the launch blocks of real level-2 captures (values, headers, scalar lines)."""
    blocks = []
    for name in ("cpu/nan_after_matmul_level2.log", "cpu/index_oob_level2_filtered.log",
                 "cuda/nan_triton_level2.log"):
        text = read(os.path.join(LOGS, name))
        starts = [m.start() for m in _BLOCK_START.finditer(text)] + [len(text)]
        blocks += [text[a:b] for a, b in zip(starts, starts[1:])]
    inputs = [b for b in blocks if b.startswith("[  aoti_model_inputs")]
    return inputs[0], [b for b in blocks if not b.startswith("[  aoti_model_inputs")]


def _varied_chunk(rng: random.Random, blocks: tuple[str, list[str]], size: int, nan: bool = False) -> str:
    """About `size` bytes of calls of a model: its input, then launch blocks with kernels renamed within a fixed
    pool (a real model has a bounded set of kernels, launched again on every call), buffers renamed and
    statistics redrawn; `nan`: NaNs mixed in."""
    first, launches = blocks
    parts, total = [], 0
    while total < size:
        b = first if len(parts) % CALL_BLOCKS == 0 else rng.choice(launches)
        k = rng.randrange(500)
        b = _NAME.sub(lambda m: f"{m.group(1)}_{k}", b)
        b = re.sub(r"\bbuf\d+\b", lambda m: f"buf{rng.randrange(200)}", b)
        mean, half = rng.gauss(0, 10), abs(rng.gauss(0, 10))
        value = {"Mean": mean, "Min": mean - half, "Max": mean + half}
        if nan and rng.random() < 0.01:
            value = dict.fromkeys(value, math.nan)
        b = _STAT.sub(lambda m: f"{m.group(1)} value: {value[m.group(1)]:.6g}", b)
        parts.append(b)
        total += len(b)
    return "".join(parts)


CALL_BLOCKS = 2000  # blocks per call of the generated model (its input's, then its launches')


def write_level2_log(path: str, size: int) -> int:
    """Cycles through 8 differently drawn 4 MB chunks (drawing 1 GB would take minutes); its last calls have NaNs
    mixed in. A parse reads the log up to the first call that shows a bad value: here, all of it."""
    rng = random.Random(7)
    blocks = _template_blocks()
    chunks = [_varied_chunk(rng, blocks, 4 << 20) for _ in range(8)]
    last = _varied_chunk(rng, blocks, 1 << 20, nan=True)
    written = 0
    with open(path, "w") as f:
        while written < size - len(last):
            piece = chunks[written // (4 << 20) % len(chunks)]
            f.write(piece)
            written += len(piece)
        f.write(last)
    return os.path.getsize(path)


_PARSE = """
import json, sys, time
from aoti_bisect.aoti import level2_file
from aoti_bisect.diagnose import ladder  # ladder: the same imports, hence the same RSS, as a real run
if __name__ == "__main__" and sys.argv[2] == "parse":
    start = time.perf_counter()
    views, inputs = level2_file.read_level2(sys.argv[1], 16)  # as Ladder.inspect reads a log
    took = time.perf_counter() - start
    print(json.dumps({"seconds": took, "kernels": len(views), "inputs": len(inputs)}))
"""


def _tree_rss(argv: list[str]) -> tuple[str, float]:
    """(stdout, peak of the summed RSS of the child and its descendants in MB).
    The sum is sampled every 10 ms: the parse's worker processes live for seconds, so a peak is not missed
    by more than what a worker gains in 10 ms."""
    import psutil
    child = subprocess.Popen(argv, stdout=subprocess.PIPE)
    proc, peak_sum = psutil.Process(child.pid), 0
    reader = ThreadPoolExecutor(1).submit(child.stdout.read)
    while child.poll() is None:
        try:
            total = sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
            peak_sum = max(peak_sum, total)
        except psutil.Error:  # a worker exited between the listing and the reading
            pass
        time.sleep(0.01)
    out = reader.result().decode()
    if child.returncode:
        sys.exit(f"parse child failed: {argv}")
    return out, peak_sum / 2**20


def run(args) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-parse-") as tmp:
        path = os.path.join(tmp, "level2.log")
        size = write_level2_log(path, args.log_mb << 20)
        rates, peaks = [], []
        _, imports = _tree_rss([sys.executable, "-c", _PARSE, path, "imports-only"])
        for _ in range(args.repeats):
            out, peak = _tree_rss([sys.executable, "-c", _PARSE, path, "parse"])
            got = json.loads(out)
            rates.append(size / 1e6 / got["seconds"])
            peaks.append(peak)
    print(f"item 5: level-2 log parsing (level2_file.read_level2, as the inspect stage reads a log), {size / 1e6:.0f} MB "
          f"log, {got['kernels']} kernels, {os.cpu_count()} CPUs; {args.repeats} repeats, median (min-max)\n")
    print(table(["throughput MB/s", "peak RSS MB (all processes)", "RSS after imports MB"],
                [[spread(rates, "{:.0f}"), spread(peaks, "{:.0f}"), f"{imports:.0f}"]]))
    print()


if __name__ == "__main__":
    main(__doc__, run, ("repeats", "log_mb"))
