"""A log's excerpt for the report: its key lines, head and tail, read in bounded time whatever the log's size."""
from __future__ import annotations

import os
import re
from typing import Optional

from ..files.own import NotOwnFile, open_own
from ..run.classify import collapse_repeats
from .record import Excerpt
from .redact import Redactor

_KEY_LINE = re.compile(r"Error|error:|Exception|Assertion|Fatal Python error|Segmentation fault|Aborted|"
                       r"terminate called|_launch: |At least one|unmatched|non-finite|illegal|killed|dropped here")
EXCERPT_READ = 256 << 10
LINE_CHARS = 240


MARGIN = 64 << 10  # read past a chunk's edge up to a line end: a key block or a long line is masked whole


def log_excerpt(path: str, head_lines: int = 15, tail_lines: int = 40, key_lines: int = 20,
                redactor: Optional[Redactor] = None) -> Excerpt:
    """Key lines first, then head and tail; reads at most 2 x (256 + 64) KiB of the log whatever its size.

    Masks before it cuts: each chunk read is redacted whole (a private key's BEGIN and END lines together, a
    line's secret before the line is cut at LINE_CHARS), and only then split into lines, picked and clipped.
    A chunk's edges are line ends, and a key block cut by one is masked from its remaining BEGIN or END line.
    A log that is a link (the repro replaced its own log) is not read."""
    redactor = redactor or Redactor()
    try:
        with os.fdopen(open_own(path), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size <= 2 * EXCERPT_READ:
                head, tail = f.read(2 * EXCERPT_READ), b""
            else:
                head = _upto_line_end(f.read(EXCERPT_READ + MARGIN))
                f.seek(size - EXCERPT_READ)
                tail = _from_line_start(f.read())
    except NotOwnFile:
        return Excerpt(path, 0, (), "", "(log not read: a link, or not a regular file)")
    except OSError:
        return Excerpt(path, 0, (), "", "(log missing)")
    head_text = redactor(head.decode("utf-8", errors="replace"))
    tail_text = redactor(tail.decode("utf-8", errors="replace"))
    lines_h, lines_t = head_text.splitlines(), tail_text.splitlines()
    whole = lines_h + lines_t
    keys = [line for line in collapse_repeats(whole) if _KEY_LINE.search(line)]
    clip = lambda ls: "\n".join(l if len(l) <= LINE_CHARS else l[:LINE_CHARS] + " [...]" for l in ls)  # noqa: E731
    return Excerpt(path, size, tuple(l[:LINE_CHARS] for l in dict.fromkeys(keys[-key_lines:])),
                   clip(lines_h[:head_lines]) if len(whole) > head_lines + tail_lines else "",
                   clip(whole[-tail_lines:]))


def _upto_line_end(chunk: bytes) -> bytes:
    """The chunk up to its first line end past EXCERPT_READ; in a longer line, up to its last space or tab
    (no token holds one), else without that line's piece: never a token cut in two."""
    if len(chunk) <= EXCERPT_READ:
        return chunk
    cut = chunk.find(b"\n", EXCERPT_READ)
    if cut == -1:
        cut = max(chunk.rfind(b" "), chunk.rfind(b"\t"), chunk.rfind(b"\n"))
    return chunk[:cut + 1]


def _from_line_start(chunk: bytes) -> bytes:
    """The chunk from its first line start (a space or tab in a line longer than the chunk), as above."""
    starts = [i for i in (chunk.find(c) for c in (b"\n", b" ", b"\t")) if i != -1]
    return chunk[min(starts) + 1:] if starts else b""
