"""Reads a level-2 printer log from disk: in line-aligned pieces, and in two worker processes when it is big.

Unlike printer.py (pure functions over text), this module opens files and may spawn a process pool.
"""
from __future__ import annotations

import math
import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from itertools import repeat
from typing import BinaryIO, Optional

from ..files.own import NotOwnFile, open_own
from .printer import (
    BLOCK_HEADER,
    Observation,
    TensorStats,
    collect_call,
    is_bad,
    parse_blocks,
)


def read_pieces(path: str, size: int = 1 << 20, start: int = 0, end: Optional[int] = None) -> Iterator[str]:
    """Bytes [start, end) of a text file in pieces of about `size` bytes, each ending at a line end (for
    parse_blocks), decoded as text mode would (UTF-8, errors replaced, universal newlines). A log the repro
    replaced by a link (files/own.open_own) yields nothing: its target is another file of the user's."""
    try:
        fd = open_own(path)
    except NotOwnFile:
        return
    with os.fdopen(fd, "rb") as f:
        f.seek(start)
        left = math.inf if end is None else end - start
        while left > 0 and (piece := f.read(int(min(size, left)))):
            if not piece.endswith(b"\n") and len(piece) < left:
                piece += f.readline()
            left -= len(piece)
            # Pieces end at a line end, so no UTF-8 sequence and no \r\n pair is cut between two of them.
            text = piece.decode("utf-8", "replace")
            yield text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _fold(into: dict[str, TensorStats], later: dict[str, TensorStats], bound: Optional[int]) -> None:
    """collect's rule between two tables folded from consecutive parts of one log (collect keeps its own
    copy of the rule inline: its loop runs once per block, millions of times, and a call costs)."""
    for arg, s in later.items():
        old = into.get(arg)
        if old is None or (is_bad(s, bound) and not is_bad(old, bound)):
            into[arg] = s


def _collect_range(path: str, start: int, end: int, bound: Optional[int]) -> tuple[Observation, bool]:
    return collect_call(parse_blocks(read_pieces(path, start=start, end=end)), bound)


def _line_at_or_after(f: BinaryIO, offset: int, size: int, starts: bytes,
                      takes: Callable[[str], object] = lambda line: True) -> int:
    """The offset of the first line at or after `offset` that begins with `starts` and that `takes` accepts (read
    whole), else `size`."""
    f.seek(max(offset - 1, 0))
    pos = f.tell()
    carry = b"\n" if offset == 0 else b""  # the file's first line follows no newline
    needle = b"\n" + starts
    while pos < size and (chunk := carry + f.read(1 << 20)) != carry:
        base = pos - len(carry)
        i = chunk.find(needle)
        while i >= 0:
            if takes(chunk[i + 1:chunk.find(b"\n", i + 1)].decode("utf-8", "replace")):
                return base + i + 1
            i = chunk.find(needle, i + 1)
        pos = base + len(chunk)
        carry = chunk[-4096:]  # a line cut by the read is found again in the next one
    return size


def _first_input(f: BinaryIO, size: int) -> Optional[bytes]:
    """The header line that starts every call of the model (its first input's), where the log has one."""
    at = _line_at_or_after(f, 0, size, b"[  aoti_model_inputs - ")
    if at >= size:
        return None
    f.seek(at)
    return f.readline().rstrip(b"\r\n")


def read_level2(path: str, bound: Optional[int] = None, workers: Optional[int] = None,
                parallel_from: int = 64 << 20) -> Observation:
    """collect(parse_blocks(read_pieces(path)), bound), which it equals. A log of `parallel_from` bytes or
    more is cut into one range per worker process (default: two where two CPUs are usable): at the starts of calls
    of the model, each range's chosen call (printer.collect_call) taken in log order; in a log of one call, at block
    headers, their views folded in log order. Two, not one per CPU: each worker holds a view of its own (~35 MB
    on a gigabyte log), and two already take the parse well past 100 MB/s.

    The workers are spawned, so a script that calls this must guard its own top level with
    `if __name__ == "__main__":`, as any spawning library asks (the console entry points do)."""
    size = os.lstat(path).st_size  # a link's own: read_pieces reads nothing through one
    workers = workers or min(2, len(os.sched_getaffinity(0)))
    if size < parallel_from or workers < 2:
        return _collect_range(path, 0, size, bound)[0]
    with os.fdopen(open_own(path), "rb") as f:
        header = _first_input(f, size)
        cut = (lambda at: _line_at_or_after(f, at, size, header)) if header else \
            (lambda at: _line_at_or_after(f, at, size, b"[  ", BLOCK_HEADER.match))
        cuts = sorted({0, size} | {cut(size * i // workers) for i in range(1, workers)})
    # spawn, not fork: the ladder has threads (runs, the probe), and a forked child can inherit a held lock.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        parts = list(pool.map(_collect_range, repeat(path), cuts[:-1], cuts[1:], repeat(bound)))
    if header:
        return next((obs for obs, bad in parts if bad), parts[0][0])
    views, inputs = parts[0][0]
    for (later_views, later_inputs), _ in parts[1:]:
        for kernel, view in later_views.items():
            mine = views.setdefault(kernel, view)
            if mine is not view:
                _fold(mine.before, view.before, bound)
                _fold(mine.after, view.after, bound)
        _fold(inputs, later_inputs, bound)
    return views, inputs
