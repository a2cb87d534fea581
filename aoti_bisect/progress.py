"""Chatter on stderr (never stdout, which carries data): session lines, and one line per finished run."""
from __future__ import annotations

import shutil
import sys
from typing import Callable, Optional


def run_line(r, detail: bool = False) -> str:
    """The one line a finished run gets, wherever runs are reported (run, nightly -v, scenarios check)."""
    sig = r.signature
    text = f"[{r.spec.name}] {r.outcome.value} in {r.exit.duration:.1f}s"
    if sig:
        text += f": {sig.kind}/{sig.phase}" + (f": {sig.message}" if detail else "")
    return text


class Progress:
    """verbosity < 0 says nothing; > 0 adds each failure's message. On a terminal, run lines share one live line.
    runs_only keeps the session's own lines quiet (a caller that frames the runs with lines of its own);
    write sends every line to the caller's own sink (the nightly's, which -q silences)."""

    def __init__(self, verbosity: int = 0, indent: str = "", runs_only: bool = False,
                 write: Optional[Callable[[str], None]] = None) -> None:
        self.verbosity = verbosity
        self.indent = indent
        self.runs_only = runs_only
        self.write = write or (lambda text: print(text, file=sys.stderr, flush=True))
        self.live = write is None and not indent and sys.stderr.isatty()

    def say(self, text: str) -> None:
        if self.verbosity >= 0 and not self.runs_only:
            if self.live:
                sys.stderr.write("\r\033[K")
            self.write(text)

    def run(self, r) -> None:
        if self.verbosity < 0:
            return
        text = self.indent + run_line(r, self.verbosity > 0)
        if self.live:
            sys.stderr.write("\r\033[K" + text[: shutil.get_terminal_size().columns - 1])
            sys.stderr.flush()
        else:
            self.write(text)
