"""Chatter on stderr (never stdout, which carries data): session lines, run starts and ends, a live line."""
from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Optional

from .report.redact import console
from .run.types import RunResult, RunSpec


def run_line(r: RunResult, detail: bool = False) -> str:
    """The one line a finished run gets, wherever runs are reported (run, nightly -v, scenarios check)."""
    sig = r.signature
    text = f"[{r.spec.name}] {r.outcome.value} in {r.exit.duration:.1f}s"
    if sig:
        text += f": {sig.kind}/{sig.phase}" + (f": {sig.message}" if detail else "")
    return text


class Progress:
    """verbosity < 0 says nothing; > 0 adds each failure's message and a line per run start.
    runs_only keeps the session's own lines quiet (a caller that frames the runs with lines of its own);
    write sends every line to the caller's own sink (the nightly's, which -q silences).

    On a terminal, a live line shows the oldest running run and its time so far, redrawn every second by a
    thread that sleeps between redraws: a compile or a hang shows life, not only a run that ended. Lines
    at -v are never cut to the terminal's width: they are printed whole, above the live line."""

    def __init__(self, verbosity: int = 0, indent: str = "", runs_only: bool = False,
                 write: Optional[Callable[[str], None]] = None) -> None:
        self.verbosity = verbosity
        self.indent = indent
        self.runs_only = runs_only
        self.write = write or (lambda text: print(text, file=sys.stderr, flush=True))
        self.live = write is None and not indent and sys.stderr.isatty()
        self._lock = threading.Lock()
        self._places: dict[str, str] = {}  # run name -> "baseline run 2/10"
        self._running: dict[str, float] = {}  # run name -> start (monotonic)
        self._ticker: Optional[threading.Thread] = None

    def batch(self, specs: Sequence[RunSpec]) -> None:
        """Names each run's place in its batch: the live line says `run i/n`."""
        for i, spec in enumerate(specs, 1):
            at, of = spec.place if spec.place[1] else (i, len(specs))
            self._places[spec.name] = f"{spec.stage} run {at}/{of}"

    def say(self, text: str) -> None:
        if self.verbosity >= 0 and not self.runs_only:
            with self._lock:
                self._clear()
                self.write(console(text))

    def start(self, spec: RunSpec) -> None:
        with self._lock:
            self._running[spec.name] = time.monotonic()
        if self.verbosity > 0 and not self.live:
            self.write(f"{self.indent}[{spec.name}] started ({self._places.get(spec.name, spec.stage)})")
        if self.live and self.verbosity >= 0 and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def run(self, r: RunResult) -> None:
        with self._lock:
            self._running.pop(r.spec.name, None)
            if self.verbosity < 0:
                return
            text = self.indent + console(run_line(r, self.verbosity > 0))
            if self.live and self.verbosity == 0:
                self._draw(text)
            else:
                self._clear()
                self.write(text)

    def _tick(self) -> None:
        while True:
            time.sleep(1.0)
            with self._lock:
                if self._running:
                    name, since = min(self._running.items(), key=lambda item: item[1])
                    more = f", {len(self._running) - 1} more running" if len(self._running) > 1 else ""
                    self._draw(f"[{name}] running {time.monotonic() - since:.0f}s "
                               f"({self._places.get(name, '')}{more})")

    def _draw(self, text: str) -> None:
        sys.stderr.write("\r\033[K" + text[: shutil.get_terminal_size().columns - 1])
        sys.stderr.flush()

    def _clear(self) -> None:
        if self.live:
            sys.stderr.write("\r\033[K")
