"""A log's excerpt for the report: its key lines, head and tail, read in bounded time whatever the log's size."""
from __future__ import annotations

import os
import re

from ..run.classify import collapse_repeats

_KEY_LINE = re.compile(r"Error|error:|Exception|Assertion|Fatal Python error|Segmentation fault|Aborted|"
                       r"terminate called|_launch: |At least one|unmatched|non-finite|illegal|killed|dropped here")
EXCERPT_READ = 256 << 10
LINE_CHARS = 240


def log_excerpt(path: str, head_lines: int = 15, tail_lines: int = 40, key_lines: int = 20) -> dict:
    """Key lines first, then head and tail; reads at most 2 x 256 KiB of the log whatever its size."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(EXCERPT_READ).decode("utf-8", errors="replace")
            if size > 2 * EXCERPT_READ:
                f.seek(size - EXCERPT_READ)
                tail = f.read().decode("utf-8", errors="replace")
                tail = tail[tail.find("\n") + 1:]
            else:
                tail = head[len(head) // 2:] if size > EXCERPT_READ else head
                head = head if size <= EXCERPT_READ else head[: len(head) // 2]
    except OSError:
        return {"log": path, "bytes": 0, "key_lines": [], "head": "", "tail": "(log missing)"}
    lines_h, lines_t = head.splitlines(), tail.splitlines()
    whole = lines_h if size <= EXCERPT_READ else lines_h + lines_t
    keys = [line for line in collapse_repeats(whole) if _KEY_LINE.search(line)]
    clip = lambda ls: "\n".join(l if len(l) <= LINE_CHARS else l[:LINE_CHARS] + " [...]" for l in ls)  # noqa: E731
    return {"log": path, "bytes": size, "key_lines": [l[:LINE_CHARS] for l in dict.fromkeys(keys[-key_lines:])],
            "head": clip(lines_h[:head_lines]) if len(whole) > head_lines + tail_lines else "",
            "tail": clip(whole[-tail_lines:])}
